package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryPressure;

/**
 * A pressure callback runs after the call that crossed the level has given back its shared cache's
 * lease: a callback on a virtual thread can trim what that cache holds and allocate, as one on a
 * platform thread can (found by an attack review: inside the lease, trim returned nothing and the
 * allocation ran out of memory).
 */
class EngineVirtualThreadPressureTest extends EngineTestSupport {

    /** @return what happened, in order: after the allocations, in the callback (trim, allocation), after the free, the end */
    private List<String> run(boolean virtual) throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB)), PoolSettings.defaults().withCapacity(8 * MiB));
        List<String> log = new ArrayList<>();
        AtomicReference<Throwable> failed = new AtomicReference<>();
        Runnable body = () -> {
            try {
                MemoryHandle a = m.allocate(3 * MiB, CPU);
                MemoryHandle b = m.allocate(3 * MiB, CPU);
                log.add("after 2x3MiB: live=" + up.liveBytes() + " used=" + m.memoryInfo().usedBytes());
                boolean[] once = {false};
                m.setPressureCallback(level -> {
                    if (once[0]) {
                        log.add("nested " + level);
                        return;
                    }
                    once[0] = true;
                    long before = up.liveBytes();
                    long trimmed = m.trim();
                    log.add("callback " + level + ": trim()=" + trimmed + " live " + before + " -> " + up.liveBytes());
                    try {
                        MemoryHandle c = m.allocate(3 * MiB, CPU);
                        log.add("callback allocate 3MiB: ok");
                        m.deallocate(c);
                    } catch (RuntimeException e) {
                        log.add("callback allocate 3MiB: " + e.getClass().getSimpleName() + ": " + e.getMessage());
                    }
                });
                m.deallocate(b);
                m.setPressureCallback(null);
                log.add("after free: live=" + up.liveBytes() + " used=" + m.memoryInfo().usedBytes());
                m.deallocate(a);
            } catch (Throwable e) {
                failed.set(e);
            }
        };
        Thread t = virtual ? Thread.ofVirtual().start(body) : Thread.ofPlatform().start(body);
        t.join();
        if (failed.get() != null) {
            throw new AssertionError(failed.get());
        }
        log.add("final trim()=" + m.trim() + " live=" + up.liveBytes());
        return log;
    }

    @Test
    void aCallbackOfAVirtualThreadsFreeTrimsItsSharedCacheAndAllocates() throws Exception {
        List<String> platform = run(false);
        List<String> virtual = run(true);
        assertEquals("callback LOW: trim()=" + 3 * MiB + " live " + 6 * MiB + " -> " + 3 * MiB, platform.get(1));
        assertEquals(platform.get(1), virtual.get(1), "the freed block waits in the shared cache: the callback's trim takes it");
        assertEquals("callback allocate 3MiB: ok", virtual.get(2));
        assertEquals(platform, virtual);
    }
}
