package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.OutOfDeviceMemoryException;
import io.ferrum.memory.pool.HookedUpstream.Call;
import io.ferrum.memory.pool.HookedUpstream.Pause;

/**
 * Live configuration edits ({@code configurePool}, {@code configurePools}) racing the traffic of
 * other threads: each test holds the edit at one step (a pool lock the test holds, a paused upstream
 * call) while another thread makes its call, then asserts what the edit promises.
 */
class LiveEditRacesTest extends RaceHarness {
    /** A platform thread that keeps its own thread cache from one step to the next. */
    private final ExecutorService worker = Executors.newSingleThreadExecutor(r -> new Thread(r, "worker"));

    @AfterEach
    void stopWorker() throws InterruptedException {
        worker.shutdown();
        worker.awaitTermination(30, TimeUnit.SECONDS);
    }

    /** Waits (at most 30 s) until {@code t} is blocked entering a configuring turn (PoolEngine's monitor). */
    private static void awaitBlockedForItsTurn(Thread t) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            StackTraceElement[] stack = t.getStackTrace();
            if (t.getState() == Thread.State.BLOCKED && stack.length > 0
                    && stack[0].getClassName().endsWith(".PoolEngine") && stack[0].getMethodName().startsWith("configurePool")) {
                return;
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError(t.getName() + " never waited for its configuring turn: " + t.getState());
            }
            Thread.onSpinWait();
        }
    }

    private <T> T onWorker(java.util.concurrent.Callable<T> step) throws Exception {
        return worker.submit(step).get(30, TimeUnit.SECONDS);
    }

    /**
     * A free that read the pool's alignment just before configurePool raised it put a block of the
     * old alignment into its thread's cache after the edit drained the caches; the thread's next
     * allocation took it from there under the new alignment: a 4 KiB block 256 bytes into its chunk,
     * its handleInfo saying 4096.
     */
    @Test
    void aBlockCachedAsTheAlignmentIsRaisedIsNotHandedOutUnderTheNewOne() throws Exception {
        PooledMemoryManager m = manager(new HookedUpstream(CPU, 64 * MiB), PoolSettings.defaults());
        MemoryHandle block = onWorker(() -> {
            m.allocate(256, CPU); // the 4 KiB block starts 256 bytes into the chunk
            return m.allocate(4 * KiB, CPU);
        });
        assertNotEquals(0, address(m, block) % (4 * KiB), "the block is 256-aligned only");
        ReentrantLock lock = poolLock(m, MemoryType.GENERAL);
        CompletableFuture<Void> edit;
        lock.lock();
        try {
            edit = start("configure", () -> {
                m.configurePool(CPU, MemoryType.GENERAL, pool(MiB, MiB, 4 * KiB));
                return null;
            });
            // The edit drained the caches and waits for the lock to set the new alignment.
            awaitQueued(lock, threads.getLast());
            onWorker(() -> {
                m.deallocate(block); // into the worker's cache: the pool's alignment is still 256
                return null;
            });
        } finally {
            lock.unlock();
        }
        edit.get(30, TimeUnit.SECONDS);
        MemoryHandle again = onWorker(() -> m.allocate(4 * KiB, CPU));
        assertEquals(0, address(m, again) % (4 * KiB), "a block allocated under an alignment of 4096 is 4096-aligned");
        assertEquals(4 * KiB, m.handleInfo(again).orElseThrow().alignment());
    }

    /**
     * configurePool checked the new maxSize against the pool's live blocks, then waited for another
     * edit (configurePool calls run one at a time) before it set it: a block allocated meanwhile
     * was not looked at, and the pool took a maxSize of 1 MiB with 2 MiB live. The pool refuses it
     * then, as the javadoc of configurePools promised.
     */
    @Test
    void aBlockAllocatedSinceTheMaxSizeWasCheckedMakesThePoolRefuseIt() throws Exception {
        HookedUpstream up = new HookedUpstream(CPU, 64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults());
        Pause reserve = up.pauseNext(Call.RESERVE);
        CompletableFuture<Void> first = start("pre-allocating edit", () -> {
            m.configurePool(CPU, MemoryType.TENSOR, pool(MiB, MiB, 256).toBuilder().preAllocate(true).build());
            return null;
        });
        reserve.awaitArrival(); // the first edit holds the configuring turn
        MemoryPoolConfig before = m.poolConfig(MemoryType.GENERAL);
        CompletableFuture<Void> second = start("maxSize edit", () -> {
            m.configurePool(CPU, MemoryType.GENERAL, pool(MiB, MiB, 256).toBuilder().maxSize(MiB).build());
            return null;
        });
        awaitBlockedForItsTurn(threads.getLast()); // checked, waits for its turn
        MemoryHandle big = m.allocate(2 * MiB, CPU);
        reserve.release();
        first.get(30, TimeUnit.SECONDS);
        ExecutionException e = assertThrows(ExecutionException.class, () -> second.get(30, TimeUnit.SECONDS),
                () -> "the GENERAL pool took maxSize " + m.poolConfig(MemoryType.GENERAL).maxSize() + " with "
                        + m.memoryInfo().usedBytes() + " bytes live");
        InvalidMemoryRequestException refused = assertInstanceOf(InvalidMemoryRequestException.class, e.getCause());
        assertEquals("Cannot set maxSize of the GENERAL pool on cpu:0 to 1048576 bytes (1.0 MiB): its live blocks"
                + " already use 2097152 bytes (2.0 MiB)", refused.getMessage());
        assertEquals(before, m.poolConfig(MemoryType.GENERAL));
        m.deallocate(big);
    }

    /**
     * configurePool set the new configuration, then pre-allocated under it: while the device was
     * asked for the chunk, another thread's allocation grew the pool under the new maxSize of 16
     * MiB; the device then refused the pre-allocation, the edit was refused and the old maxSize of 2
     * MiB came back, with an 8 MiB block in a pool that it does not admit. The pool takes the
     * configuration only once its pre-allocation is there.
     */
    @Test
    void aRefusedPreAllocationAdmitsNoBlockMeanwhile() throws Exception {
        HookedUpstream hooked = new HookedUpstream(CPU, 64 * MiB);
        long refusedSize = 7 * MiB;
        DeviceUpstream up = new ForwardingUpstream(hooked) {
            @Override
            public DeviceChunk reserve(long bytes) {
                DeviceChunk c = real.reserve(bytes);
                if (bytes == refusedSize) {
                    real.release(c);
                    throw new OutOfDeviceMemoryException(device(), bytes, 0, "test: the pre-allocation is refused");
                }
                return c;
            }
        };
        MemoryPoolConfig small = pool(MiB, MiB, 256).toBuilder().maxSize(2 * MiB).build();
        PooledMemoryManager m = manager(up, config(small), PoolSettings.defaults(), null);
        MemoryHandle first = m.allocate(KiB, CPU); // the pool's first chunk: 1 MiB
        Pause reserve = hooked.pauseNext(Call.RESERVE);
        CompletableFuture<Void> edit = start("edit", () -> {
            m.configurePool(CPU, MemoryType.GENERAL,
                    pool(8 * MiB, MiB, 256).toBuilder().maxSize(16 * MiB).preAllocate(true).build());
            return null;
        });
        reserve.awaitArrival(); // the edit asks the device for the 7 MiB it lacks
        CompletableFuture<MemoryHandle> big = start("allocate", () -> m.allocate(8 * MiB, CPU));
        try {
            big.get(30, TimeUnit.SECONDS);
        } catch (ExecutionException refusedUnderTheOldMaxSize) {
            assertInstanceOf(InvalidMemoryRequestException.class, refusedUnderTheOldMaxSize.getCause(),
                    "8 MiB is above the pool's maxSize while the edit is not decided");
        } finally {
            reserve.release();
        }
        ExecutionException e = assertThrows(ExecutionException.class, () -> edit.get(30, TimeUnit.SECONDS));
        assertInstanceOf(OutOfDeviceMemoryException.class, e.getCause());
        assertEquals(small, m.poolConfig(MemoryType.GENERAL));
        assertTrue(m.memoryInfo().usedBytes() <= 2 * MiB && m.reservedByType().get(MemoryType.GENERAL) <= 2 * MiB,
                () -> "the GENERAL pool holds " + m.reservedByType() + ", " + m.memoryInfo().usedBytes()
                        + " bytes used, under a maxSize of 2 MiB");
        m.deallocate(first);
    }

    /**
     * A growth planned under the old limit and still asking the device when configurePool lowered the
     * maxSize added its chunk anyway, and its allocation carved a 4 MiB block from it: the pool held
     * 5 MiB under a maxSize of 2 MiB, its used bytes above the limit the edit's check had just
     * vouched for. A chunk that no longer fits the limit goes back, and the allocation is refused.
     */
    @Test
    void aGrowthInFlightAcrossALowerMaxSizeDoesNotExceedIt() throws Exception {
        HookedUpstream up = new HookedUpstream(CPU, 64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults());
        MemoryHandle first = m.allocate(KiB, CPU); // the pool's first chunk: 1 MiB
        Pause reserve = up.pauseNext(Call.RESERVE);
        CompletableFuture<MemoryHandle> big = start("allocate", () -> m.allocate(4 * MiB, CPU));
        reserve.awaitArrival(); // its growth asks the device for 4 MiB
        try {
            m.configurePool(CPU, MemoryType.GENERAL, pool(MiB, MiB, 256).toBuilder().maxSize(2 * MiB).build());
        } finally {
            reserve.release();
        }
        try {
            MemoryHandle h = big.get(30, TimeUnit.SECONDS);
            m.deallocate(h);
            throw new AssertionError("a 4 MiB block was allocated under a maxSize of 2 MiB; the pool held "
                    + m.reservedByType());
        } catch (ExecutionException refused) {
            assertInstanceOf(OutOfDeviceMemoryException.class, refused.getCause());
        }
        assertEquals(java.util.Map.of(MemoryType.GENERAL, MiB), m.reservedByType());
        assertEquals(MiB, up.liveBytes(), "the chunk that no longer fit went back to the device");
        m.deallocate(first);
    }

    /**
     * A close while a live edit asks the device for its pre-allocation (reserved outside the pool):
     * the edit is refused as closed, and the chunk it reserved goes back to the device before the
     * upstream closes; nothing is left behind.
     */
    @Test
    void aCloseDuringAnEditsPreAllocationReleasesItsChunk() throws Exception {
        HookedUpstream up = new HookedUpstream(CPU, 64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults());
        m.allocate(KiB, CPU);
        Pause reserve = up.pauseNext(Call.RESERVE);
        CompletableFuture<Void> edit = start("edit", () -> {
            m.configurePool(CPU, MemoryType.GENERAL, pool(8 * MiB, MiB, 256).toBuilder().preAllocate(true).build());
            return null;
        });
        reserve.awaitArrival();
        CompletableFuture<Void> close;
        try {
            close = start("close", () -> {
                m.close();
                return null;
            });
            awaitParkedIn(threads.getLast(), "Lifecycle", "awaitIdle"); // the close waits for the edit's work
        } finally {
            reserve.release();
        }
        close.get(30, TimeUnit.SECONDS);
        ExecutionException e = assertThrows(ExecutionException.class, () -> edit.get(30, TimeUnit.SECONDS));
        assertInstanceOf(DeviceUnavailableException.class, e.getCause());
        assertEquals(0, up.liveBytes(), "every chunk went back");
        assertTrue(up.closed, "the upstream closed once the edit's chunk was back");
        assertEquals("", up.violations.toString());
    }

    /**
     * A lower maxSize gives back the pool's empty chunks, but another thread's cache kept the blocks
     * of its chunks, and only a cache's owner drains it: the pool held 2 MiB under a maxSize of 1
     * MiB with nothing live, and still did once that thread had drained its cache (until a trim).
     * The drain gives back what the edit could not.
     */
    @Test
    void aLowerMaxSizeGetsTheChunksAnotherThreadsCacheHeldOnceItDrains() throws Exception {
        HookedUpstream up = new HookedUpstream(CPU, 64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults());
        onWorker(() -> {
            MemoryHandle[] hs = new MemoryHandle[8];
            for (int i = 0; i < hs.length; i++) {
                hs[i] = m.allocate(256 * KiB, CPU);
            }
            for (MemoryHandle h : hs) {
                m.deallocate(h); // into the worker's cache
            }
            return null;
        });
        assertEquals(2 * MiB, m.memoryInfo().reservedBytes());
        assertEquals(0, m.memoryInfo().usedBytes(), "the cached blocks are free in the figures");
        m.configurePool(CPU, MemoryType.GENERAL, pool(MiB, MiB, 256).toBuilder().maxSize(MiB).build());
        onWorker(() -> {
            m.deallocate(m.allocate(KiB, CPU)); // the worker's next call drains its cache first
            return null;
        });
        assertTrue(m.memoryInfo().reservedBytes() <= MiB,
                () -> "the GENERAL pool holds " + m.reservedByType() + " under a maxSize of 1 MiB");
    }

    /**
     * A pre-allocating edit reserves what the pool lacks, then waits for the pool: a growth meanwhile
     * (another thread's allocation, under the old configuration) made that chunk too big for the new
     * maxSize, and the edit gave it back and applied anyway: the pool held 2 MiB under a configuration
     * that pre-allocates 8 MiB. The edit reserves again what the pool lacks now.
     */
    @Test
    void aGrowthDuringAnEditsPreAllocationLeavesThePoolItsInitialSize() throws Exception {
        HookedUpstream up = new HookedUpstream(CPU, 64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults());
        MemoryHandle first = m.allocate(KiB, CPU); // the pool's first chunk: 1 MiB
        Pause reserve = up.pauseNext(Call.RESERVE);
        MemoryPoolConfig next = pool(8 * MiB, MiB, 256).toBuilder().maxSize(8 * MiB).preAllocate(true).build();
        CompletableFuture<Void> edit = start("edit", () -> {
            m.configurePool(CPU, MemoryType.GENERAL, next);
            return null;
        });
        reserve.awaitArrival(); // the edit asks the device for the 7 MiB the pool lacks
        MemoryHandle grown;
        try {
            grown = m.allocate(MiB, CPU); // grows the pool by 1 MiB under the old configuration
        } finally {
            reserve.release();
        }
        edit.get(30, TimeUnit.SECONDS);
        assertEquals(next, m.poolConfig(MemoryType.GENERAL));
        long held = m.reservedByType().get(MemoryType.GENERAL);
        assertEquals(8 * MiB, held, "the GENERAL pool holds " + held
                + " bytes under a configuration that pre-allocates 8 MiB (maxSize 8 MiB)");
        assertEquals(held, up.liveBytes(), "the device holds what the pool holds");
        m.deallocate(grown);
        m.deallocate(first);
    }

    /**
     * A new chunk's host view ({@code upstream.hostSegment}) was asked for under the pool's lock by a
     * growth, and under every pool's lock by a live edit's pre-allocation: a backend whose
     * hostSegment is slow, or calls back into the manager from another thread, stalled or deadlocked
     * every allocation of the device. Both now ask for it with the chunk, before the locks.
     */
    @Test
    void aNewChunksHostViewIsAskedForOutsideThePoolsLocks() throws Exception {
        HookedUpstream hooked = new HookedUpstream(CPU, 64 * MiB);
        java.util.concurrent.atomic.AtomicReference<ReentrantLock> lock = new java.util.concurrent.atomic.AtomicReference<>();
        java.util.List<String> underLock = new java.util.concurrent.CopyOnWriteArrayList<>();
        DeviceUpstream up = new ForwardingUpstream(hooked) {
            @Override
            public java.util.Optional<java.lang.foreign.MemorySegment> hostSegment(DeviceChunk c) {
                ReentrantLock l = lock.get();
                if (l != null && l.isHeldByCurrentThread()) {
                    underLock.add(java.util.Arrays.stream(Thread.currentThread().getStackTrace())
                            .filter(f -> f.getClassName().contains(".pool.internal."))
                            .limit(3).map(f -> f.getMethodName()).toList().toString());
                }
                return real.hostSegment(c);
            }
        };
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults(), null);
        lock.set(poolLock(m, MemoryType.GENERAL));
        m.allocate(KiB, CPU); // a growth
        m.configurePool(CPU, MemoryType.GENERAL, pool(4 * MiB, MiB, 256).toBuilder().preAllocate(true).build());
        assertEquals(4 * MiB, m.reservedByType().get(MemoryType.GENERAL), "the edit pre-allocated");
        assertEquals(java.util.List.of(), underLock, "hostSegment called under the GENERAL pool's lock");
    }

    /**
     * An Error out of a new chunk's host view (a backend whose classes went away under a refresh),
     * asked for under the pool's lock at the end of a growth, skipped the end of the growth's
     * in-flight work and the chunk's adding: the chunk stayed held and the upstream never closed. A
     * chunk whose view fails so now goes back, and the growth fails as the backend's gone.
     */
    @Test
    void anErrorOutOfANewChunksHostViewGivesTheChunkBack() throws Exception {
        HookedUpstream hooked = new HookedUpstream(CPU, 64 * MiB);
        java.util.concurrent.atomic.AtomicBoolean fail = new java.util.concurrent.atomic.AtomicBoolean(true);
        DeviceUpstream up = new ForwardingUpstream(hooked) {
            @Override
            public java.util.Optional<java.lang.foreign.MemorySegment> hostSegment(DeviceChunk c) {
                if (fail.getAndSet(false)) {
                    throw new NoClassDefFoundError("test: the backend's classes went away");
                }
                return real.hostSegment(c);
            }
        };
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults(), null);
        Throwable e = assertThrows(Throwable.class, () -> m.allocate(KiB, CPU));
        closeEvenIfWorkNeverEnds(m);
        assertEquals(0, hooked.liveBytes(), "every chunk went back");
        assertTrue(hooked.closed, "the upstream closed: no work was left on the pool");
        assertInstanceOf(DeviceUnavailableException.class, e, e.toString());
    }

    /**
     * A close that lands once the pools took the edit, before its lower limit's trim: the trim found
     * the pool closed and the edit threw "unavailable", though it had applied (configurePools
     * promises that a throw changed no pool). The edit answers; the close gives back every chunk.
     */
    @Test
    void aCloseAfterTheEditWasTakenDoesNotMakeItThrow() throws Exception {
        HookedUpstream up = new HookedUpstream(CPU, 64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults());
        m.allocate(KiB, CPU); // the pool's first chunk: 1 MiB
        Pause reserve = up.pauseNext(Call.RESERVE);
        MemoryPoolConfig next = pool(2 * MiB, MiB, 256).toBuilder().maxSize(2 * MiB).preAllocate(true).build();
        CompletableFuture<Void> edit = start("edit", () -> {
            m.configurePool(CPU, MemoryType.GENERAL, next);
            return null;
        });
        reserve.awaitArrival(); // the edit asks the device for the 1 MiB the pool lacks
        Pause release;
        try {
            m.allocate(MiB, CPU); // grows the pool to 2 MiB: the edit's chunk no longer fits, and is not needed
            release = up.pauseNext(Call.RELEASE);
        } finally {
            reserve.release();
        }
        release.awaitArrival(); // the pool took the edit; the edit gives its chunk back
        CompletableFuture<Void> close = start("close", () -> {
            m.close();
            return null;
        });
        awaitParkedIn(threads.getLast(), "Lifecycle", "awaitIdle"); // the pool is closed
        release.release();
        edit.get(30, TimeUnit.SECONDS);
        close.get(30, TimeUnit.SECONDS);
        assertTrue(up.closed, "the upstream closed");
        assertEquals(0, up.liveBytes(), "every chunk went back");
    }

    /**
     * As above, the other way: a trim while the edit asked the device gave back an empty chunk the
     * edit had counted on, and the pool held 3 MiB under a configuration that pre-allocates 4 MiB.
     */
    @Test
    void aTrimDuringAnEditsPreAllocationLeavesThePoolItsInitialSize() throws Exception {
        HookedUpstream up = new HookedUpstream(CPU, 64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults());
        MemoryHandle first = m.allocate(KiB, CPU); // the pool's first chunk: 1 MiB
        m.deallocate(m.allocate(MiB, CPU)); // and a second, empty once the thread's cache is drained
        Pause reserve = up.pauseNext(Call.RESERVE);
        MemoryPoolConfig next = pool(4 * MiB, MiB, 256).toBuilder().preAllocate(true).build();
        CompletableFuture<Void> edit = start("edit", () -> {
            m.configurePool(CPU, MemoryType.GENERAL, next);
            return null;
        });
        reserve.awaitArrival(); // the edit asks the device for the 2 MiB the pool lacks
        try {
            assertEquals(MiB, m.trim(), "the empty chunk went back");
        } finally {
            reserve.release();
        }
        edit.get(30, TimeUnit.SECONDS);
        assertEquals(next, m.poolConfig(MemoryType.GENERAL));
        long held = m.reservedByType().get(MemoryType.GENERAL);
        assertEquals(4 * MiB, held, "the GENERAL pool holds " + held + " bytes under a configuration that pre-allocates 4 MiB");
        assertEquals(held, up.liveBytes(), "the device holds what the pool holds");
        m.deallocate(first);
    }

    /**
     * A growth whose chunk no longer fits a limit lowered meanwhile gives it back, then ends its
     * in-flight work; an Error out of the release (the backend's classes gone under a refresh: a
     * LinkageError) skipped that end, and the pool counted the growth as running for ever: the close
     * waited its 30 s for it, then left the pool's chunks to a last work that never comes, and the
     * upstream never closed. The work ends whatever the release throws, as a trim's does.
     */
    @Test
    void aFailedReleaseOfAGrowthBeyondALoweredLimitStillLetsTheCloseFinish() throws Exception {
        HookedUpstream hooked = new HookedUpstream(CPU, 64 * MiB);
        java.util.concurrent.atomic.AtomicBoolean failRelease = new java.util.concurrent.atomic.AtomicBoolean();
        DeviceUpstream up = releaseFailingOnceWhen(hooked, failRelease);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults(), null);
        MemoryHandle first = m.allocate(KiB, CPU); // the pool's first chunk: 1 MiB
        Pause reserve = hooked.pauseNext(Call.RESERVE);
        CompletableFuture<MemoryHandle> big = start("allocate", () -> m.allocate(4 * MiB, CPU));
        reserve.awaitArrival(); // its growth asks the device for 4 MiB
        try {
            m.configurePool(CPU, MemoryType.GENERAL, pool(MiB, MiB, 256).toBuilder().maxSize(2 * MiB).build());
            failRelease.set(true);
        } finally {
            reserve.release();
        }
        ExecutionException e = assertThrows(ExecutionException.class, () -> big.get(30, TimeUnit.SECONDS));
        assertInstanceOf(NoClassDefFoundError.class, e.getCause());
        m.deallocate(first);
        closeEvenIfWorkNeverEnds(m);
        assertTrue(hooked.closed, "the upstream closed: no work was left on the pool");
        assertEquals(0, hooked.liveBytes(), "every chunk went back");
    }

    /**
     * As above, for the chunk a refused edit reserved for its pre-allocation: an Error out of its
     * release left the edit's in-flight work on the pool for ever, and the upstream never closed.
     */
    @Test
    void aFailedReleaseOfARefusedEditsChunkStillLetsTheCloseFinish() throws Exception {
        HookedUpstream hooked = new HookedUpstream(CPU, 64 * MiB);
        java.util.concurrent.atomic.AtomicBoolean failRelease = new java.util.concurrent.atomic.AtomicBoolean();
        DeviceUpstream up = releaseFailingOnceWhen(hooked, failRelease);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults(), null);
        MemoryHandle first = m.allocate(KiB, CPU); // the pool's first chunk: 1 MiB
        Pause reserve = hooked.pauseNext(Call.RESERVE);
        CompletableFuture<Void> edit = start("edit", () -> {
            m.configurePool(CPU, MemoryType.GENERAL, pool(4 * MiB, MiB, 256).toBuilder().maxSize(4 * MiB).preAllocate(true).build());
            return null;
        });
        reserve.awaitArrival(); // the edit asks the device for the 3 MiB the pool lacks
        MemoryHandle big;
        try {
            big = m.allocate(5 * MiB, CPU); // above the edit's maxSize: the edit is refused
            failRelease.set(true);
        } finally {
            reserve.release();
        }
        ExecutionException e = assertThrows(ExecutionException.class, () -> edit.get(30, TimeUnit.SECONDS));
        assertInstanceOf(NoClassDefFoundError.class, e.getCause());
        m.deallocate(big);
        m.deallocate(first);
        closeEvenIfWorkNeverEnds(m);
        assertTrue(hooked.closed, "the upstream closed: no work was left on the pool");
        assertEquals(0, hooked.liveBytes(), "every chunk went back");
    }

    /**
     * As aLowerMaxSizeGetsTheChunksAnotherThreadsCacheHeldOnceItDrains, but the thread ends instead
     * of calling again: its cache is swept by the next thread that comes (or any drain), and that
     * sweep left the chunks to a trim: the pool held 2 MiB under a maxSize of 1 MiB with nothing
     * live, once quiet. The sweep gives them back as the owner's drain does.
     */
    @Test
    void aLowerMaxSizeGetsTheChunksADeadThreadsCacheHeldOnceItIsSwept() throws Exception {
        HookedUpstream up = new HookedUpstream(CPU, 64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults());
        java.util.concurrent.CountDownLatch cached = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch end = new java.util.concurrent.CountDownLatch(1);
        start("caching thread", () -> {
            MemoryHandle[] hs = new MemoryHandle[8];
            for (int i = 0; i < hs.length; i++) {
                hs[i] = m.allocate(256 * KiB, CPU);
            }
            for (MemoryHandle h : hs) {
                m.deallocate(h); // into this thread's cache
            }
            cached.countDown();
            return end.await(30, TimeUnit.SECONDS);
        });
        Thread caching = threads.getLast();
        assertTrue(cached.await(30, TimeUnit.SECONDS));
        assertEquals(2 * MiB, m.memoryInfo().reservedBytes());
        m.configurePool(CPU, MemoryType.GENERAL, pool(MiB, MiB, 256).toBuilder().maxSize(MiB).build());
        end.countDown();
        caching.join(); // ends without another call: only a sweep drains its cache
        start("next thread", () -> {
            m.deallocate(m.allocate(KiB, CPU)); // its first call sweeps the dead thread's cache
            return null;
        }).get(30, TimeUnit.SECONDS);
        assertEquals(0, m.memoryInfo().usedBytes());
        assertTrue(m.memoryInfo().reservedBytes() <= MiB,
                () -> "the GENERAL pool holds " + m.reservedByType() + " under a maxSize of 1 MiB");
        assertEquals(m.memoryInfo().reservedBytes(), up.liveBytes(), "the device holds what the pool holds");
    }

    /**
     * A growth whose chunk, planned under the old limit, no longer fits a maxSize lowered meanwhile
     * gave it back and failed with the pool's limit, although a smaller chunk fits the new one: an
     * allocation that had already had its out-of-memory hook (the device refused its first growth)
     * was refused, "the pool holds 1.0 MiB and may hold at most 3.0 MiB (maxSize)", for a 64 KiB
     * block. The growth has the allocation carve again, and grow under the new limit.
     */
    @Test
    void aGrowthBeyondALoweredLimitLetsTheAllocationGrowUnderTheNewOne() throws Exception {
        HookedUpstream hooked = new HookedUpstream(CPU, 64 * MiB);
        java.util.concurrent.atomic.AtomicBoolean refuseNext = new java.util.concurrent.atomic.AtomicBoolean();
        DeviceUpstream up = new ForwardingUpstream(hooked) {
            @Override
            public DeviceChunk reserve(long bytes) {
                if (refuseNext.getAndSet(false)) {
                    throw new OutOfDeviceMemoryException(device(), bytes, 0, "test: the device is short for a moment");
                }
                return real.reserve(bytes);
            }
        };
        PooledMemoryManager m = manager(up, config(pool(MiB, 4 * MiB, 256)), PoolSettings.defaults(), null);
        MemoryHandle first = m.allocate(MiB - 4 * KiB, CPU); // the pool's first chunk, 1 MiB, nearly full
        refuseNext.set(true); // the next growth is refused: the allocation has its out-of-memory hook
        Pause reserve = hooked.pauseNext(Call.RESERVE); // the growth after it pauses
        CompletableFuture<MemoryHandle> next = start("allocate", () -> m.allocate(64 * KiB, CPU));
        reserve.awaitArrival(); // a 4 MiB growth increment, planned under no maxSize
        try {
            m.configurePool(CPU, MemoryType.GENERAL, pool(MiB, 4 * MiB, 256).toBuilder().maxSize(3 * MiB).build());
        } finally {
            reserve.release();
        }
        MemoryHandle h = next.get(30, TimeUnit.SECONDS);
        assertTrue(m.reservedByType().get(MemoryType.GENERAL) <= 3 * MiB, () -> "the pool holds " + m.reservedByType());
        m.deallocate(h);
        m.deallocate(first);
    }

    /**
     * Closes {@code m} on a thread of its own; a close that parks waiting for work that never ends
     * (the defect these tests force) is interrupted, and then leaves the pool to that work.
     */
    private void closeEvenIfWorkNeverEnds(PooledMemoryManager m) throws Exception {
        CompletableFuture<Void> close = start("close", () -> {
            m.close();
            return null;
        });
        Thread closing = threads.getLast();
        awaitParkedInOrDone(closing, "Lifecycle", "awaitIdle", close);
        if (!close.isDone()) {
            closing.interrupt();
        }
        close.get(30, TimeUnit.SECONDS);
    }

    /**
     * @return an upstream over {@code hooked} whose next release, once {@code fail} is set, returns
     *         the chunk and then throws as a backend whose classes went away under a refresh does
     */
    private static DeviceUpstream releaseFailingOnceWhen(HookedUpstream hooked, java.util.concurrent.atomic.AtomicBoolean fail) {
        return new ForwardingUpstream(hooked) {
            @Override
            public void release(DeviceChunk c) {
                real.release(c);
                if (fail.getAndSet(false)) {
                    throw new NoClassDefFoundError("test: the backend's classes went away");
                }
            }
        };
    }
}
