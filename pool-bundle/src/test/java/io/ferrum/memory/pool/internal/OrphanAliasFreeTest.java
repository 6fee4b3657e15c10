package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.lang.reflect.Field;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryMapping;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.HookedUpstream;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * A host's free of its alias that loses the name to the close of the block's own manager (a GPU's
 * bundle stopping): the free found the block before the close and claims after it. The steps are
 * taken one after the other on one thread, which is exactly that interleaving: the lookup the free
 * makes, the whole close, then the free's claim.
 */
class OrphanAliasFreeTest {
    private static final Device HOST = Device.cpu(1);
    private static final Device GPU = Device.cuda(1);

    @Test
    void aFreeThatLosesItsAliasToTheOwnersCloseIsTakenOnceAndLeavesNoRecord() throws Exception {
        Map<Device, PooledMemoryManager> running = new ConcurrentHashMap<>();
        PoolSettings settings = PoolSettings.defaults().withPeers(running::get);
        HandleTable hostTable = new HandleTable();
        HookedUpstream hostUp = new HookedUpstream(HOST, 64 * EngineLifetimeTest.MiB);
        ArenaUpstream gpuUp = new ArenaUpstream(GPU, 64 * EngineLifetimeTest.MiB, true);
        try (PoolEngine host = new PoolEngine(hostUp, EngineLifetimeTest.config(), settings, null, hostTable);
             PoolEngine gpu = new PoolEngine(gpuUp, EngineLifetimeTest.config(), settings, null)) {
            running.put(HOST, host);
            running.put(GPU, gpu);
            MemoryMapping mapping = gpu.createMapping(HOST, GPU, 4096);
            MemoryHandle alias = mapping.source();

            Block found = hostTable.lookup(alias.id()); // the free's lookup
            assertNotNull(found);
            gpu.close(); // the owner's close takes the alias's name
            Field f = PoolEngine.class.getDeclaredField("reclaimer");
            f.setAccessible(true);
            ((Reclaimer) f.get(host)).free(found, alias); // the free's claim, lost: taken all the same

            InvalidHandleException twice = assertThrows(InvalidHandleException.class, () -> host.deallocate(alias));
            assertEquals(alias, twice.handle());
            assertEquals(0, host.memoryInfo().usedBytes());
            assertEquals(0, host.handles().size());
        }
        assertEquals(0, gpuUp.liveBytes());
        assertEquals(0, hostUp.liveBytes());
    }
}
