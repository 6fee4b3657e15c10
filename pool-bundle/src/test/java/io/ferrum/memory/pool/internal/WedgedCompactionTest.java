package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Callable;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.HookedUpstream;
import io.ferrum.memory.pool.HookedUpstream.Call;
import io.ferrum.memory.pool.HookedUpstream.Pause;
import io.ferrum.memory.pool.PoolLog;
import io.ferrum.memory.pool.PoolSettings;

/**
 * A defragmentation holds its pool's lock while the device copies a block: a copy that never
 * returns (a wedged GPU) held {@code memoryInfo()} and {@code close()} for as long, for good. The
 * copy is paused by the test upstream; the close's bound is the engine's, set short here. The
 * futures' 30 s timeouts are only the failure signal.
 */
class WedgedCompactionTest {
    static final long KiB = 1024;
    static final long MiB = 1024 * KiB;
    static final Device CPU = Device.cpu();
    /** The close's bound for these tests: long enough that a healthy close never meets it. */
    static final long CLOSE_WAIT_NANOS = TimeUnit.MILLISECONDS.toNanos(300);

    static MemoryManagerConfig config() {
        MemoryPoolConfig oneMiB = MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).alignment(256).build();
        return MemoryManagerConfig.defaults().withAutoGc(false, 0.85).withPoolConfig(MemoryType.GENERAL, oneMiB)
                .withPoolConfig(MemoryType.TENSOR, oneMiB);
    }

    /** A log that keeps its warnings. */
    static final class Warnings implements PoolLog {
        final List<String> lines = new CopyOnWriteArrayList<>();

        @Override
        public void warn(String message, Throwable cause) {
            lines.add(message);
        }

        @Override
        public void info(String message) {
        }
    }

    static <T> CompletableFuture<T> start(String name, Callable<T> call) {
        return start(name, call, new Thread[1]);
    }

    /** @param thread where the thread that runs {@code call} goes */
    static <T> CompletableFuture<T> start(String name, Callable<T> call, Thread[] thread) {
        CompletableFuture<T> f = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                f.complete(call.call());
            } catch (Throwable e) {
                f.completeExceptionally(e);
            }
        }, name);
        t.setDaemon(true);
        thread[0] = t;
        t.start();
        return f;
    }

    @Test
    void aCompactionCopyThatNeverReturnsHoldsNeitherTheFiguresNorTheCloseBeyondItsBound() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        Warnings log = new Warnings();
        PoolEngine m = new PoolEngine(up, config(), PoolSettings.defaults().withThreadCache(0).withLog(log), null,
                null, CLOSE_WAIT_NANOS);
        MemoryHandle hole = m.allocate(64 * KiB, CPU);
        m.allocate(64 * KiB, CPU); // the block the compaction slides into the hole
        m.allocate(64 * KiB, MemoryType.TENSOR, CPU);
        m.deallocate(hole);
        MemoryInfo before = m.memoryInfo();
        Pause copy = up.pauseNext(Call.COPY);
        CompletableFuture<CompletableFuture<DefragmentationStats>> defrag = start("defragment",
                () -> m.defragment(CPU).toCompletableFuture());
        try {
            copy.awaitArrival();
            MemoryInfo during;
            try {
                during = start("memoryInfo", m::memoryInfo).get(30, TimeUnit.SECONDS);
            } catch (TimeoutException e) {
                throw new AssertionError("memoryInfo waited for the compaction's copy", e);
            }
            assertEquals(before.usedBytes(), during.usedBytes(), "the figures during the move");
            assertEquals(before.activeAllocations(), during.activeAllocations());
            assertEquals(before.reservedBytes(), during.reservedBytes());
            assertEquals(before.fragmentationRatio(), during.fragmentationRatio(), "the moving pool's, as the move found it");
            try {
                assertEquals(Map.of(MemoryType.GENERAL, MiB, MemoryType.TENSOR, MiB),
                        start("reservedByType", m::reservedByType).get(30, TimeUnit.SECONDS));
            } catch (TimeoutException e) {
                throw new AssertionError("reservedByType waited for the compaction's copy", e);
            }
            try {
                start("close", () -> {
                    m.close();
                    return null;
                }).get(30, TimeUnit.SECONDS);
            } catch (TimeoutException e) {
                throw new AssertionError("close waited for the compaction's copy beyond its bound", e);
            }
            assertTrue(m.isClosed());
            assertThrows(DeviceUnavailableException.class, () -> m.allocate(KiB, CPU));
            assertEquals(MiB, up.liveBytes(), "the other pools' chunks went back; the moving pool's stays");
            assertFalse(up.isClosed(), "the upstream closes after the last chunk went back");
            assertEquals(1, log.lines.stream().filter(l -> l.contains("GENERAL pool")).count(), log.lines.toString());
            String line = log.lines.stream().filter(l -> l.contains("GENERAL pool")).findFirst().orElseThrow();
            assertTrue(line.startsWith(CPU + ": "), line);
            assertTrue(line.contains("defragmentation") && line.contains("device copy"), line);
        } finally {
            copy.release();
        }
        // The GENERAL pool's compaction ends, then the defragmentation finds the next pool closed.
        ExecutionException refused = assertThrows(ExecutionException.class,
                () -> defrag.get(30, TimeUnit.SECONDS).get(30, TimeUnit.SECONDS));
        assertInstanceOf(DeviceUnavailableException.class, refused.getCause());
        assertEquals(0, up.liveBytes(), "the compaction's end released its pool");
        assertTrue(up.isClosed(), "and closed the upstream");
        assertEquals("", up.violations());
        assertEquals(2, log.lines.stream().filter(l -> l.contains("1 live allocation")).count(),
                "each pool's block left allocated is reported, TENSOR's by the close, GENERAL's at the move's end: "
                        + log.lines);
    }

    /**
     * A manager whose GENERAL pool holds two live blocks and nothing to move, and whose TENSOR pool
     * has a hole before a live block: a defragmentation passes GENERAL and pauses in TENSOR's first
     * copy, while GENERAL's lock is free for whoever takes the pools' locks in order.
     */
    static PoolEngine tensorToMove(HookedUpstream up, Warnings log) {
        PoolEngine m = new PoolEngine(up, config(), PoolSettings.defaults().withThreadCache(0).withLog(log), null,
                null, CLOSE_WAIT_NANOS);
        m.allocate(64 * KiB, CPU);
        m.allocate(64 * KiB, CPU);
        MemoryHandle hole = m.allocate(64 * KiB, MemoryType.TENSOR, CPU);
        m.allocate(64 * KiB, MemoryType.TENSOR, CPU);
        m.deallocate(hole);
        return m;
    }

    /** Waits until {@code t} waits for a lock or a condition, or has ended; fails after 30 s (a hang, not a figure). */
    static void awaitWaiting(Thread t) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (t.isAlive() && t.getState() != Thread.State.WAITING && t.getState() != Thread.State.TIMED_WAITING) {
            assertTrue(System.nanoTime() < deadline, t.getName() + " never waited: " + t.getState());
            Thread.sleep(1);
        }
    }

    static <T> T within30s(String what, CompletableFuture<T> f) throws Exception {
        try {
            return f.get(30, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            throw new AssertionError(what + " waited for the compaction's copy", e);
        }
    }

    @Test
    void aSecondCloseDuringTheWedgedCopyReturns() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        Warnings log = new Warnings();
        PoolEngine m = tensorToMove(up, log);
        Pause copy = up.pauseNext(Call.COPY);
        CompletableFuture<CompletableFuture<DefragmentationStats>> defrag = start("defragment",
                () -> m.defragment(CPU).toCompletableFuture());
        try {
            copy.awaitArrival();
            within30s("the first close", start("close", () -> {
                m.close();
                return null;
            }));
            within30s("a second close", start("second close", () -> {
                m.close();
                return null;
            }));
            assertEquals(MiB, up.liveBytes(), "the moving pool's chunk stays until its copy returns");
        } finally {
            copy.release();
        }
        defrag.get(30, TimeUnit.SECONDS).handle((stats, e) -> null).get(30, TimeUnit.SECONDS);
        assertEquals(0, up.liveBytes(), "the compaction's end released its pool");
        assertTrue(up.isClosed());
        assertEquals("", up.violations());
    }

    @Test
    void aConditionalCloseDuringTheWedgedCopyHoldsNeitherFiguresNorAllocationsNorClose() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        Warnings log = new Warnings();
        PoolEngine m = tensorToMove(up, log);
        MemoryInfo before = m.memoryInfo();
        Pause copy = up.pauseNext(Call.COPY);
        CompletableFuture<CompletableFuture<DefragmentationStats>> defrag = start("defragment",
                () -> m.defragment(CPU).toCompletableFuture());
        CompletableFuture<Boolean> conditional;
        try {
            copy.awaitArrival();
            Thread[] deciding = new Thread[1];
            conditional = start("closeIfUnused", m::closeIfUnused, deciding);
            awaitWaiting(deciding[0]);
            // Whatever it waits for, it must not hold another pool meanwhile.
            MemoryInfo during = within30s("memoryInfo during a conditional close", start("memoryInfo", m::memoryInfo));
            assertEquals(before.usedBytes(), during.usedBytes());
            MemoryHandle h = within30s("an allocation in another pool during a conditional close",
                    start("allocate", () -> m.allocate(KiB, CPU)));
            m.deallocate(h);
            assertFalse(within30s("the conditional close", conditional), "live blocks: refused");
            assertFalse(m.isClosed());
            within30s("a close after the conditional one", start("close", () -> {
                m.close();
                return null;
            }));
        } finally {
            copy.release();
        }
        defrag.get(30, TimeUnit.SECONDS).handle((stats, e) -> null).get(30, TimeUnit.SECONDS);
        assertEquals(0, up.liveBytes());
        assertTrue(up.isClosed());
        assertEquals("", up.violations());
    }

    @Test
    void anEditDuringTheWedgedCopyHoldsNeitherFiguresNorClose() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        Warnings log = new Warnings();
        PoolEngine m = tensorToMove(up, log);
        MemoryPoolConfig bigger = MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(2 * MiB).alignment(256)
                .build();
        Pause copy = up.pauseNext(Call.COPY);
        CompletableFuture<CompletableFuture<DefragmentationStats>> defrag = start("defragment",
                () -> m.defragment(CPU).toCompletableFuture());
        CompletableFuture<Void> edit;
        try {
            copy.awaitArrival();
            Thread[] editing = new Thread[1];
            edit = start("configurePools", () -> {
                m.configurePools(config().withPoolConfig(MemoryType.GENERAL, bigger));
                return null;
            }, editing);
            awaitWaiting(editing[0]);
            within30s("memoryInfo during an edit", start("memoryInfo", m::memoryInfo));
            assertFalse(edit.isDone(), "the edit waits for the move to end, as before");
        } finally {
            copy.release();
        }
        defrag.get(30, TimeUnit.SECONDS).get(30, TimeUnit.SECONDS);
        edit.get(30, TimeUnit.SECONDS);
        assertEquals(2 * MiB, m.poolConfig(MemoryType.GENERAL).growthIncrement());
        m.close();
        assertEquals(0, up.liveBytes());
        assertEquals("", up.violations());
    }

    /** The compaction's copy, once let go, fails: its end still closes the pool the close left to it. */
    @Test
    void aWedgedCopyThatFailsWhenItReturnsStillClosesThePoolLeftToIt() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        java.util.concurrent.atomic.AtomicBoolean fail = new java.util.concurrent.atomic.AtomicBoolean();
        io.ferrum.memory.pool.DeviceUpstream failing = new io.ferrum.memory.pool.ForwardingUpstream(up) {
            @Override
            public void copy(io.ferrum.memory.pool.DeviceChunk src, long srcOffset, io.ferrum.memory.pool.DeviceChunk dst,
                             long dstOffset, long bytes) {
                super.copy(src, srcOffset, dst, dstOffset, bytes);
                if (fail.get()) {
                    throw new IllegalStateException("the device failed the copy");
                }
            }
        };
        Warnings log = new Warnings();
        PoolEngine m = new PoolEngine(failing, config(), PoolSettings.defaults().withThreadCache(0).withLog(log), null,
                null, CLOSE_WAIT_NANOS);
        MemoryHandle hole = m.allocate(64 * KiB, CPU);
        m.allocate(64 * KiB, CPU);
        m.deallocate(hole);
        Pause copy = up.pauseNext(Call.COPY);
        CompletableFuture<CompletableFuture<DefragmentationStats>> defrag = start("defragment",
                () -> m.defragment(CPU).toCompletableFuture());
        try {
            copy.awaitArrival();
            Thread.currentThread().interrupt(); // the close gives up at once, and the flag stays set
            m.close();
            assertTrue(Thread.interrupted(), "the interrupt is the caller's");
            assertEquals(MiB, up.liveBytes());
            fail.set(true);
        } finally {
            copy.release();
        }
        ExecutionException failed = assertThrows(ExecutionException.class,
                () -> defrag.get(30, TimeUnit.SECONDS).get(30, TimeUnit.SECONDS));
        assertEquals("the device failed the copy", failed.getCause().getMessage());
        assertEquals(0, up.liveBytes(), "the failed compaction's end released its pool");
        assertTrue(up.isClosed());
        assertEquals("", up.violations());
        assertEquals(1, log.lines.stream().filter(l -> l.contains("1 live allocation")).count(), log.lines.toString());
        m.close(); // a second close after it all changes nothing
        assertEquals("", up.violations());
    }

    /**
     * With thread caches, a defragmentation asks every thread to drain its cache on its next call, and
     * the first call of a new thread sweeps the caches of threads that died: neither may wait for the
     * moving pool, whose blocks such a cache holds, to let an allocation in another pool go on.
     */
    @Test
    void allocationsInAnotherPoolThatDrainOrSweepCachesDoNotWaitForTheWedgedCopy() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        Warnings log = new Warnings();
        PoolEngine m = new PoolEngine(up, config(), PoolSettings.defaults().withLog(log), null, null, CLOSE_WAIT_NANOS);
        m.allocate(64 * KiB, CPU);
        MemoryHandle hole = m.allocate(64 * KiB, MemoryType.TENSOR, CPU);
        m.allocate(64 * KiB, MemoryType.TENSOR, CPU);
        m.deallocate(hole);
        m.trim(); // this thread's cache back to the pools: the hole is free for the compaction
        java.util.concurrent.CountDownLatch cached = new java.util.concurrent.CountDownLatch(2);
        java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch end = new java.util.concurrent.CountDownLatch(1);
        Callable<MemoryHandle> cachesTensorThenAllocates = () -> {
            m.deallocate(m.allocate(4 * KiB, MemoryType.TENSOR, CPU)); // into its own cache
            cached.countDown();
            go.await();
            return m.allocate(4 * KiB, CPU); // its cache drained first (the defragmentation asked)
        };
        Thread[] gone = new Thread[1];
        CompletableFuture<MemoryHandle> keeper = start("keeper", cachesTensorThenAllocates);
        CompletableFuture<Void> dies = start("gone", () -> {
            m.deallocate(m.allocate(4 * KiB, MemoryType.TENSOR, CPU));
            cached.countDown();
            end.await(); // alive until the compaction's copy waits: no sweep before took its cache
            return null;
        }, gone);
        assertTrue(cached.await(30, TimeUnit.SECONDS));
        Pause copy = up.pauseNext(Call.COPY);
        CompletableFuture<CompletableFuture<DefragmentationStats>> defrag = start("defragment",
                () -> m.defragment(CPU).toCompletableFuture());
        try {
            copy.awaitArrival();
            end.countDown();
            dies.get(30, TimeUnit.SECONDS);
            gone[0].join(10_000); // dead, its cache not swept
            MemoryHandle h = within30s("a new thread's first allocation in GENERAL (it sweeps the dead cache)",
                    start("newcomer", () -> m.allocate(4 * KiB, CPU)));
            m.deallocate(h);
            go.countDown();
            m.deallocate(within30s("an allocation in GENERAL whose thread drains its cache", keeper));
        } finally {
            go.countDown();
            end.countDown();
            copy.release();
        }
        defrag.get(30, TimeUnit.SECONDS).get(30, TimeUnit.SECONDS);
        m.close();
        assertEquals(0, up.liveBytes());
        assertEquals("", up.violations());
    }
}
