package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryMapping;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.pool.AttackRacesTest.FailingCopies;
import io.ferrum.memory.pool.HookedUpstream.Call;
import io.ferrum.memory.pool.HookedUpstream.Pause;

/**
 * An attack on the pool engine's maintenance (defragment, trim, auto-GC, pressure, zeroing) against
 * what must be respected meanwhile (docs/RELIABILITY.md, "Maintenance under use"). Each interleaving
 * is forced: a paused upstream call, a held scope, a latch; every wait is bounded.
 */
class MaintenanceAttackTest extends RaceHarness {
    static final Device CPU1 = Device.cpu(1);
    static final Device CPU2 = Device.cpu(2);

    /**
     * An evacuation carves its destination before it copies and gives the old place back after: the
     * pool's own figures are read under its lock, which the move holds, but the device's lock-free
     * account (the cheap figures, the pressure level) saw the moving block twice meanwhile. An
     * allocation of another pool then heard a level the device never had, and nothing told it back.
     */
    @Test
    void anEvacuationInFlightShowsNoBlockTwiceToTheCheapFiguresOrThePressureLevel() throws Exception {
        HookedUpstream up = new HookedUpstream(20 * MiB); // MEDIUM from 14 MiB
        PooledMemoryManager m = manager(up, config(pool(MiB, 4 * MiB, 256)), PoolSettings.defaults().withThreadCache(0),
                null);
        MemoryHandle[] a = new MemoryHandle[4];
        for (int i = 0; i < a.length; i++) {
            a[i] = m.allocate(MiB / 4, MemoryType.TENSOR, CPU); // chunk A, 1 MiB, four quarters
        }
        MemoryHandle b = m.allocate(MiB / 4, MemoryType.TENSOR, CPU); // chunk B, 4 MiB
        write(m, b, (byte) 0x3C);
        m.deallocate(a[3]); // nothing slides: the first copy is b's evacuation into A's last quarter
        m.allocate(12 * MiB + 7 * MiB / 8, CPU); // ballast: 13.875 MiB used, LOW
        List<MemoryPressure> heard = new CopyOnWriteArrayList<>();
        m.setPressureCallback(heard::add);
        MemoryInfo before = m.memoryInfo();
        Pause copy = up.pauseNext(Call.COPY);
        CompletableFuture<DefragmentationStats> defrag = start("defragment",
                () -> m.defragment(CPU).toCompletableFuture().get());
        MemoryInfo during;
        try {
            copy.awaitArrival();
            during = m.quickInfo();
            m.allocate(256, CPU); // 13.875 MiB + 256 bytes: still LOW
        } finally {
            copy.release();
        }
        assertEquals(1, defrag.get(30, TimeUnit.SECONDS).blocksMoved());
        assertEquals(List.of(), heard, "levels told while the device stayed LOW");
        assertEquals(before.usedBytes(), during.usedBytes(), "the cheap figures during the move");
        assertEquals(before.activeAllocations(), during.activeAllocations(), "the cheap figures' live blocks during the move");
        assertEquals(m.memoryInfo().usedBytes(), m.quickInfo().usedBytes());
        EngineTestSupport.assertContent(m, b, (byte) 0x3C);
    }

