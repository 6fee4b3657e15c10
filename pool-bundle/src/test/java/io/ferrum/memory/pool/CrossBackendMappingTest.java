package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.ref.WeakReference;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryMapping;

/**
 * Mappings across two backends ({@code createMapping(cpu, cuda:i)}, issue 16): the GPU's manager
 * owns the block, the host's names it by an alias; each backend is its own bundle, so one may stop
 * while the other runs on.
 */
class CrossBackendMappingTest extends RaceHarness {
    static final Device HOST = Device.cpu(1);
    static final Device GPU = Device.cuda(1);

    private final Map<Device, PooledMemoryManager> running = new ConcurrentHashMap<>();
    private final PoolSettings settings = PoolSettings.defaults().withPeers(running::get);

    /**
     * The host frees its alias, the GPU its block, and then the GPU's bundle stops (its manager
     * closes): the host's manager names nothing of the GPU any more, so nothing of the GPU's manager
     * may stay reachable from it. Its upstream, and through it the stopped bundle's classes (on a
     * GPU: JCuda's), stayed in memory as long as the host's manager ran: the alias's slot in the
     * host's handle table kept pointing at the GPU's block after the free, until the host issued a
     * handle on that slot again.
     */
    @Test
    void aHostManagerThatFreedItsAliasKeepsNothingOfTheGpuManager() throws Exception {
        HookedUpstream hostUp = new HookedUpstream(HOST, 64 * MiB);
        PooledMemoryManager host = manager(hostUp, settings);
        running.put(HOST, host);
        WeakReference<ArenaUpstream> gpuUp = mapFreeThenCloseTheGpu(host);
        for (int i = 0; i < 20 && gpuUp.get() != null; i++) {
            System.gc();
            Thread.sleep(10);
        }
        assertNull(gpuUp.get(), "the host's manager still reaches the closed GPU manager's upstream");
        assertTrue(host.closeIfUnused());
        assertEquals(0, hostUp.liveBytes());
    }

    /** Maps a block of a new GPU manager for the host, frees both names, closes the GPU; keeps no reference to it. */
    private WeakReference<ArenaUpstream> mapFreeThenCloseTheGpu(PooledMemoryManager host) {
        ArenaUpstream up = new ArenaUpstream(GPU, 64 * MiB, true);
        PooledMemoryManager gpu = PooledMemoryManager.create(up, config(pool(MiB, MiB, 256)), settings, null);
        running.put(GPU, gpu);
        MemoryMapping mapping = gpu.createMapping(HOST, GPU, 4 * KiB);
        host.write(mapping.source(), 0, MemorySegment.ofArray(new byte[] {1, 2, 3}));
        host.deallocate(mapping.source());
        gpu.deallocate(mapping.target());
        running.remove(GPU);
        gpu.close();
        assertEquals(0, up.liveBytes(), "the GPU's chunks went back at its close");
        return new WeakReference<>(up);
    }
}
