package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.MemoryHandle;

/**
 * {@link PooledMemoryManager#closeIfUnused}: a device restart closes its manager only while no
 * block is live, and the check and the close are one step, so an allocation racing it is never
 * handed a block the close then drops.
 */
class EngineCloseIfUnusedTest extends EngineTestSupport {
    @Test
    void aLiveBlockMakesItRefuseAndChangeNothing() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryHandle h = m.allocate(4 * KiB, CPU);

        assertFalse(m.closeIfUnused());

        assertFalse(m.isClosed());
        assertTrue(m.owns(h));
        m.deallocate(m.allocate(KiB, CPU));
        m.deallocate(h);
        assertTrue(m.closeIfUnused());
        assertTrue(m.isClosed());
        assertEquals(0, up.liveBytes(), "every chunk went back");
        assertTrue(m.closeIfUnused(), "closed already");
    }

    @Test
    void blocksCachedByAThreadAreNotLive() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        m.deallocate(m.allocate(4 * KiB, CPU)); // into this thread's cache
        assertEquals(0, m.memoryInfo().activeAllocations(), "the freed block is cached, not live");

        assertTrue(m.closeIfUnused());
        assertEquals(0, up.liveBytes());
    }

    @Test
    void anAliasIssuedForAPeersBlockIsLive() {
        Map<Device, PooledMemoryManager> running = new java.util.concurrent.ConcurrentHashMap<>();
        PoolSettings settings = PoolSettings.defaults().withPeers(running::get);
        PooledMemoryManager a = manager(new ArenaUpstream(Device.cpu(1), 64 * MiB, true), config(pool(MiB, MiB)), settings);
        PooledMemoryManager b = manager(new ArenaUpstream(Device.cpu(2), 64 * MiB, true), config(pool(MiB, MiB)), settings);
        running.put(Device.cpu(1), a);
        running.put(Device.cpu(2), b);
        var mapping = a.createMapping(Device.cpu(1), Device.cpu(2), 4096);

        assertFalse(b.closeIfUnused(), "b's handle of the mapping would die with b");
        assertTrue(b.owns(mapping.target()));
        b.deallocate(mapping.target());
        assertTrue(b.closeIfUnused());
        assertTrue(a.owns(mapping.source()), "a's own handle lives on");
    }

    /**
     * zeroing=on-allocate names a block only after its fill, outside the pool's lock: the decision
     * under the locks cannot see it. Paused in the fill while the manager closes, the allocation
     * must be refused as on a closed manager, not handed a block whose memory the close released.
     */
    @Test
    void anAllocationNamedOutsideThePoolsLocksDuringTheCloseIsRefused() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        List<String> warnings = new CopyOnWriteArrayList<>();
        PooledMemoryManager m = PooledMemoryManager.create(up, config(pool(MiB, MiB)),
                PoolSettings.defaults().withZeroing(ZeroingPolicy.ON_ALLOCATE).withLog(warningsInto(warnings)), null);
        HookedUpstream.Pause fill = up.pauseNext(HookedUpstream.Call.FILL);
        // Threads of their own: the common pool may have one worker, which the paused fill holds.
        ExecutorService threads = Executors.newFixedThreadPool(2);
        Future<MemoryHandle> allocation = threads.submit(() -> m.allocate(4 * KiB, CPU));
        fill.awaitArrival(); // carved and pinned, not yet named

        Future<Boolean> close = threads.submit(m::closeIfUnused);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!m.isClosed()) { // decided: no named block; the close proper waits for the fill
            assertTrue(System.nanoTime() < deadline, "closeIfUnused never closed the manager");
            Thread.onSpinWait();
        }
        fill.release();

        Throwable refused = null;
        MemoryHandle handed = null;
        try {
            handed = allocation.get(30, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            refused = e.getCause();
        }
        assertNull(handed, "a handle of a block the close released was handed out");
        assertInstanceOf(DeviceUnavailableException.class, refused);
        assertTrue(close.get(30, TimeUnit.SECONDS));
        assertEquals(0, up.liveBytes(), "every chunk went back");
        assertTrue(warnings.stream().noneMatch(w -> w.contains("live allocation")),
                "no allocation reported that no one was given: " + warnings);
        threads.shutdown();
    }
}
