package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryMapping;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.pool.HookedUpstream.Call;
import io.ferrum.memory.pool.HookedUpstream.Pause;

/**
 * The races of issue 13, each forced: the engine is stopped inside an upstream call (a paused
 * copy of a defragmentation run holds a pool's lock; a paused fill, copy or reserve holds a block
 * or a growth) while another thread makes the call that raced with it. Each test failed on the
 * engine before its fix; the numbers in the names are the issue's.
 */
class EngineRacesTest extends RaceHarness {
    // ------------------------------------------------------------------ 1

    @Test
    void zeroingOnAllocateCompletesBeforeCompactionCanMoveTheBlock() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults().withZeroing(ZeroingPolicy.ON_ALLOCATE));
        MemoryHandle a = m.allocate(4 * KiB, CPU);
        m.allocate(64 * KiB, CPU);
        MemoryHandle dirty = m.allocate(200 * KiB, CPU);
        fill(m, dirty, (byte) 0x5A);
        m.deallocate(dirty);
        m.deallocate(a);
        // [hole 4K][b 64K][free, dirty...]: the next block is carved from the dirty space, and
        // compaction would slide it 4K down.
        Pause fill = up.pauseNext(Call.FILL);
        CompletableFuture<MemoryHandle> c = start("allocate", () -> m.allocate(16 * KiB, CPU));
        fill.awaitArrival();
        CompletableFuture<DefragmentationStats> defrag = m.defragment(CPU).toCompletableFuture();
        fill.release();
        defrag.get(30, TimeUnit.SECONDS);
        MemoryHandle h = c.get(30, TimeUnit.SECONDS);
        assertEquals(null, firstOtherThan(m, h, (byte) 0), "a new block holds only zeros");
        assertEquals("", up.violations.toString());
    }

    // ------------------------------------------------------------------ 2

    @Test
    void closeNeverReleasesMemoryUnderACopyThatStillRuns() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        HostStreamManager streams = streams();
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults(), streams);
        MemoryHandle a = m.allocate(64 * KiB, CPU);
        MemoryHandle b = m.allocate(64 * KiB, CPU);
        fill(m, a, (byte) 7);
        StreamHandle s = streams.createStream(CPU);
        Pause copy = up.pauseNext(Call.COPY);
        CompletableFuture<Void> done = m.copyAsync(MemoryTransfer.of(a, b, 64 * KiB), s).toCompletableFuture();
        copy.awaitArrival();
        Thread.currentThread().interrupt(); // the closing thread is interrupted: close does not wait
        try {
            m.close();
        } finally {
            Thread.interrupted();
        }
        assertTrue(m.isClosed());
        assertTrue(up.liveBytes() > 0, "a chunk under a running copy is not released yet");
        copy.release();
        done.get(30, TimeUnit.SECONDS);
        assertEquals(0, up.liveBytes(), "the last copy's end releases what close left");
        assertTrue(up.closed, "and closes the upstream");
        assertEquals("", up.violations.toString());
    }

    // ------------------------------------------------------------------ 3

    @Test
    void aFreeRacingCloseStillClosesTheBlocksViews() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults());
        MemoryHandle h = m.allocate(4 * KiB, CPU);
        MemorySegment view = m.mapMemory(h, MemoryAccess.READ_WRITE);
        ReentrantLock general = poolLock(m, MemoryType.GENERAL);
        ReentrantLock tensor = poolLock(m, MemoryType.TENSOR);
        // The freeing thread caches a TENSOR block; after the trim its next call drains its cache,
        // which takes the TENSOR pool's lock after the free has claimed h.
        CompletableFuture<Void> cached = new CompletableFuture<>();
        CompletableFuture<Void> go = new CompletableFuture<>();
        CompletableFuture<Void> free = start("free", () -> {
            m.deallocate(m.allocate(256, MemoryType.TENSOR, CPU));
            cached.complete(null);
            go.get(30, TimeUnit.SECONDS);
            m.deallocate(h);
            return null;
        });
        Thread freeing = threads.get(threads.size() - 1);
        cached.get(30, TimeUnit.SECONDS);
        m.trim();
        tensor.lock();
        try {
            go.complete(null);
            awaitQueued(tensor, freeing); // h is claimed, its view still open
            CompletableFuture<Void> close = start("close", () -> {
                m.close();
                return null;
            });
            awaitQueued(tensor, threads.get(threads.size() - 1)); // the close is done with GENERAL
            // The free's own end closes the view too, under GENERAL's lock: it waits there until the
            // close has returned, so that only the close can have closed the view by then.
            general.lock();
            try {
                tensor.unlock();
                close.get(30, TimeUnit.SECONDS);
                assertEquals(0, up.liveBytes(), "the close released the chunks");
                assertFalse(view.scope().isAlive(), "the close returned with a view over the memory it released");
            } finally {
                general.unlock();
            }
        } finally {
            if (tensor.isHeldByCurrentThread()) {
                tensor.unlock();
            }
        }
        try {
            free.get(30, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            assertTrue(e.getCause() instanceof DeviceUnavailableException, e.getCause().toString());
        }
        assertEquals("", up.violations.toString());
    }

    // ------------------------------------------------------------------ 4

    @Test
    void bothHandlesOfAMappingFreedAtOnceReleaseTheMemoryOnce() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults());
        MemoryMapping mapping = m.createMapping(CPU, CPU, 4 * KiB);
        Pause lock = holdPoolLock(m, up, MemoryType.MAPPED);
        long liveBefore = m.quickInfo().activeAllocations();
        CompletableFuture<Void> one = start("free source", () -> {
            m.deallocate(mapping.source());
            return null;
        });
        awaitParked(threads.get(threads.size() - 1));
        CompletableFuture<Void> two = start("free target", () -> {
            m.deallocate(mapping.target());
            return null;
        });
        awaitParked(threads.get(threads.size() - 1));
        lock.release();
        one.get(30, TimeUnit.SECONDS);
        two.get(30, TimeUnit.SECONDS);
        threads.get(0).join(30_000);
        MemoryInfo quick = m.quickInfo();
        assertEquals(liveBefore - 1, quick.activeAllocations(), "the mapping's block is released once");
        assertEquals(4 * KiB, quick.usedBytes(), "only the block moved by compaction is left");
        MemoryHandle after = m.allocate(4 * KiB, MemoryType.MAPPED, CPU);
        assertEquals(8 * KiB, m.memoryInfo().usedBytes());
        m.deallocate(after);
    }

    // ------------------------------------------------------------------ 5

    @Test
    void raisingThePoolAlignmentNeverHandsOutAShortBlock() {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 16)), PoolSettings.defaults().withThreadCache(0), null);
        m.allocate(16, CPU);
        MemoryHandle hole = m.allocate(256, CPU);
        MemoryHandle neighbour = m.allocate(256, CPU);
        fill(m, neighbour, (byte) 3);
        m.deallocate(hole); // a 256-byte hole at 16 modulo 256
        m.configurePool(CPU, MemoryType.GENERAL, pool(MiB, MiB, 256));
        MemoryHandle h = m.allocate(256, CPU);
        MemoryHandleInfo info = m.handleInfo(h).orElseThrow();
        assertEquals(256, info.size());
        fill(m, h, (byte) 9);
        assertEquals(null, firstOtherThan(m, neighbour, (byte) 3), "the neighbour keeps its bytes");
        assertEquals(null, firstOtherThan(m, h, (byte) 9));
        assertEquals(16 + 256 + 256, m.memoryInfo().usedBytes());
    }

    // ------------------------------------------------------------------ 6

    @Test
    void aPoolAlignmentAboveTheChunkAlignmentGivesWholeAlignedBlocks() {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        up.barelyAligned = true; // chunks at 4096 modulo 8192
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 8192)), PoolSettings.defaults(), null);
        for (long size : new long[] {100, 8192, 512 * KiB, 2 * MiB}) {
            MemoryHandle h = m.allocate(size, CPU);
            MemorySegment s = m.mapMemory(h, MemoryAccess.READ_WRITE);
            assertEquals(0, s.address() % 8192, "block of " + size + " bytes at " + s.address());
            assertEquals(size, s.byteSize());
            m.unmapMemory(h);
            fill(m, h, (byte) 1);
            MemoryHandle other = m.allocate(size, CPU);
            m.copy(h, other, size, 0, 0);
            assertEquals(null, firstOtherThan(m, other, (byte) 1));
        }
        MemoryHandle aligned = m.allocateAligned(3 * MiB, 16 * KiB, MemoryType.GENERAL, CPU);
        MemorySegment s = m.mapMemory(aligned, MemoryAccess.READ_ONLY);
        assertEquals(0, s.address() % (16 * KiB));
        assertEquals(3 * MiB, s.byteSize());
        m.unmapMemory(aligned);
        assertEquals("", up.violations.toString());
    }

    // ------------------------------------------------------------------ 7

    @Test
    void zeroingOnFreeAlsoClearsABlockFreedWhileACopyPinsIt() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        HostStreamManager streams = streams();
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)),
                PoolSettings.defaults().withZeroing(ZeroingPolicy.ON_FREE), streams);
        MemoryHandle a = m.allocate(64 * KiB, CPU);
        MemoryHandle b = m.allocate(64 * KiB, CPU);
        fill(m, a, (byte) 0x77);
        StreamHandle s = streams.createStream(CPU);
        Pause copy = up.pauseNext(Call.COPY);
        CompletableFuture<Void> done = m.copyAsync(MemoryTransfer.of(a, b, 64 * KiB), s).toCompletableFuture();
        copy.awaitArrival();
        m.deallocate(a); // pinned: released when the copy ends
        copy.release();
        done.get(30, TimeUnit.SECONDS);
        MemoryHandle next = m.allocate(64 * KiB, CPU);
        assertEquals(null, firstOtherThan(m, next, (byte) 0), "the next owner sees no byte of the last one");
    }

    @Test
    void zeroingOnFreeClearsWhatCompactionLeavesBehindAndNewChunks() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        up.dirt = (byte) 0xEE; // chunks come as malloc may give them: not zero
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)),
                PoolSettings.defaults().withZeroing(ZeroingPolicy.ON_FREE), null);
        MemoryHandle first = m.allocate(16 * KiB, CPU);
        assertEquals(null, firstOtherThan(m, first, (byte) 0), "a block from a new chunk holds only zeros");
        MemoryHandle moved = m.allocate(64 * KiB, CPU);
        fill(m, moved, (byte) 0x42);
        m.deallocate(first);
        m.defragment(CPU).toCompletableFuture().get(30, TimeUnit.SECONDS);
        // moved now starts at 0; its old last 16K are free: the next block is carved there.
        MemoryHandle next = m.allocate(16 * KiB, CPU);
        assertEquals(null, firstOtherThan(m, next, (byte) 0), "compaction leaves no bytes behind");
        assertEquals(null, firstOtherThan(m, moved, (byte) 0x42), "the moved block keeps its bytes");
    }

    // ------------------------------------------------------------------ 8

    @Test
    void aCopyAsyncWhoseStreamGoesAwayLeavesNoPin() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        HostStreamManager streams = streams();
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults(), streams);
        MemoryHandle a = m.allocate(64 * KiB, CPU);
        MemoryHandle b = m.allocate(64 * KiB, CPU);
        StreamHandle s = streams.createStream(CPU);
        Pause lock = holdPoolLock(m, up, MemoryType.GENERAL);
        CompletableFuture<CompletableFuture<Void>> copy = start("copyAsync",
                () -> m.copyAsync(MemoryTransfer.of(a, b, 64 * KiB), s).toCompletableFuture());
        awaitParked(threads.get(threads.size() - 1)); // past the stream check, waiting to pin
        streams.destroyStream(s);
        lock.release();
        try {
            copy.get(30, TimeUnit.SECONDS).get(30, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            assertTrue(e.getCause() instanceof InvalidMemoryRequestException, e.getCause().toString());
        }
        threads.get(0).join(30_000);
        long before = m.memoryInfo().usedBytes();
        m.deallocate(a);
        m.deallocate(b);
        assertEquals(before - 128 * KiB, m.memoryInfo().usedBytes(), "both blocks were freed: no pin was left");
        m.defragment(CPU).toCompletableFuture().get(30, TimeUnit.SECONDS);
    }

    // ------------------------------------------------------------------ 10

    @Test
    void blocksCachedByThreadsThatEndedServeTheNextThreads() throws Exception {
        HookedUpstream up = new HookedUpstream(256 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults());
        for (int t = 0; t < 20; t++) {
            start("short-lived " + t, () -> {
                List<MemoryHandle> hs = new ArrayList<>();
                for (int i = 0; i < 8; i++) {
                    hs.add(m.allocate(128 * KiB, CPU));
                }
                hs.forEach(m::deallocate); // into this thread's cache, which dies with it
                return null;
            }).get(30, TimeUnit.SECONDS);
            threads.get(threads.size() - 1).join(30_000);
        }
        MemoryInfo info = m.memoryInfo();
        assertEquals(MiB, info.reservedBytes(), "the pool did not grow for each new thread");
        assertEquals(0, info.usedBytes());
        assertEquals(1, up.reserves.get());
    }

    /**
     * The same for a thread whose cache was made before the others died: no new cache sweeps for it,
     * so the sweep before a growth must (each sweep alone passed the test above).
     */
    @Test
    void aLiveThreadTakesBackWhatDeadThreadsCachedBeforeItGrows() throws Exception {
        HookedUpstream up = new HookedUpstream(256 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults());
        m.deallocate(m.allocate(256, CPU)); // this thread's cache is made now
        start("short-lived", () -> {
            List<MemoryHandle> hs = new ArrayList<>();
            for (int i = 0; i < 7; i++) {
                hs.add(m.allocate(128 * KiB, CPU));
            }
            hs.forEach(m::deallocate); // 896 KiB into a cache that dies with the thread
            return null;
        }).get(30, TimeUnit.SECONDS);
        threads.get(threads.size() - 1).join(30_000);
        List<MemoryHandle> hs = new ArrayList<>();
        for (int i = 0; i < 7; i++) {
            hs.add(m.allocate(128 * KiB, CPU));
        }
        assertEquals(MiB, m.memoryInfo().reservedBytes(), "the pool did not grow while a dead thread's cache held its blocks");
        assertEquals(1, up.reserves.get());
        hs.forEach(m::deallocate);
    }

    // ------------------------------------------------------------------ 12

    @Test
    void anAliasDiesWithItsManagerAndAnAliasOnlyBlockIsListed() {
        Map<Device, PooledMemoryManager> running = new ConcurrentHashMap<>();
        PoolSettings settings = PoolSettings.defaults().withPeers(running::get);
        PooledMemoryManager a = manager(new HookedUpstream(Device.cpu(1), 64 * MiB), config(pool(MiB, MiB, 256)), settings, null);
        PooledMemoryManager b = PooledMemoryManager.create(new HookedUpstream(Device.cpu(2), 64 * MiB),
                config(pool(MiB, MiB, 256)), settings, null);
        running.put(Device.cpu(1), a);
        running.put(Device.cpu(2), b);
        MemoryMapping mapping = a.createMapping(Device.cpu(1), Device.cpu(2), 4096);
        a.deallocate(mapping.source());
        assertEquals(List.of(mapping.target()), b.handles().stream().map(MemoryHandleInfo::handle).toList(),
                "a block that only an alias names is still listed, by the manager that issued the alias");
        assertEquals(List.of(), a.handles(), "the device that holds it answers nothing for the alias");
        assertEquals(4096, a.memoryInfo().usedBytes(), "its bytes are still the device's");
        b.close();
        assertEquals(0, a.memoryInfo().usedBytes(), "the alias died with its manager and took the block with it");
        assertEquals(List.of(), a.handles());
    }

    // ------------------------------------------------------------------ 13

    @Test
    void concurrentFirstAllocationsShareOneGrowth() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(4 * MiB, 4 * MiB, 256)), PoolSettings.defaults(), null);
        Pause reserve = up.pauseNext(Call.RESERVE);
        CompletableFuture<MemoryHandle> first = start("first", () -> m.allocate(4 * KiB, CPU));
        reserve.awaitArrival();
        CompletableFuture<MemoryHandle> second = start("second", () -> m.allocate(4 * KiB, CPU));
        Thread t = threads.get(threads.size() - 1);
        awaitParked(t);
        reserve.release();
        first.get(30, TimeUnit.SECONDS);
        second.get(30, TimeUnit.SECONDS);
        assertEquals(1, up.reserves.get(), "one growth served both");
        assertEquals(4 * MiB, m.memoryInfo().reservedBytes());
    }

    // ------------------------------------------------------------------ 14

    @Test
    void closeWaitsForAGrowthInFlightAndClosesTheUpstreamLast() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults());
        Pause reserve = up.pauseNext(Call.RESERVE);
        CompletableFuture<MemoryHandle> alloc = start("allocate", () -> m.allocate(4 * KiB, CPU));
        reserve.awaitArrival();
        CompletableFuture<Void> close = start("close", () -> {
            m.close();
            return null;
        });
        Thread closing = threads.get(threads.size() - 1);
        awaitParked(closing);
        reserve.release();
        close.get(30, TimeUnit.SECONDS);
        ExecutionException e = assertThrows(ExecutionException.class, () -> alloc.get(30, TimeUnit.SECONDS));
        assertTrue(e.getCause() instanceof DeviceUnavailableException, e.getCause().toString());
        assertEquals(0, up.liveBytes());
        assertTrue(up.closed);
        assertEquals("", up.violations.toString());
    }

    // ------------------------------------------------------------------ 16

    @Test
    void theFiguresAreOneMomentsEvenWhenABlockGoesFromThePoolToACacheMeanwhile() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults());
        MemoryHandle live = m.allocate(64 * KiB, CPU);
        Pause tensor = holdPoolLock(m, up, MemoryType.TENSOR);
        long liveBytes = m.quickInfo().usedBytes();
        // The figures: GENERAL's lock is free, TENSOR's held by the paused defragmentation.
        CompletableFuture<MemoryInfo> info = start("memoryInfo", m::memoryInfo);
        awaitParked(threads.get(threads.size() - 1));
        // Meanwhile a block comes from the GENERAL pool and goes into a thread's cache. The thread
        // stays alive: a dead thread's cache may be swept back into the pool (the defragmentation's
        // trim does) before the figures read the caches, which hid figures read pool by pool.
        CompletableFuture<Void> cached = new CompletableFuture<>();
        CompletableFuture<Void> end = new CompletableFuture<>();
        CompletableFuture<Void> churn = start("churn", () -> {
            m.deallocate(m.allocate(16 * KiB, CPU));
            cached.complete(null);
            end.get(30, TimeUnit.SECONDS);
            return null;
        });
        awaitParkedInOrDone(threads.get(threads.size() - 1), "Pool", "acquire", cached); // waits for GENERAL's lock
        tensor.release();
        MemoryInfo seen = info.get(30, TimeUnit.SECONDS);
        end.complete(null);
        churn.get(30, TimeUnit.SECONDS);
        assertEquals(liveBytes, seen.usedBytes(), "used is the sum of the blocks live at one moment");
        assertEquals(2, seen.activeAllocations());
        m.deallocate(live);
    }

    // ------------------------------------------------------------------ 17

    @Test
    void pressureFollowsBlocksIntoAndOutOfThreadCaches() {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        List<MemoryPressure> levels = new java.util.concurrent.CopyOnWriteArrayList<>();
        PooledMemoryManager m = manager(up, config(pool(4 * MiB, 4 * MiB, 256)),
                PoolSettings.defaults().withCapacity(4 * MiB), null);
        m.setPressureCallback(levels::add);
        List<MemoryHandle> hs = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            hs.add(m.allocate(256 * KiB, CPU));
            hs.add(m.allocate(240 * KiB, CPU));
        }
        assertEquals(MemoryPressure.CRITICAL, levels.get(levels.size() - 1));
        hs.forEach(m::deallocate); // every block into this thread's cache
        assertEquals(0, m.memoryInfo().usedBytes());
        assertEquals(MemoryPressure.LOW, levels.get(levels.size() - 1), "the callback heard the last level: " + levels);
        hs.clear();
        for (int i = 0; i < 8; i++) {
            hs.add(m.allocate(256 * KiB, CPU));
            hs.add(m.allocate(240 * KiB, CPU));
        }
        assertEquals(MemoryPressure.CRITICAL, levels.get(levels.size() - 1), "from the cache too: " + levels);
        hs.forEach(m::deallocate);
    }

    // ------------------------------------------------------------------ hostile callbacks

    @Test
    void aBlockedPressureCallbackHoldsUpOnlyTheCallItTellsAndMissesNoLevel() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(4 * MiB, 4 * MiB, 256)),
                PoolSettings.defaults().withCapacity(4 * MiB).withThreadCache(0), null);
        List<MemoryPressure> told = new java.util.concurrent.CopyOnWriteArrayList<>();
        java.util.concurrent.CountDownLatch inside = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch letGo = new java.util.concurrent.CountDownLatch(1);
        m.setPressureCallback(level -> {
            told.add(level);
            if (told.size() == 1) {
                inside.countDown();
                try {
                    letGo.await(60, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        });
        m.addPressureObserver(new io.ferrum.memory.api.MemoryObserver() {
            @Override
            public void pressureChanged(Device d, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
                throw new NoClassDefFoundError("a stopped bundle's class");
            }
        });
        CompletableFuture<MemoryHandle> crossing = start("crosses MEDIUM", () -> m.allocate(3 * MiB, CPU));
        assertTrue(inside.await(30, TimeUnit.SECONDS));
        // Another thread crosses a level and back while the callback is held: it goes on. Then it
        // leaves the level at HIGH: the held teller must look again once it lets go, and tell it.
        MemoryHandle kept = start("goes on", () -> {
            MemoryHandle h = m.allocate(768 * KiB, CPU);
            m.deallocate(h);
            return m.allocate(512 * KiB, CPU);
        }).get(30, TimeUnit.SECONDS);
        letGo.countDown();
        MemoryHandle big = crossing.get(30, TimeUnit.SECONDS);
        assertEquals(MemoryPressure.MEDIUM, told.get(0));
        assertEquals(MemoryPressure.HIGH, m.memoryInfo().pressureLevel());
        assertEquals(m.memoryInfo().pressureLevel(), told.get(told.size() - 1), "the last level told is the level now: " + told);
        m.deallocate(kept);
        m.deallocate(big);
        assertEquals(MemoryPressure.LOW, told.get(told.size() - 1), "" + told);
    }

    // ------------------------------------------------------------------ limits

    @Test
    void concurrentAllocationNeverPassesAPoolsMaxSizeNorTheDevicesCapacity() throws Exception {
        for (boolean twoPools : new boolean[] {false, true}) {
            HookedUpstream up = new HookedUpstream(256 * MiB);
            MemoryPoolConfig limited = MemoryPoolConfig.builder().initialSize(0).maxSize(6 * MiB)
                    .growthIncrement(MiB).alignment(256).build();
            MemoryManagerConfig cfg = MemoryManagerConfig.defaults().withAutoGc(false, 0.85)
                    .withPoolConfig(MemoryType.GENERAL, limited).withPoolConfig(MemoryType.TENSOR, limited);
            PooledMemoryManager m = manager(up, cfg, PoolSettings.defaults().withCapacity(8 * MiB), null);
            // Every thread meets the first growth in flight: it is paused until all have started.
            Pause first = up.pauseNext(Call.RESERVE);
            List<CompletableFuture<Long>> workers = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                long seed = 1234 + t;
                workers.add(start("limits " + t, () -> {
                    java.util.Random rnd = new java.util.Random(seed);
                    List<MemoryHandle> mine = new ArrayList<>();
                    long refused = 0;
                    for (int i = 0; i < 300; i++) {
                        MemoryType type = twoPools && rnd.nextBoolean() ? MemoryType.TENSOR : MemoryType.GENERAL;
                        try {
                            mine.add(m.allocate(4 * KiB + rnd.nextInt(768) * KiB, type, CPU));
                        } catch (io.ferrum.memory.api.OutOfDeviceMemoryException e) {
                            refused++;
                        }
                        if (mine.size() > 6 || !mine.isEmpty() && rnd.nextInt(3) == 0) {
                            m.deallocate(mine.remove(rnd.nextInt(mine.size())));
                        }
                    }
                    mine.forEach(m::deallocate);
                    return refused;
                }));
            }
            first.awaitArrival();
            first.release();
            long refused = 0;
            for (CompletableFuture<Long> w : workers) {
                refused += w.get(60, TimeUnit.SECONDS);
            }
            long limit = twoPools ? 8 * MiB : 6 * MiB;
            assertTrue(up.peakBytes.get() <= limit, "held " + up.peakBytes.get() + " bytes at once, limit " + limit);
            assertTrue(refused > 0, "the limits were reached");
            assertEquals(0, m.memoryInfo().usedBytes());
        }
    }

    // ------------------------------------------------------------------ 22

    @Test
    void aRefusedPoolConfigurationChangesNoFigure() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, PoolSettings.defaults());
        MemoryHandle cachedLater = m.allocate(4 * KiB, CPU);
        MemoryHandle live = m.allocate(4 * KiB, CPU);
        long cachedAt = address(m, cachedLater);
        m.deallocate(cachedLater); // into this thread's cache
        MemoryInfo before = m.memoryInfo();
        MemoryPoolConfig tooSmall = MemoryPoolConfig.builder().initialSize(0).maxSize(1024).growthIncrement(1024).build();
        InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class,
                () -> m.configurePool(CPU, MemoryType.GENERAL, tooSmall));
        assertTrue(e.getMessage().contains("1024"), e.getMessage());
        MemoryInfo after = m.memoryInfo();
        assertEquals(before.usedBytes(), after.usedBytes());
        assertEquals(before.reservedBytes(), after.reservedBytes());
        assertEquals(before.activeAllocations(), after.activeAllocations());
        assertEquals(before.fragmentationRatio(), after.fragmentationRatio());
        // The figures count a cached block as free whether or not it went back to the pool: where the
        // pool carves next shows it. Back in the pool, the 4 KiB hole it left is the best fit.
        assertNotEquals(cachedAt, addressAnotherThreadGets(m, 4 * KiB, MemoryType.GENERAL),
                "the refused call gave this thread's cached block back to the pool");
        m.deallocate(live);
    }
}