    /**
     * zeroing=on-free: a place a defragmentation's move left behind that the device fails to clear
     * stays out of use, counted as used, and the used bytes rise. Nothing told the level: an
     * allocation or a free checks it, a defragmentation did not, and the callback and observers kept
     * LOW for a device at MEDIUM for as long as it stood idle. Forced: the device fails the clearing
     * of the place an evacuation left, 64 KiB that take the device from just under MEDIUM to it.
     */
    @Test
    void aPlaceKeptOutOfUseByADefragmentationIsToldInTheLevel() throws Exception {
        HookedUpstream hooked = new HookedUpstream(8 * MiB); // MEDIUM from 5.6 MiB
        ReviewRacesTest.FlakyUpstream up = new ReviewRacesTest.FlakyUpstream(hooked);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)),
                PoolSettings.defaults().withThreadCache(0).withZeroing(ZeroingPolicy.ON_FREE), null);
        MemoryHandle[] full = new MemoryHandle[4];
        for (int i = 0; i < full.length; i++) {
            full[i] = m.allocate(256 * KiB, CPU); // the first chunk, full
        }
        m.allocate(64 * KiB, CPU); // a second chunk: evacuated into the first
        m.allocate(4864 * KiB, MemoryType.TENSOR, CPU); // ballast in a pool of its own
        m.deallocate(full[3]); // 5696 KiB used: LOW
        List<MemoryPressure> heard = new CopyOnWriteArrayList<>();
        m.setPressureCallback(heard::add);
        assertEquals(MemoryPressure.LOW, m.memoryInfo().pressureLevel());
        up.failNextFill.set(true); // the clearing of the 64 KiB the evacuation leaves behind
        assertNotNull(ZeroingAttackTest.defragmentFailure(m), "the device failed the clearing");
        assertEquals(MemoryPressure.MEDIUM, m.memoryInfo().pressureLevel(), "the place kept out of use counts as used");
        assertEquals(List.of(MemoryPressure.MEDIUM), heard, "the level the figures show was told");
    }

    /**
     * The out-of-memory hook trims (the pool then has room to grow) and compacts: a device that
     * failed the compaction's copy made the allocation throw the copy's error, where trying again
     * would have grown the pool into the room the trim made. Auto-GC is tidying: its failure is
     * logged, and the allocation goes on, as when an allocation crosses the threshold.
     */
    @Test
    void anOutOfMemoryHookWhoseCompactionCopyFailsStillLetsTheAllocationGrowIntoWhatItsTrimGaveBack() {
        FailingCopies up = new FailingCopies(new HookedUpstream(64 * MiB));
        List<String> warnings = new CopyOnWriteArrayList<>();
        MemoryManagerConfig cfg = MemoryManagerConfig.defaults().withAutoGc(true, 1.0) // only the hook runs it
                .withPoolConfig(MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB)
                        .maxSize(8 * MiB).alignment(256).preAllocate(false).build());
        PooledMemoryManager m = manager(up, cfg,
                PoolSettings.defaults().withThreadCache(0).withLog(EngineTestSupport.warningsInto(warnings)), null);
        MemoryHandle[] p = new MemoryHandle[4];
        for (int i = 0; i < p.length; i++) {
            p[i] = m.allocate(256 * KiB, CPU); // chunk A, 1 MiB
        }
        write(m, p[1], (byte) 0x11);
        MemoryHandle emptied = m.allocate(3 * MiB, CPU); // chunk B, 3 MiB
        m.allocate(3 * MiB, CPU); // chunk C, 3 MiB: 7 of 8 MiB held
        m.deallocate(emptied); // B is empty: a trim gives it back
        m.deallocate(p[0]); // p[1] would slide into this hole
        up.failNextCopy = true;
        MemoryHandle big = m.allocate(3 * MiB + 256 * KiB, CPU); // B cannot hold it, nor the limit a growth
        assertTrue(m.owns(big), "the allocation grew into the room the trim gave back");
        assertEquals(MiB + 3 * MiB + 3 * MiB + 256 * KiB, m.memoryInfo().reservedBytes());
        assertEquals(1, warnings.size(), warnings.toString());
        EngineTestSupport.assertContent(m, p[1], (byte) 0x11);
    }

    /**
     * Checked, sound: a defragmentation while a {@code withMapped} action (another thread's, held by
     * a latch), a {@code mapMemory} view and a {@code readAsync} queued on a busy stream use three
     * blocks, each after a hole, moves only the fourth block; every block keeps its bytes; once
     * they are done, the next defragmentation moves the three, and their handles still reach them.
     */
    @Test
    void aBlockUsedByAScopeAViewOrAQueuedCopyStaysWhereItIsAndEveryBlockKeepsItsBytes() throws Exception {
        HostStreamManager streams = streams();
        PooledMemoryManager m = manager(new HookedUpstream(64 * MiB), config(pool(MiB, MiB, 256)),
                PoolSettings.defaults().withThreadCache(0), streams);
        MemoryHandle[] h = new MemoryHandle[8];
        for (int i = 0; i < h.length; i++) {
            h[i] = m.allocate(4 * KiB, CPU);
            write(m, h[i], (byte) (i * 17));
        }
        for (int i = 0; i < h.length; i += 2) {
            m.deallocate(h[i]); // a hole before each of h1, h3, h5, h7
        }
        CountDownLatch inside = new CountDownLatch(1);
        CountDownLatch leave = new CountDownLatch(1);
        CompletableFuture<Long> action = start("action", () -> m.withMapped(h[1], MemoryAccess.READ_WRITE, v -> {
            inside.countDown();
            await(leave);
            return v.address();
        }));
        assertTrue(inside.await(30, TimeUnit.SECONDS));
        long viewAddress = m.mapMemory(h[3], MemoryAccess.READ_WRITE).address();
        StreamHandle s = streams.createStream(CPU);
        CountDownLatch busy = new CountDownLatch(1);
        streams.submit(s, () -> await(busy));
        MemorySegment readBack = Arena.ofAuto().allocate(4 * KiB);
        CompletableFuture<Void> queued = m.readAsync(h[5], 0, readBack, s).toCompletableFuture();
        DefragmentationStats first;
        try {
            first = m.defragment(CPU).toCompletableFuture().get(30, TimeUnit.SECONDS);
        } finally {
            leave.countDown();
            busy.countDown();
        }
        assertEquals(1, first.blocksMoved(), "only h7 was free to move");
        queued.get(30, TimeUnit.SECONDS);
        long actionAddress = action.get(30, TimeUnit.SECONDS);
        assertEquals(viewAddress, m.mapMemory(h[3], MemoryAccess.READ_ONLY).address(), "the mapped block stayed");
        m.unmapMemory(h[3]);
        assertEquals(actionAddress, address(m, h[1]), "the block in the action stayed");
        for (int i = 0; i < 4 * KiB; i++) {
            assertEquals((byte) (5 * 17 + i * 31), readBack.get(ValueLayout.JAVA_BYTE, i), "queued read, byte " + i);
        }
        assertEquals(4, m.defragment(CPU).toCompletableFuture().get(30, TimeUnit.SECONDS).blocksMoved(),
                "h1, h3 and h5 slide down now, and h7 after them");
        for (int i = 1; i < h.length; i += 2) {
            EngineTestSupport.assertContent(m, h[i], (byte) (i * 17));
        }
        assertEquals(0.0, m.memoryInfo().fragmentationRatio());
    }

    /**
     * Checked, sound: a mapping's block in cpu:1, named by cpu:2's alias. While cpu:2 holds a view of
     * the alias, cpu:1's defragmentation leaves the block where it is; once unmapped, it moves, and
     * cpu:2 reads its bytes through the alias at the new place. cpu:2's own defragmentation moves
     * nothing of cpu:1's.
     */
    @Test
    void aBlockAPeersAliasMapsStaysPutAndMovesWithItsBytesOnceUnmapped() throws Exception {
        Map<Device, PooledMemoryManager> running = new ConcurrentHashMap<>();
        PoolSettings settings = PoolSettings.defaults().withThreadCache(0).withPeers(running::get);
        PooledMemoryManager one = manager(new HookedUpstream(CPU1, 64 * MiB), config(pool(MiB, MiB, 256)), settings, null);
        PooledMemoryManager two = manager(new HookedUpstream(CPU2, 64 * MiB), config(pool(MiB, MiB, 256)), settings, null);
        running.put(CPU1, one);
        running.put(CPU2, two);
        MemoryMapping hole = one.createMapping(CPU1, CPU2, 4 * KiB);
        MemoryMapping kept = one.createMapping(CPU1, CPU2, 4 * KiB);
        write(one, kept.source(), (byte) 0x21);
        one.deallocate(hole.source());
        two.deallocate(hole.target()); // a hole before kept's block
        long mapped = two.mapMemory(kept.target(), MemoryAccess.READ_ONLY).address();
        assertEquals(0, one.defragment(CPU1).toCompletableFuture().get(30, TimeUnit.SECONDS).blocksMoved());
        assertEquals(0, two.defragment(CPU2).toCompletableFuture().get(30, TimeUnit.SECONDS).blocksMoved());
        assertEquals(mapped, two.mapMemory(kept.target(), MemoryAccess.READ_ONLY).address());
        two.unmapMemory(kept.target());
        assertEquals(1, one.defragment(CPU1).toCompletableFuture().get(30, TimeUnit.SECONDS).blocksMoved());
        EngineTestSupport.assertContent(two, kept.target(), (byte) 0x21);
        EngineTestSupport.assertContent(one, kept.source(), (byte) 0x21);
        assertEquals(4 * KiB, one.memoryInfo().usedBytes());
        assertEquals(0, two.memoryInfo().usedBytes(), "the alias's bytes count on the owner");
    }

    /**
     * Checked, sound: a close while a defragmentation's copy is paused waits for the compaction (it
     * holds the pool's lock), the defragmentation ends (done, or refused as closed), and every chunk
     * goes back once; nothing touches released memory.
     */
    @Test
    void aCloseDuringAPausedCompactionWaitsForItAndReleasesEveryChunkOnce() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults().withThreadCache(0),
                null);
        MemoryHandle hole = m.allocate(64 * KiB, CPU);
        MemoryHandle moved = m.allocate(64 * KiB, CPU);
        m.allocate(64 * KiB, MemoryType.TENSOR, CPU);
        write(m, moved, (byte) 5);
        m.deallocate(hole);
        Pause copy = up.pauseNext(Call.COPY);
        CompletableFuture<CompletableFuture<DefragmentationStats>> defrag = start("defragment",
                () -> m.defragment(CPU).toCompletableFuture());
        copy.awaitArrival();
        CompletableFuture<Void> close = start("close", () -> {
            m.close();
            return null;
        });
        try {
            // A timed wait, within the close's limit (30 s): the copy is let go well before it.
            awaitParkedIn(threads.get(threads.size() - 1), "Lifecycle", "tryLock");
            assertFalse(close.isDone(), "the close went on under the paused copy");
        } finally {
            copy.release();
        }
        close.get(30, TimeUnit.SECONDS);
        try {
            defrag.get(30, TimeUnit.SECONDS).get(30, TimeUnit.SECONDS); // TENSOR's compaction came after the close
        } catch (ExecutionException e) {
            assertInstanceOf(DeviceUnavailableException.class, e.getCause());
        }
        assertEquals(0, up.liveBytes(), "every chunk went back");
        assertTrue(up.violations.isEmpty(), up.violations.toString());
    }

    /**
     * Checked, sound: pressure callbacks that call back into the manager (defragment, trim, allocate,
     * free, the figures) from inside a tell neither deadlock nor lose a level: each runs on the
     * calling thread outside every pool lock.
     */
    @Test
    void aPressureCallbackThatDefragmentsTrimsAllocatesAndFreesRunsWithoutADeadlock() throws Exception {
        PooledMemoryManager m = manager(new HookedUpstream(10 * MiB), config(pool(MiB, MiB, 256)),
                PoolSettings.defaults(), null);
        List<MemoryPressure> heard = new CopyOnWriteArrayList<>();
        m.setPressureCallback(level -> {
            heard.add(level);
            m.defragment(CPU).toCompletableFuture().join();
            m.trim();
            m.deallocate(m.allocate(4 * KiB, MemoryType.TENSOR, CPU));
            m.memoryInfo();
        });
        MemoryHandle ballast = start("allocate", () -> {
            MemoryHandle hole = m.allocate(MiB / 2, CPU);
            MemoryHandle big = m.allocate(7 * MiB + MiB / 4, CPU); // 7.75 of 10 MiB: MEDIUM
            m.deallocate(hole); // 7.25: still MEDIUM
            return big;
        }).get(30, TimeUnit.SECONDS);
        start("free", () -> {
            m.deallocate(ballast); // LOW
            return null;
        }).get(30, TimeUnit.SECONDS);
        assertEquals(List.of(MemoryPressure.MEDIUM, MemoryPressure.LOW), heard);
        assertEquals(0, m.memoryInfo().usedBytes());
    }

    /**
     * Checked, sound: zeroing on free, a block freed by another thread while its evacuation's copy is
     * paused (the free claims the name, then waits for the pool's lock). Once the move ends, the free
     * clears the block at its new place and the compaction its old one: the next owners of both
     * places read only zeros.
     */
    @Test
    void aBlockFreedWhileItIsBeingEvacuatedLeavesOnlyZerosAtBothPlaces() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, 4 * MiB, 256)),
                PoolSettings.defaults().withZeroing(ZeroingPolicy.ON_FREE), null);
        MemoryHandle[] a = new MemoryHandle[4];
        for (int i = 0; i < a.length; i++) {
            a[i] = m.allocate(MiB / 4, CPU); // chunk A, 1 MiB, four quarters
        }
        MemoryHandle secret = m.allocate(MiB / 4, CPU); // chunk B, 4 MiB
        fill(m, secret, (byte) 0x5A);
        m.deallocate(a[3]); // the first copy is the secret's evacuation into A's last quarter
        Pause copy = up.pauseNext(Call.COPY);
        CompletableFuture<DefragmentationStats> defrag = start("defragment",
                () -> m.defragment(CPU).toCompletableFuture().get());
        copy.awaitArrival();
        CompletableFuture<Void> free = start("free", () -> {
            m.deallocate(secret);
            return null;
        });
        try {
            awaitParkedIn(threads.get(threads.size() - 1), "Pool", "acquire");
        } finally {
            copy.release();
        }
        free.get(30, TimeUnit.SECONDS);
        defrag.get(30, TimeUnit.SECONDS);
        MemoryHandle inA = m.allocate(MiB / 4, CPU);
        MemoryHandle inB = m.allocate(4 * MiB, CPU);
        assertNull(firstOtherThan(m, inA, (byte) 0), "the secret's new place");
        assertNull(firstOtherThan(m, inB, (byte) 0), "the secret's old place");
        assertTrue(up.violations.isEmpty(), up.violations.toString());
    }

    /**
     * Checked, sound: another live thread caches a block that sits alone in a chunk. A defragmentation
     * (which cannot take that thread's cache, only ask it to give it back on its next call) evacuates
     * it like a live block, and its trim gives the emptied chunk back; the thread's next allocation
     * gets the block's new place and its bytes hold there.
     */
    @Test
    void aBlockInALiveThreadsCacheIsEvacuatedAndServesItsThreadAtItsNewPlace() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, 4 * MiB, 256)), PoolSettings.defaults(), null);
        MemoryHandle[] a = new MemoryHandle[4];
        for (int i = 0; i < a.length; i++) {
            a[i] = m.allocate(MiB / 4, MemoryType.TENSOR, CPU); // chunk A
        }
        m.deallocate(a[3]); // on this thread: into its own cache
        CountDownLatch cached = new CountDownLatch(1);
        CountDownLatch goOn = new CountDownLatch(1);
        CompletableFuture<Long> owner = start("owner", () -> {
            MemoryHandle b = m.allocate(MiB / 4, MemoryType.TENSOR, CPU); // chunk B, 4 MiB
            long before = address(m, b);
            m.deallocate(b); // into this thread's cache
            cached.countDown();
            await(goOn);
            MemoryHandle again = m.allocate(MiB / 4, MemoryType.TENSOR, CPU); // its cache given back first
            write(m, again, (byte) 0x44);
            EngineTestSupport.assertContent(m, again, (byte) 0x44);
            return address(m, again) - before;
        });
        assertTrue(cached.await(30, TimeUnit.SECONDS));
        m.trim(); // gives back this thread's cached quarter of A (not the owner's block)
        DefragmentationStats stats;
        try {
            stats = m.defragment(CPU).toCompletableFuture().get(30, TimeUnit.SECONDS);
        } finally {
            goOn.countDown();
        }
        assertEquals(0, stats.blocksMoved(), "a cached block is no live block");
        assertTrue(owner.get(30, TimeUnit.SECONDS) != 0, "the cached block moved out of chunk B");
        assertEquals(0.0, m.memoryInfo().fragmentationRatio());
        assertEquals(3 * MiB / 4 + MiB / 4, m.memoryInfo().usedBytes());
        assertEquals(MiB, m.memoryInfo().reservedBytes(), "the defragmentation's trim gave B back: A is left");
    }

    /**
     * A pressure callback that closes its manager (the device is being stopped) runs on the thread
     * whose change it tells: for a block freed while an async copy pinned it, the stream's thread,
     * inside the copy's end, while the copy still pins its other block and another copy waits behind
     * it on the stream. The close waited for those pins, which only the copy's own return can end:
     * it stalled the stream its whole limit (30 s), as a close inside a {@code withMapped} action
     * once did. The close now leaves the release to the last of that work.
     */
    @Test
    void aCloseFromAPressureCallbackAtTheEndOfAnAsyncCopyDoesNotWaitForThatCopy() throws Exception {
        HostStreamManager streams = streams();
        HookedUpstream up = new HookedUpstream(10 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults().withThreadCache(0),
                streams);
        MemoryHandle src = m.allocate(4 * KiB, CPU);
        MemoryHandle dst = m.allocate(9 * MiB, CPU); // HIGH
        StreamHandle s = streams.createStream(CPU);
        CountDownLatch busy = new CountDownLatch(1);
        streams.submit(s, () -> await(busy));
        MemoryHandle other = m.allocate(4 * KiB, CPU);
        CompletableFuture<Void> copy = m.copyAsync(MemoryTransfer.of(src, dst, 4 * KiB), s).toCompletableFuture();
        CompletableFuture<Void> behind = m.copyAsync(MemoryTransfer.of(src, other, 4 * KiB), s).toCompletableFuture();
        m.deallocate(dst); // pinned: given back by the copy's end, on the stream's thread
        AtomicReference<Thread> teller = new AtomicReference<>();
        CompletableFuture<Void> closed = new CompletableFuture<>();
        m.setPressureCallback(level -> {
            teller.set(Thread.currentThread());
            m.close();
            closed.complete(null);
        });
        busy.countDown();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (teller.get() == null) {
            assertTrue(System.nanoTime() < deadline, "the callback was never told");
            Thread.onSpinWait();
        }
        awaitParkedInOrDone(teller.get(), "Lifecycle", "awaitIdle", closed);
        boolean waited = !closed.isDone();
        if (waited) {
            teller.get().interrupt(); // ends the close's wait, so that the test need not sit out its limit
        }
        assertFalse(waited, "the close inside the copy's end waited for the copy");
        copy.get(30, TimeUnit.SECONDS);
        closed.get(30, TimeUnit.SECONDS);
        behind.get(30, TimeUnit.SECONDS); // queued behind the first, it ran once the close returned
        assertEquals(0, up.liveBytes(), "the last copy's end released every chunk");
        assertTrue(up.violations.isEmpty(), up.violations.toString());
    }

    private static void await(CountDownLatch latch) {
        try {
            if (!latch.await(30, TimeUnit.SECONDS)) {
                throw new AssertionError("a latch was never let go");
            }
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
    }

    private static void write(PooledMemoryManager m, MemoryHandle h, byte seed) {
        EngineTestSupport.write(m, h, seed);
    }
}
