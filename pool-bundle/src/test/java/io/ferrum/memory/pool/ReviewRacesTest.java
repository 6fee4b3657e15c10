package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.Pipe;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryMapping;
import io.ferrum.memory.api.MemoryObserver;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.MemoryUsageHint;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.pool.HookedUpstream.Call;
import io.ferrum.memory.pool.HookedUpstream.Pause;

/**
 * The second adversarial review of the engine, after the first fixes of issue 13 (6eea69b,
 * ef661b4). Each test forces one interleaving or one input and asserts what the engine promises;
 * each failed on those commits (docs/RELIABILITY.md lists what each showed). None of them touches
 * released memory: use after release is detected through the test upstream's violations,
 * upstream.liveBytes() and scope().isAlive().
 */
class ReviewRacesTest extends RaceHarness {
    /** Waits until {@code t} is blocked in a native read (its session acquired by NIO). */
    static void awaitInNativeRead(Thread t) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            for (StackTraceElement e : t.getStackTrace()) {
                if (e.getMethodName().equals("read0")) {
                    return;
                }
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError(t.getName() + " never reached the native read");
            }
            Thread.sleep(1);
        }
    }

    /** Starts a thread that reads from an empty pipe into {@code view}: NIO holds the view's session acquired. */
    Pipe blockReadInto(MemorySegment view) throws Exception {
        Pipe pipe = Pipe.open();
        start("native-read", () -> pipe.source().read(view.asByteBuffer()));
        awaitInNativeRead(threads.get(threads.size() - 1));
        return pipe;
    }

    static Throwable thrown(Runnable r) {
        try {
            r.run();
            return null;
        } catch (Throwable e) {
            return e;
        }
    }

    // ================================================================== A. views that cannot close

    /**
     * A view handed out by mapMemory is in use by NIO (a FileChannel/Pipe read into
     * view.asByteBuffer(): the JDK acquires the arena's session for the call). Closing the shared
     * arena then throws IllegalStateException("Session is acquired by 1 clients"). closeViews sets
     * b.mapping = null BEFORE arena.close(): the exception escapes unmapMemory, the view stays
     * alive, and the engine has forgotten it. The next free releases the memory and the next
     * allocation gets it while the old view still writes into it.
     */
    @Test
    void anUnmapRefusedWhileNativeIoUsesTheViewLeavesNoViewOverTheNextOwner() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults().withThreadCache(0));
        MemoryHandle h = m.allocate(4 * KiB, CPU);
        MemorySegment view = m.mapMemory(h, MemoryAccess.READ_WRITE);
        Pipe pipe = blockReadInto(view);
        Throwable unmap = thrown(() -> m.unmapMemory(h));
        pipe.source().close(); // the read ends without writing (AsynchronousCloseException)
        threads.get(threads.size() - 1).join(30_000);
        // The engine forgot the view: unmapping again says "not mapped"; freeing does not close it.
        Throwable again = thrown(() -> m.unmapMemory(h));
        m.deallocate(h);
        MemoryHandle next = m.allocate(4 * KiB, CPU); // the same 4 KiB, another owner
        MemorySegment nextView = m.mapMemory(next, MemoryAccess.READ_WRITE);
        nextView.fill((byte) 0x22);
        boolean oldViewAlive = view.scope().isAlive();
        boolean sameMemory = view.address() == nextView.address();
        if (oldViewAlive) {
            view.fill((byte) 0x66); // the previous owner's stale view: memory is still allocated (to `next`)
        }
        byte seenByNext = nextView.get(ValueLayout.JAVA_BYTE, 0);
        m.unmapMemory(next);
        assertEquals("", up.violations.toString());
        assertFalse(oldViewAlive && sameMemory, "the first owner's view is alive over the next owner's block"
                + " (unmap threw " + unmap + "; unmap again threw " + again + "; next owner reads 0x"
                + Integer.toHexString(seenByNext & 0xff) + " it never wrote)");
    }

    /**
     * The same in-use view while the manager closes: close() closes views under the pool lock, the
     * IllegalStateException escapes close() half-way (isClosed() is already true, so no second
     * close will ever finish): no chunk is released, the other pools are never closed, the upstream
     * is never closed, the stream manager it owns is never closed.
     */
    @Test
    void aSecondCloseAfterNativeIoEndedReleasesWhatAViewInUseKept() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults());
        MemoryHandle h = m.allocate(4 * KiB, CPU);
        m.allocate(4 * KiB, MemoryType.TENSOR, CPU);
        MemorySegment view = m.mapMemory(h, MemoryAccess.READ_WRITE);
        Pipe pipe = blockReadInto(view);
        Throwable close = thrown(m::close);
        pipe.source().close();
        threads.get(threads.size() - 1).join(30_000);
        m.close(); // everything has ended: a second close is the caller's only remedy
        assertTrue(m.isClosed());
        assertEquals(0, up.liveBytes(), "close threw " + close + " and left the chunks reserved after all work ended");
        assertTrue(up.closed, "the upstream is closed");
    }

    /**
     * The orphaned view of an unmap that threw outlives the manager: close releases the chunk (it no
     * longer knows the view), and the view is still alive over released memory (with the FFM
     * upstream: memory given back to the C library; any access is a use after free).
     */
    @Test
    void noViewOutlivesTheChunksCloseReleases() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults().withThreadCache(0));
        MemoryHandle h = m.allocate(4 * KiB, CPU);
        MemorySegment view = m.mapMemory(h, MemoryAccess.READ_WRITE);
        Pipe pipe = blockReadInto(view);
        Throwable unmap = thrown(() -> m.unmapMemory(h));
        pipe.source().close();
        threads.get(threads.size() - 1).join(30_000);
        m.close();
        assertEquals(0, up.liveBytes());
        assertFalse(view.scope().isAlive(), "a view is alive over memory the upstream released (unmap threw " + unmap
                + "); touching it is a use after free");
    }

    /** The free path: the ISE escapes deallocate after the handle was claimed: the block is lost. */
    @Test
    void aBlockFreedWhileNativeIoUsesItsViewComesBackOnceTheViewCloses() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults().withThreadCache(0));
        MemoryHandle keep = m.allocate(4 * KiB, CPU);
        MemoryHandle h = m.allocate(4 * KiB, CPU);
        MemorySegment view = m.mapMemory(h, MemoryAccess.READ_WRITE);
        Pipe pipe = blockReadInto(view);
        Throwable free = thrown(() -> m.deallocate(h));
        pipe.source().close();
        threads.get(threads.size() - 1).join(30_000);
        Throwable freeAgain = thrown(() -> m.deallocate(h));
        m.deallocate(keep);
        MemoryInfo info = m.memoryInfo();
        assertEquals(0, info.usedBytes(), "everything was freed (free threw " + free + ", again " + freeAgain
                + "); handles()=" + m.handles() + "; view alive=" + view.scope().isAlive());
    }

    /**
     * Found in the last look at the change: a block pinned by a copy, mapped, its view in an NIO
     * read, then freed: the free parks it (its view cannot close), and the copy's unpin released it
     * anyway, under the live view.
     */
    @Test
    void aCopyEndingOnABlockWhoseViewIsStuckDoesNotReleaseItUnderTheView() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        HostStreamManager streams = streams();
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults().withThreadCache(0), streams);
        MemoryHandle h = m.allocate(4 * KiB, CPU);
        MemoryHandle other = m.allocate(4 * KiB, CPU);
        MemorySegment view = m.mapMemory(h, MemoryAccess.READ_WRITE);
        Pipe pipe = blockReadInto(view);
        StreamHandle s = streams.createStream(CPU);
        Pause copy = up.pauseNext(Call.COPY);
        CompletableFuture<Void> done = m.copyAsync(MemoryTransfer.of(h, other, 4 * KiB), s).toCompletableFuture();
        copy.awaitArrival();
        m.deallocate(h); // pinned and its view in use: parked
        copy.release();
        done.get(30, TimeUnit.SECONDS);
        assertTrue(view.scope().isAlive(), "the view is still in the native read");
        assertEquals(8 * KiB, m.memoryInfo().usedBytes(), "the block stays out of use while its view is open");
        pipe.source().close();
        threads.get(threads.size() - 1).join(30_000);
        m.trim(); // tries the parked view again
        assertFalse(view.scope().isAlive());
        assertEquals(4 * KiB, m.memoryInfo().usedBytes());
        assertEquals("", up.violations.toString());
    }

    // ================================================================== B. work a closed stream manager refuses later

    /**
     * copyAsync B is queued on a stream behind copy A (paused in the upstream). The stream manager
     * closes (executor.shutdown()); when A ends, CompletableFuture hands B to the shut-down executor,
     * which rejects it: B's work never runs, so its pins (taken by copyAsync) are never released.
     * The fix of issue 8 only covers a submit() that throws synchronously.
     */
    @Test
    void aCopyQueuedWhenTheStreamManagerClosesStillRunsAndUnpins() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        HostStreamManager streams = new HostStreamManager(CPU);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults(), streams);
        MemoryHandle a = m.allocate(64 * KiB, CPU);
        MemoryHandle b = m.allocate(64 * KiB, CPU);
        MemoryHandle c = m.allocate(64 * KiB, CPU);
        MemoryHandle d = m.allocate(64 * KiB, CPU);
        StreamHandle s = streams.createStream(CPU);
        Pause copy = up.pauseNext(Call.COPY);
        CompletableFuture<Void> first = m.copyAsync(MemoryTransfer.of(a, b, 64 * KiB), s).toCompletableFuture();
        copy.awaitArrival();
        CompletableFuture<Void> second = m.copyAsync(MemoryTransfer.of(c, d, 64 * KiB), s).toCompletableFuture();
        // The closing thread is interrupted, so close does not wait for the work it accepted: A still
        // holds the stream when close returns, and B is handed to the executor only after that.
        // (Waited for, both would run before the close ended, and nothing here would be seen.)
        CompletableFuture<Void> closing = start("streams.close", () -> {
            Thread.currentThread().interrupt();
            streams.close();
            return null;
        });
        closing.get(30, TimeUnit.SECONDS);
        assertTrue(streams.isClosed());
        assertFalse(first.isDone(), "the first copy is still paused");
        copy.release();
        first.get(30, TimeUnit.SECONDS);
        Throwable secondOutcome = null;
        try {
            second.get(30, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            secondOutcome = e.getCause();
        }
        for (MemoryHandle h : List.of(a, b, c, d)) {
            m.deallocate(h);
        }
        m.trim();
        long usedAfterAllFreed = m.memoryInfo().usedBytes();
        Thread.currentThread().interrupt(); // close need not wait 30 s for pins nobody will drop
        try {
            m.close();
        } finally {
            Thread.interrupted();
        }
        assertEquals(0, usedAfterAllFreed, "every block was freed and no copy runs (the queued copy ended with "
                + secondOutcome + ")");
        assertEquals(0, up.liveBytes(), "close returns every chunk once no work is left");
        assertTrue(up.closed);
    }

    // ================================================================== C. alignment through a thread cache

    /**
     * configurePool raises the GENERAL alignment from 256 to 4096. A block allocated before (at
     * 256 mod 4096) is freed afterwards: its size (4096) is a class size under the new alignment,
     * so deallocate caches it, and the next allocate(4096) pops it: a block that is not
     * 4096-aligned, although handleInfo says alignment 4096 (issue 5's cousin through the cache).
     */
    @Test
    void aBlockFreedAfterTheAlignmentWasRaisedNeverComesBackMisaligned() {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults());
        m.allocate(256, CPU);
        MemoryHandle old = m.allocate(4096, CPU); // at offset 256
        m.configurePool(CPU, MemoryType.GENERAL, pool(MiB, MiB, 4096));
        m.deallocate(old);
        MemoryHandle h = m.allocate(4096, CPU);
        MemorySegment s = m.mapMemory(h, MemoryAccess.READ_ONLY);
        long address = s.address();
        m.unmapMemory(h);
        assertEquals(4096, m.handleInfo(h).orElseThrow().alignment());
        assertEquals(0, address % 4096, "a block of a pool aligned to 4096 is at " + address + " (" + address % 4096
                + " mod 4096)");
    }

    // ================================================================== D. configurePool's check subtracts every pool's cache

    /**
     * The first maxSize check subtracts the bytes cached for EVERY pool (cached()[0]) from this
     * pool's used bytes, so it passes; drainCaches then empties this thread's cache and the second
     * check refuses: a refused configurePool still changed the figures (issue 22 is back).
     */
    @Test
    void aRefusedConfigurationLeavesTheCachesAsTheyWere() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults());
        MemoryHandle live = m.allocate(64 * KiB, CPU);
        MemoryHandle tensor = m.allocate(64 * KiB, MemoryType.TENSOR, CPU);
        long cachedAt = address(m, tensor);
        m.deallocate(tensor); // into this thread's cache
        MemoryInfo before = m.memoryInfo();
        MemoryPoolConfig tooSmall = MemoryPoolConfig.builder().initialSize(0).maxSize(32 * KiB).growthIncrement(32 * KiB).build();
        Throwable refused = thrown(() -> m.configurePool(CPU, MemoryType.GENERAL, tooSmall));
        MemoryInfo after = m.memoryInfo();
        assertNotNull(refused);
        assertEquals(before.fragmentationRatio(), after.fragmentationRatio());
        // A cached block is free in the figures either way: the next carve from the TENSOR pool shows
        // whether it went back (its pool holds nothing else, so it would be carved first).
        assertNotEquals(cachedAt, addressAnotherThreadGets(m, 64 * KiB, MemoryType.TENSOR),
                "a refused configurePool (" + refused.getMessage() + ") gave the cached TENSOR block back to its pool");
        m.deallocate(live);
    }

    /**
     * Another (live) thread caches 128 KiB of GENERAL blocks; no block is live. configurePool with
     * maxSize 64 KiB is refused, saying "its live blocks already use 131072 bytes".
     */
    @Test
    void aMaxSizeAboveTheLiveBytesIsAcceptedWhateverOtherThreadsCache() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults());
        CompletableFuture<Void> cached = new CompletableFuture<>();
        CompletableFuture<Void> done = new CompletableFuture<>();
        start("cacher", () -> {
            MemoryHandle x = m.allocate(64 * KiB, CPU);
            MemoryHandle y = m.allocate(64 * KiB, CPU);
            m.deallocate(x);
            m.deallocate(y);
            cached.complete(null);
            done.get(30, TimeUnit.SECONDS); // stays alive, its cache full
            return null;
        });
        cached.get(30, TimeUnit.SECONDS);
        assertEquals(0, m.memoryInfo().usedBytes());
        assertEquals(0, m.memoryInfo().activeAllocations());
        MemoryPoolConfig cfg = MemoryPoolConfig.builder().initialSize(0).maxSize(64 * KiB).growthIncrement(64 * KiB).build();
        Throwable refused = thrown(() -> m.configurePool(CPU, MemoryType.GENERAL, cfg));
        done.complete(null);
        assertEquals(null, refused, "nothing is live, yet maxSize 64 KiB was refused");
    }

    // ================================================================== E. an observer that throws an Error

    /**
     * The pressure callback and observers are guarded with catch (RuntimeException). An observer
     * that throws an Error (an AssertionError in a test, a StackOverflowError) escapes allocate
     * after the block was carved and registered: the caller has no handle, the block is live
     * forever (until close, which reports it as a leak).
     */
    @Test
    void anObserverThatThrowsAnErrorCostsNoAllocation() {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(4 * MiB, 4 * MiB, 256)),
                PoolSettings.defaults().withCapacity(4 * MiB), null);
        m.addPressureObserver(new MemoryObserver() {
            @Override
            public void pressureChanged(Device device, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
                throw new AssertionError("a buggy observer");
            }
        });
        Throwable t = thrown(() -> m.allocate(3 * MiB, CPU)); // LOW -> MEDIUM
        assertEquals(null, t, "an observer cannot break allocation");
    }

    @Test
    void anObserverThatThrowsAnErrorLeavesNoUnheldBlock() {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(4 * MiB, 4 * MiB, 256)),
                PoolSettings.defaults().withCapacity(4 * MiB), null);
        m.addPressureObserver(new MemoryObserver() {
            @Override
            public void pressureChanged(Device device, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
                throw new AssertionError("a buggy observer");
            }
        });
        MemoryHandle h = m.allocate(3 * MiB, CPU); // the observer's Error is logged: the caller gets its handle
        assertEquals(List.of(h), m.handles().stream().map(MemoryHandleInfo::handle).toList());
        m.deallocate(h);
        assertEquals(List.of(), m.handles());
        assertEquals(0, m.memoryInfo().usedBytes());
    }

    /**
     * Pressure notifications run under pressureLock (a monitor): a callback that blocks (here on
     * MEDIUM, waiting for memory to be given back: a natural back-pressure) stalls every other
     * thread whose allocate or free changes the level, uninterruptibly: here the very free the
     * callback waits for. The issue asks that a callback that blocks cannot stall allocation.
     */
    @Test
    void aBlockingPressureCallbackStallsNoOtherThreadsFree() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(4 * MiB, 4 * MiB, 256)),
                PoolSettings.defaults().withCapacity(4 * MiB).withThreadCache(0), null);
        java.util.concurrent.CountDownLatch inside = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch letGo = new java.util.concurrent.CountDownLatch(1);
        MemoryHandle x = m.allocate(MiB, CPU);
        m.setPressureCallback(level -> {
            if (level == MemoryPressure.MEDIUM) {
                inside.countDown();
                try {
                    letGo.await(60, TimeUnit.SECONDS); // longer than the test waits for the free
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        });
        CompletableFuture<MemoryHandle> big = start("allocates to MEDIUM", () -> m.allocate(2 * MiB, CPU));
        assertTrue(inside.await(30, TimeUnit.SECONDS), "the allocation never told MEDIUM");
        CompletableFuture<Void> free = start("frees", () -> {
            m.deallocate(x); // MEDIUM -> LOW
            return null;
        });
        Thread freeing = threads.get(threads.size() - 1);
        // The free must end while the callback still blocks: waited for as long as any must-happen
        // step here (30 s), never for a figure a loaded machine may exceed.
        String stalled = null;
        try {
            free.get(30, TimeUnit.SECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            stalled = freeing.getState().toString();
        } finally {
            letGo.countDown();
        }
        free.get(30, TimeUnit.SECONDS);
        big.get(30, TimeUnit.SECONDS);
        assertEquals(null, stalled, "another thread's free waited 30 s for a blocked pressure callback (its state)");
    }

    // ================================================================== held up: the growth wait

    /** A waiter for a growth that fails is woken and fails too (no sleep forever). Holds. */
    @Test
    void aWaiterForAGrowthThatFailsIsWokenAndFails() throws Exception {
        HookedUpstream up = new HookedUpstream(8 * MiB);
        PooledMemoryManager m = manager(up, config(pool(4 * MiB, 4 * MiB, 256)), PoolSettings.defaults(), null);
        DeviceChunk squatter = up.reserve(7 * MiB); // the device has room on paper, not in fact
        Pause reserve = up.pauseNext(Call.RESERVE);
        CompletableFuture<MemoryHandle> first = start("grows", () -> m.allocate(4 * KiB, CPU));
        reserve.awaitArrival();
        CompletableFuture<MemoryHandle> second = start("waits", () -> m.allocate(4 * KiB, CPU));
        awaitParked(threads.get(threads.size() - 1));
        reserve.release();
        for (CompletableFuture<MemoryHandle> f : List.of(first, second)) {
            try {
                f.get(30, TimeUnit.SECONDS);
            } catch (ExecutionException e) {
                assertTrue(e.getCause() instanceof io.ferrum.memory.api.OutOfDeviceMemoryException, e.getCause().toString());
            }
        }
        up.release(squatter);
        assertEquals(0, m.memoryInfo().reservedBytes());
    }

    /** A waiter for a growth is woken by close and told the device is unavailable; the growth's chunk goes back. Holds. */
    @Test
    void closeWakesAGrowthWaiter() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults());
        Pause reserve = up.pauseNext(Call.RESERVE);
        CompletableFuture<MemoryHandle> first = start("grows", () -> m.allocate(4 * KiB, CPU));
        reserve.awaitArrival();
        CompletableFuture<MemoryHandle> second = start("waits", () -> m.allocate(4 * KiB, CPU));
        awaitParked(threads.get(threads.size() - 1));
        CompletableFuture<Void> close = start("close", () -> {
            m.close();
            return null;
        });
        ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
                () -> second.get(30, TimeUnit.SECONDS));
        assertTrue(e.getCause() instanceof io.ferrum.memory.api.DeviceUnavailableException, e.getCause().toString());
        reserve.release();
        close.get(30, TimeUnit.SECONDS);
        org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class, () -> first.get(30, TimeUnit.SECONDS));
        assertEquals(0, up.liveBytes());
        assertTrue(up.closed);
        assertEquals("", up.violations.toString());
    }

    // ================================================================== F. a failing upstream fill

    /** Delegates to a HookedUpstream, and fails the next fill when armed (a device error, a stopped backend). */
    static final class FlakyUpstream implements DeviceUpstream {
        final HookedUpstream up;
        final AtomicBoolean failNextFill = new AtomicBoolean();
        /** The next copy writes its first half, then fails (a device error in the middle of a copy). */
        final AtomicBoolean tearNextCopy = new AtomicBoolean();

        FlakyUpstream(HookedUpstream up) {
            this.up = up;
        }

        @Override public Device device() { return up.device(); }
        @Override public String backendName() { return up.backendName(); }
        @Override public long physicalCapacity() { return up.physicalCapacity(); }
        @Override public long chunkAlignment() { return up.chunkAlignment(); }
        @Override public DeviceChunk reserve(long bytes) { return up.reserve(bytes); }
        @Override public void release(DeviceChunk chunk) { up.release(chunk); }
        @Override
        public void copy(DeviceChunk s, long so, DeviceChunk d, long dO, long n) {
            if (tearNextCopy.compareAndSet(true, false)) {
                up.copy(s, so, d, dO, n / 2);
                throw new IllegalStateException("device error in memcpy after " + n / 2 + " bytes");
            }
            up.copy(s, so, d, dO, n);
        }
        @Override public void copyToHost(DeviceChunk s, long so, MemorySegment d, long n) { up.copyToHost(s, so, d, n); }
        @Override public void copyFromHost(MemorySegment s, DeviceChunk d, long dO, long n) { up.copyFromHost(s, d, dO, n); }
        @Override public Optional<MemorySegment> hostSegment(DeviceChunk c) { return up.hostSegment(c); }
        @Override public void advise(DeviceChunk c, long o, long n, MemoryUsageHint h) { }
        @Override public void close() { up.close(); }

        @Override
        public void fill(DeviceChunk chunk, long offset, long bytes, byte value) {
            if (failNextFill.compareAndSet(true, false)) {
                throw new IllegalStateException("device error in memset");
            }
            up.fill(chunk, offset, bytes, value);
        }
    }

    /**
     * zeroing=on-free: lastNameGone pins the block and calls scrub(b); unpin(b) without a finally.
     * A fill that throws leaves the pin (and pool.inflight) forever: the block is never released,
     * close waits its 30 s and then never releases the pool's chunks nor closes the upstream.
     */
    @Test
    void aFailedScrubLeavesNoPinAndCloseReleasesEverything() {
        HookedUpstream hooked = new HookedUpstream(64 * MiB);
        FlakyUpstream up = new FlakyUpstream(hooked);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)),
                PoolSettings.defaults().withZeroing(ZeroingPolicy.ON_FREE), null);
        MemoryHandle h = m.allocate(64 * KiB, CPU);
        up.failNextFill.set(true);
        Throwable free = thrown(() -> m.deallocate(h));
        long used = m.memoryInfo().usedBytes();
        Thread.currentThread().interrupt(); // do not wait 30 s for the pin
        try {
            m.close();
        } finally {
            Thread.interrupted();
        }
        assertEquals(0, hooked.liveBytes(), "the free threw " + free + "; used after it: " + used
                + "; nothing runs, yet close never releases the chunk");
        assertTrue(hooked.closed, "the upstream is closed");
    }

    /** zeroing=on-allocate: the fill fails after the handle was registered; allocate throws, the block is live and unreachable. */
    @Test
    void aFailedZeroingFillOnAllocateFailsTheAllocationAndFreesTheBlock() {
        HookedUpstream hooked = new HookedUpstream(64 * MiB);
        FlakyUpstream up = new FlakyUpstream(hooked);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)),
                PoolSettings.defaults().withZeroing(ZeroingPolicy.ON_ALLOCATE), null);
        up.failNextFill.set(true);
        Throwable alloc = thrown(() -> m.allocate(64 * KiB, CPU));
        assertNotNull(alloc);
        assertEquals(0, m.memoryInfo().usedBytes(), "allocate threw " + alloc + " but left a live block: " + m.handles());
    }

    // ================================================================== G. createMapping against a free of the guessed handle

    /**
     * createMapping: allocate -> lookup -> b.addName() (names 1 -> 2) -> isNamedBy(primary)?
     * A free of the (guessable) primary handle that claims it between addName and the re-check sees
     * names == 2 and only decrements (left = 1, no release); createMapping then sees the handle
     * claimed and calls b.dropUnissuedName() (-> 0) but ignores the result: nobody releases the
     * block. Seeded stress: a thread that knows the next MAPPED handle id frees it as soon as it is
     * live.
     */
    @Test
    void createMappingRacingAFreeOfItsGuessedHandleLeaksNoBlock() throws Exception {
        long seed = Long.getLong("ferrum.review.seed", 42L);
        java.util.Random rnd = new java.util.Random(seed);
        HookedUpstream up = new HookedUpstream(256 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults().withThreadCache(0));
        java.util.concurrent.atomic.AtomicLongArray candidates = new java.util.concurrent.atomic.AtomicLongArray(4);
        AtomicLong freedByGuesser = new AtomicLong();
        AtomicBoolean stop = new AtomicBoolean();
        CompletableFuture<Void> guesser = start("guesser", () -> {
            while (!stop.get()) {
                for (int k = 0; k < 4; k++) {
                    long id = candidates.get(k);
                    if (id == 0) {
                        continue;
                    }
                    MemoryHandle g = new MemoryHandle(id);
                    if (m.owns(g)) {
                        try {
                            m.deallocate(g);
                            freedByGuesser.incrementAndGet();
                        } catch (RuntimeException ignored) {
                            // lost the race to the owner
                        }
                        candidates.compareAndSet(k, id, 0);
                    }
                }
            }
            return null;
        });
        int iterations = Integer.getInteger("ferrum.review.iterations", 200_000);
        long refused = 0;
        long c1 = 0;
        long c2 = 0;
        for (int i = 0; i < iterations; i++) {
            long size = 256 * (1 + rnd.nextInt(4));
            // A MAPPED handle comes from the shared free list (LIFO): the next primary takes the slot
            // freed last, with its next generation.
            if (c1 != 0) {
                candidates.set(0, c1 + 1);
                candidates.set(1, c2 + 1);
                candidates.set(2, c1);
                candidates.set(3, c2);
            }
            MemoryMapping mp = null;
            try {
                mp = m.createMapping(CPU, CPU, size);
            } catch (RuntimeException e) {
                refused++;
            }
            for (int spin = rnd.nextInt(64); spin > 0; spin--) {
                Thread.onSpinWait();
            }
            for (int k = 0; k < 4; k++) {
                candidates.set(k, 0);
            }
            if (mp != null) {
                c1 = mp.source().id();
                c2 = mp.target().id();
                for (MemoryHandle h : List.of(mp.target(), mp.source())) {
                    try {
                        m.deallocate(h);
                    } catch (RuntimeException ignored) {
                        // the guesser freed it
                    }
                }
            } else if (c1 != 0) {
                c1 = c1 + 1;
            }
        }
        stop.set(true);
        guesser.get(30, TimeUnit.SECONDS);
        Thread.sleep(10);
        MemoryInfo info = m.memoryInfo();
        System.out.println("createMapping race: seed=" + seed + " iterations=" + iterations + " guesser frees="
                + freedByGuesser.get() + " createMapping refused=" + refused
                + " used=" + info.usedBytes() + " live=" + info.activeAllocations() + " handles=" + m.handles().size());
        assertEquals(0, info.activeAllocations(), "every mapping's block was freed (seed " + seed + "), but "
                + info.activeAllocations() + " blocks (" + info.usedBytes() + " bytes) are live and named by no handle: "
                + m.handles());
    }

    // ================================================================== two refused pre-allocations

    /**
     * Two pool edits whose pre-allocations the device refuses, the second begun while the first was
     * still reserving: both calls fail, so the pool must end as it was. The second took the first's
     * (refused, not yet undone) configuration as the one to go back to; the first, failing first,
     * found the second's on the pool and left it; the second then put back the first's.
     */
    @Test
    void twoOverlappingRefusedPreAllocationsLeaveThePoolAsItWas() throws Exception {
        HookedUpstream up = new HookedUpstream(16 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults(), null);
        MemoryPoolConfig before = m.poolConfig(MemoryType.TENSOR);
        MemoryPoolConfig first = pool(4 * MiB, MiB, 256).toBuilder().preAllocate(true).build();
        MemoryPoolConfig second = pool(12 * MiB, MiB, 256).toBuilder().preAllocate(true).build();
        DeviceChunk squatter = up.reserve(13 * MiB); // the device has room on paper, not in fact
        Pause firstReserve = up.pauseNext(Call.RESERVE);
        CompletableFuture<Void> a = start("pre-allocates 4 MiB", () -> {
            m.configurePool(CPU, MemoryType.TENSOR, first);
            return null;
        });
        firstReserve.awaitArrival();
        Pause secondReserve = up.pauseNext(Call.RESERVE);
        CompletableFuture<Void> b = start("pre-allocates 12 MiB", () -> {
            m.configurePool(CPU, MemoryType.TENSOR, second);
            return null;
        });
        Thread bThread = threads.get(threads.size() - 1);
        // The second edit is either in its own reserve (paused) or waits for the first to finish.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!secondReserve.arrived() && bThread.getState() != Thread.State.BLOCKED
                && bThread.getState() != Thread.State.WAITING) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("the second edit neither reserved nor waited: " + bThread.getState());
            }
            Thread.onSpinWait();
        }
        firstReserve.release();
        ExecutionException ea = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
                () -> a.get(30, TimeUnit.SECONDS));
        assertTrue(ea.getCause() instanceof io.ferrum.memory.api.OutOfDeviceMemoryException, ea.getCause().toString());
        secondReserve.awaitArrival();
        secondReserve.release();
        ExecutionException eb = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
                () -> b.get(30, TimeUnit.SECONDS));
        assertTrue(eb.getCause() instanceof io.ferrum.memory.api.OutOfDeviceMemoryException, eb.getCause().toString());
        assertEquals(before, m.poolConfig(MemoryType.TENSOR), "a refused configuration stayed on the pool");
        assertEquals(0, m.memoryInfo().reservedBytes());
        up.release(squatter);
    }

    /**
     * A pre-allocation that counted another growth in flight as its own: configurePool returned at
     * once, with preAllocate set, and when that growth failed the pool held nothing of what it said
     * it pre-allocated. It waits for the growth now, and reserves what is still missing.
     */
    @Test
    void aPreAllocationDoesNotCountAGrowthInFlightThatThenFails() throws Exception {
        HookedUpstream up = new HookedUpstream(16 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults(), null);
        MemoryPoolConfig preAllocated = pool(4 * MiB, MiB, 256).toBuilder().preAllocate(true).build();
        Pause reserve = up.pauseNext(Call.RESERVE);
        CompletableFuture<MemoryHandle> grows = start("grows 10 MiB", () -> m.allocate(10 * MiB, CPU));
        reserve.awaitArrival();
        DeviceChunk squatter = up.reserve(8 * MiB); // the growth in flight will not fit
        CompletableFuture<Void> configures = start("pre-allocates 4 MiB", () -> {
            m.configurePool(CPU, MemoryType.GENERAL, preAllocated);
            return null;
        });
        awaitParked(threads.get(threads.size() - 1)); // waits for the growth, or (before) returned
        reserve.release();
        ExecutionException refused = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
                () -> grows.get(30, TimeUnit.SECONDS));
        assertTrue(refused.getCause() instanceof io.ferrum.memory.api.OutOfDeviceMemoryException, refused.getCause().toString());
        configures.get(30, TimeUnit.SECONDS);
        assertEquals(preAllocated, m.poolConfig(MemoryType.GENERAL));
        assertEquals(4 * MiB, m.reservedByType().getOrDefault(MemoryType.GENERAL, 0L),
                "GENERAL's pre-allocation, which configurePool answered, is reserved");
        up.release(squatter);
    }

    // ================================================================== a pool edit queued across a close

    /**
     * A pool edit that waits for another (whose pre-allocation is in the device) while the manager
     * closes: it must be refused as on a closed manager, not answered with its configuration set on a
     * closed pool; the pre-allocation overtaken by the close is refused too. The close is held at the
     * GENERAL pool (a growth there is in flight) so that TENSOR's pool is not yet marked closed when
     * its growth returns: the window in which both edits once answered (CI, 2026-12-07).
     */
    @Test
    void aPoolEditQueuedBehindAnotherAcrossACloseIsRefused() throws Exception {
        HookedUpstream up = new HookedUpstream(16 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults(), null);
        Pause generalReserve = up.pauseNext(Call.RESERVE);
        CompletableFuture<MemoryHandle> general = start("grows GENERAL", () -> m.allocate(4 * KiB, CPU));
        generalReserve.awaitArrival();
        Pause reserve = up.pauseNext(Call.RESERVE);
        CompletableFuture<Void> a = start("pre-allocates 4 MiB", () -> {
            m.configurePool(CPU, MemoryType.TENSOR, pool(4 * MiB, MiB, 256).toBuilder().preAllocate(true).build());
            return null;
        });
        reserve.awaitArrival();
        CompletableFuture<Void> b = start("edits after it", () -> {
            m.configurePool(CPU, MemoryType.TENSOR, pool(2 * MiB, MiB, 256));
            return null;
        });
        Thread bThread = threads.get(threads.size() - 1);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (bThread.getState() != Thread.State.BLOCKED) { // waits for the first edit
            assertTrue(System.nanoTime() < deadline, "the second edit never waited for the first: " + bThread.getState());
            Thread.onSpinWait();
        }
        CompletableFuture<Void> close = start("closes", () -> {
            m.close();
            return null;
        });
        Thread closeThread = threads.get(threads.size() - 1);
        // Closed, and the close proper waits for GENERAL's growth: TENSOR's pool is not marked yet.
        while (!m.isClosed() || closeThread.getState() != Thread.State.TIMED_WAITING) {
            assertTrue(System.nanoTime() < deadline, "the close never waited at GENERAL's pool: " + closeThread.getState());
            Thread.onSpinWait();
        }
        reserve.release();
        for (CompletableFuture<Void> edit : List.of(a, b)) {
            ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
                    () -> edit.get(30, TimeUnit.SECONDS), (edit == a ? "the pre-allocation" : "the queued edit")
                            + " answered across the close");
            assertTrue(e.getCause() instanceof io.ferrum.memory.api.DeviceUnavailableException, e.getCause().toString());
        }
        generalReserve.release();
        close.get(30, TimeUnit.SECONDS);
        ExecutionException refused = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
                () -> general.get(30, TimeUnit.SECONDS), "the allocation answered across the close");
        assertTrue(refused.getCause() instanceof io.ferrum.memory.api.DeviceUnavailableException, refused.getCause().toString());
        assertEquals(0, up.liveBytes(), "every chunk went back");
    }
}
