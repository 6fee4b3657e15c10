package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;

/**
 * Closing a manager: every chunk goes back, live allocations are reported with their allocation
 * site, every later call says the device is unavailable; the shared allocation clock runs only
 * while some manager is open.
 */
class EngineCloseTest extends EngineTestSupport {
    @Test
    void afterCloseEveryCallSaysTheDeviceIsUnavailableAndEveryByteIsBack() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        List<String> warnings = new CopyOnWriteArrayList<>();
        PooledMemoryManager m = PooledMemoryManager.create(up,
                config(pool(MiB, MiB)).withTracking(true, true), PoolSettings.defaults().withLog(warningsInto(warnings)), null);
        MemoryHandle h = m.allocate(3000, CPU);
        m.allocate(5000, MemoryType.CACHE, CPU);
        MemorySegment view = m.mapMemory(h, MemoryAccess.READ_WRITE);
        assertTrue(up.liveBytes() > 0);
        m.close();
        m.close();
        assertEquals(0, up.liveBytes(), "every chunk went back to the upstream");
        assertTrue(up.closed);
        assertEquals(up.reserves.get(), up.releases.get());
        assertThrows(IllegalStateException.class, () -> view.get(ValueLayout.JAVA_BYTE, 0), "views die with the manager");
        assertEquals(1, warnings.size(), warnings.toString());
        assertTrue(warnings.get(0).contains("2 live allocations") && warnings.get(0).contains("8000 bytes"), warnings.get(0));
        assertTrue(warnings.get(0).contains("EngineCloseTest"), "debug mode names the allocation site: " + warnings.get(0));
        for (Executable call : List.<Executable>of(() -> m.allocate(1, CPU), () -> m.deallocate(h), () -> m.memoryInfo(),
                () -> m.copy(h, h, 1, 0, 0), () -> m.mapMemory(h, MemoryAccess.READ_ONLY), () -> m.defragment(CPU),
                () -> m.configurePool(CPU, MemoryPoolConfig.defaults()), () -> m.handles())) {
            DeviceUnavailableException e = assertThrows(DeviceUnavailableException.class, call);
            assertEquals(CPU, e.device());
        }
        assertTrue(m.handleInfo(h).isEmpty());
    }

    /**
     * An upstream whose next release throws an Error after giving the chunk back: a backend whose
     * classes went away under a bundle refresh (a LinkageError) fails so.
     */
    private static DeviceUpstream failingNextRelease(ArenaUpstream up, java.util.concurrent.atomic.AtomicBoolean fail) {
        return new ForwardingUpstream(up) {
            @Override
            public void release(DeviceChunk c) {
                real.release(c);
                if (fail.getAndSet(false)) {
                    throw new NoClassDefFoundError("test: the backend's classes went away");
                }
            }
        };
    }

    /**
     * An Error out of one chunk's release (only RuntimeException was caught) skipped the other
     * chunks and aborted the close: the upstream never closed and their native bytes stayed held.
     */
    @Test
    void anErrorReleasingOneChunkStillReleasesTheOthersAndClosesTheUpstream() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        java.util.concurrent.atomic.AtomicBoolean fail = new java.util.concurrent.atomic.AtomicBoolean();
        PooledMemoryManager m = PooledMemoryManager.create(failingNextRelease(up, fail), config(pool(MiB, MiB)),
                PoolSettings.defaults().withThreadCache(0), null);
        m.allocate(3000, CPU);
        m.allocate(5000, MemoryType.CACHE, CPU);
        m.allocate(2 * MiB, CPU); // a second chunk of GENERAL
        fail.set(true);
        NoClassDefFoundError e = assertThrows(NoClassDefFoundError.class, m::close, "the Error reaches the caller");
        assertEquals(0, e.getSuppressed().length);
        assertEquals(0, up.liveBytes(), "every chunk went back to the upstream");
        assertTrue(up.closed, "the close finished and closed the upstream");
        assertTrue(m.isClosed());
        m.close();
    }

    /**
     * The same on a trim: the chunks after the failing one were taken from the pool but never
     * released, and the failing one's capacity stayed booked: the device looked full for good.
     */
    @Test
    void anErrorReleasingOneChunkOnATrimStillReleasesAndUnbooksEveryChunk() {
        ArenaUpstream up = new ArenaUpstream(4 * MiB);
        java.util.concurrent.atomic.AtomicBoolean fail = new java.util.concurrent.atomic.AtomicBoolean();
        PooledMemoryManager m = PooledMemoryManager.create(failingNextRelease(up, fail), config(pool(MiB, MiB)),
                PoolSettings.defaults().withThreadCache(0), null);
        toClose.add(m);
        List<MemoryHandle> hs = new java.util.ArrayList<>();
        for (int i = 0; i < 4; i++) {
            hs.add(m.allocate(768 * KiB, CPU)); // one 1 MiB chunk each: the whole device
        }
        hs.forEach(m::deallocate);
        fail.set(true);
        assertThrows(NoClassDefFoundError.class, m::trim, "the Error reaches the caller");
        assertEquals(0, up.liveBytes(), "every empty chunk went back to the upstream");
        for (int i = 0; i < 4; i++) {
            m.allocate(768 * KiB, CPU); // the device's whole capacity is bookable again
        }
    }

    @Test
    void theAllocationClockThreadRunsOnlyWhileAManagerIsOpen() throws Exception {
        java.time.Instant created = java.time.Instant.now();
        PooledMemoryManager m = PooledMemoryManager.create(new ArenaUpstream(64 * MiB), config(pool(MiB, MiB)),
                PoolSettings.defaults(), null);
        MemoryHandle h = m.allocate(100, CPU);
        java.time.Instant after = java.time.Instant.now();
        java.time.Instant at = m.handleInfo(h).orElseThrow().allocatedAt();
        // Between the creation and now, however long the machine took between them; the second on
        // either side is for the wall clock and the monotonic clock the engine counts in, never for speed.
        assertTrue(!at.isBefore(created.minusSeconds(1)) && !at.isAfter(after.plusSeconds(1)),
                "allocated at " + at + ", not between the creation at " + created + " and " + after);
        assertTrue(clockThread() != null, "the clock ticks while a manager is open");
        m.close();
        Thread t = clockThread();
        if (t != null) {
            t.join(TimeUnit.SECONDS.toMillis(30));
        }
        assertTrue(clockThread() == null, "no clock thread is left once every manager is closed");
    }

    private static Thread clockThread() {
        return Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.getName().equals("ferrum-coarse-clock") && t.isAlive()).findFirst().orElse(null);
    }
}
