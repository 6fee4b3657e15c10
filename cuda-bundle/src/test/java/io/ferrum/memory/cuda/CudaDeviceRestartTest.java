package io.ferrum.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * A configuration edit restarts a GPU only while it holds no live block (CudaDevices): the decision,
 * on a pooled manager over host memory (the GPU's own upstream needs a GPU; the decision is the
 * pool's {@code closeIfUnused} and what the refusal says).
 */
class CudaDeviceRestartTest {
    private static final Device GPU = Device.cuda(0);

    private static PooledMemoryManager manager() {
        return PooledMemoryManager.create(new ArenaUpstream(GPU, 64L << 20, true), MemoryManagerConfig.defaults(),
                PoolSettings.defaults(), null);
    }

    @Test
    void aGpuHoldingALiveBlockIsNotStoppedAndTheRefusalSaysWhatItHolds() {
        PooledMemoryManager m = manager();
        try {
            MemoryHandle h = m.allocate(4096, GPU);
            byte[] data = {1, 2, 3, 4};
            m.write(h, 0, MemorySegment.ofArray(data));
            assertEquals("cuda:0 holds 1 live block (4096 bytes) that a restart would drop: free them first",
                    CudaDevice.whyInUse(m, GPU));
            assertFalse(m.isClosed(), "a refused restart leaves the manager serving");
            byte[] back = new byte[4];
            m.read(h, 0, MemorySegment.ofArray(back));
            assertArrayEquals(data, back, "the block keeps its bytes");
            m.deallocate(h);
            assertNull(CudaDevice.whyInUse(m, GPU), "no live block: the restart goes on");
            assertTrue(m.isClosed(), "closed for the restart");
            assertNull(CudaDevice.whyInUse(m, GPU), "a closed manager is no reason to refuse");
        } finally {
            m.close();
        }
    }

    @Test
    void blocksAreCountedInTheRefusal() {
        PooledMemoryManager m = manager();
        try {
            m.allocate(1 << 20, GPU);
            m.allocate(1 << 20, GPU);
            assertEquals("cuda:0 holds 2 live blocks (2097152 bytes) that a restart would drop: free them first",
                    CudaDevice.whyInUse(m, GPU));
        } finally {
            m.close();
        }
    }

    /**
     * A mapping between two GPUs whose source handle was freed leaves its block in cuda:0's pool,
     * named only by the alias cuda:1 issued, which cuda:1 lists (mem:handles shows none under
     * cuda:0). The refusal said "holds 1 live block ... free them first", and the user found no
     * block on cuda:0 to free: it says where the block is listed.
     */
    @Test
    void aBlockNamedOnlyByAPeersHandleIsSaidToBeListedThere() {
        java.util.Map<Device, PooledMemoryManager> running = new java.util.concurrent.ConcurrentHashMap<>();
        PoolSettings settings = PoolSettings.defaults().withPeers(running::get);
        Device other = Device.cuda(1);
        PooledMemoryManager m = PooledMemoryManager.create(new ArenaUpstream(GPU, 64L << 20, true),
                MemoryManagerConfig.defaults(), settings, null);
        PooledMemoryManager peer = PooledMemoryManager.create(new ArenaUpstream(other, 64L << 20, true),
                MemoryManagerConfig.defaults(), settings, null);
        try {
            running.put(GPU, m);
            running.put(other, peer);
            var mapping = m.createMapping(GPU, other, 4096);
            m.deallocate(mapping.source());
            assertEquals("cuda:0 holds 1 live block (4096 bytes) that a restart would drop (mem:handles lists a block"
                    + " named only by another device's handle, the target of a mapping, under that device: free it"
                    + " there): free them first", CudaDevice.whyInUse(m, GPU));
        } finally {
            m.close();
            peer.close();
        }
    }
}
