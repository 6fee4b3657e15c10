package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryMapping;
import io.ferrum.memory.api.MemoryObserver;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.OutOfDeviceMemoryException;
import io.ferrum.memory.pool.HookedUpstream.Call;
import io.ferrum.memory.pool.HookedUpstream.Pause;

/**
 * Races found by attacking the engine after its split into rooms: work a peer manager does on a
 * block of another manager through an alias (the second handle of a cross-device mapping), and
 * auto-GC at the threshold.
 */
class AttackRacesTest extends RaceHarness {
    static final Device CPU1 = Device.cpu(1);
    static final Device CPU2 = Device.cpu(2);

    /** Two managers of cpu:1 (the owner of mappings' memory) and cpu:2 (the peer), each over its own upstream. */
    private PooledMemoryManager[] owners(HookedUpstream up1, ZeroingPolicy z1, HookedUpstream up2, ZeroingPolicy z2) {
        Map<Device, PooledMemoryManager> running = new ConcurrentHashMap<>();
        PooledMemoryManager a = manager(up1, config(pool(MiB, MiB, 256)),
                PoolSettings.defaults().withZeroing(z1).withPeers(running::get), null);
        PooledMemoryManager b = manager(up2, config(pool(MiB, MiB, 256)),
                PoolSettings.defaults().withZeroing(z2).withPeers(running::get), null);
        running.put(CPU1, a);
        running.put(CPU2, b);
        return new PooledMemoryManager[] {a, b};
    }

    /**
     * The peer copies through its alias of the owner's block (paused inside the copy, the block
     * pinned); the owner closes meanwhile without waiting (its thread interrupted), so the release
     * of its chunks is left to the last work on them: the peer's copy. That release must go to the
     * owner's upstream and end the owner's close, not the peer's.
     */
    @Test
    void aPeersCopyOnAnAliasEndsTheOwnersDeferredCloseNotThePeers() throws Exception {
        HookedUpstream up1 = new HookedUpstream(CPU1, 64 * MiB);
        HookedUpstream up2 = new HookedUpstream(CPU2, 64 * MiB);
        PooledMemoryManager[] m = owners(up1, ZeroingPolicy.NONE, up2, ZeroingPolicy.NONE);
        PooledMemoryManager a = m[0];
        PooledMemoryManager b = m[1];
        b.allocate(4 * KiB, CPU2); // the peer holds memory of its own
        long peerReserved = b.memoryInfo().reservedBytes();
        MemoryMapping mapping = a.createMapping(CPU1, CPU2, 4 * KiB);
        MemoryHandle alias = mapping.target();

        // Paused in whichever upstream the copy goes through (the owner's is the right one).
        Pause copy1 = up1.pauseNext(Call.COPY);
        Pause copy2 = up2.pauseNext(Call.COPY);
        CompletableFuture<Void> copying = start("peer-copy", () -> {
            b.copy(alias, alias, KiB, 0, 2 * KiB);
            return null;
        });
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!copy1.arrived() && !copy2.arrived()) {
            assertTrue(System.nanoTime() < deadline, "the peer's copy never reached an upstream");
            Thread.onSpinWait();
        }
        CompletableFuture<Void> closing = start("owner-close", () -> {
            Thread.currentThread().interrupt(); // the close does not wait for the copy
            a.close();
            return null;
        });
        closing.get(30, TimeUnit.SECONDS);
        copy1.release();
        copy2.release();
        copying.get(30, TimeUnit.SECONDS);

        assertEquals("", up2.violations.toString(), "the peer's upstream was not handed the owner's chunks");
        assertFalse(up2.closed, "the peer is open: its upstream must not be closed");
        assertEquals(peerReserved, b.quickInfo().reservedBytes(), "the peer's reserved bytes");
        assertEquals(peerReserved, b.memoryInfo().reservedBytes(), "the peer's reserved bytes (full figures)");
        assertEquals(0, up1.liveBytes(), "every chunk of the owner went back to the owner's upstream");
        assertTrue(up1.closed, "the owner's close ended: its upstream is closed");
        assertEquals("", up1.violations.toString());
    }

    /**
     * Zeroing on free is the owner's policy: a block of an owner that clears freed memory, freed
     * while the peer's copy through the alias pinned it, is cleared before anyone else gets it,
     * even though the peer itself does not clear freed memory.
     */
    @Test
    void aBlockFreedUnderAPeersCopyIsClearedByTheOwnersPolicy() throws Exception {
        HookedUpstream up1 = new HookedUpstream(CPU1, 64 * MiB);
        HookedUpstream up2 = new HookedUpstream(CPU2, 64 * MiB);
        PooledMemoryManager[] m = owners(up1, ZeroingPolicy.ON_FREE, up2, ZeroingPolicy.NONE);
        PooledMemoryManager a = m[0];
        PooledMemoryManager b = m[1];
        MemoryMapping mapping = a.createMapping(CPU1, CPU2, 4 * KiB);
        fill(a, mapping.source(), (byte) 0x5A); // the first owner's secret

        // Paused in whichever upstream the copy goes through (the owner's is the right one).
        Pause copy1 = up1.pauseNext(Call.COPY);
        Pause copy2 = up2.pauseNext(Call.COPY);
        // An async copy on the default stream (run on the calling thread) pins under the lock, so
        // frees during it succeed and leave the release to its unpin (a synchronous copy would refuse them).
        CompletableFuture<Void> copying = start("peer-copy", () -> {
            b.copyAsync(new io.ferrum.memory.api.MemoryTransfer(mapping.target(), mapping.target(), KiB, 0, 2 * KiB), null)
                    .toCompletableFuture().get(30, TimeUnit.SECONDS);
            return null;
        });
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!copy1.arrived() && !copy2.arrived()) {
            assertTrue(System.nanoTime() < deadline, "the peer's copy never reached an upstream");
            Thread.onSpinWait();
        }
        b.deallocate(mapping.target());
        a.deallocate(mapping.source()); // the last name: freed while pinned
        copy1.release();
        copy2.release();
        copying.get(30, TimeUnit.SECONDS);

        MemoryMapping next = a.createMapping(CPU1, CPU1, 4 * KiB); // the same block, for a new owner
        assertNull(firstOtherThan(a, next.source(), (byte) 0), "a new owner finds only zeros");
    }

    /**
     * Auto-GC's line follows configurePool: a pool that crossed its old line, stayed above it, and
     * then had its maxSize raised (its use now below the new line) runs auto-GC when an allocation
     * crosses the new line, with no free in between to re-arm it.
     */
    @Test
    void raisingMaxSizeArmsAutoGcForTheNewLine() {
        MemoryPoolConfig eight = MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB)
                .maxSize(8 * MiB).alignment(256).preAllocate(false).build();
        MemoryManagerConfig cfg = MemoryManagerConfig.defaults().withAutoGc(true, 0.5)
                .withPoolConfig(MemoryType.GENERAL, eight);
        PooledMemoryManager m = manager(new HookedUpstream(64 * MiB), cfg, PoolSettings.defaults().withThreadCache(0),
                null);
        m.allocate(5 * MiB, CPU); // above the line of 4 MiB: auto-GC ran, disarmed
        MemoryHandle y = m.allocate(MiB, CPU);
        m.deallocate(y); // 5 MiB, still above the line: not re-armed; y's chunk stays empty
        assertEquals(6 * MiB, m.memoryInfo().reservedBytes());
        m.configurePool(CPU, MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB)
                .maxSize(16 * MiB).alignment(256).preAllocate(false).build()); // the line: 8 MiB, 5 MiB below it
        m.allocate(4 * MiB, CPU); // 9 MiB: crosses the new line
        assertEquals(9 * MiB, m.memoryInfo().reservedBytes(), "the crossing of the new line gave y's empty chunk back");
    }

    /**
     * Auto-GC run by an allocation compacts the pool while a copy (paused inside the upstream)
     * pins one block and a live view maps another: neither moves, the copy lands in its block, the
     * view's writes reach its handle, and a block that may move keeps its bytes.
     */
    @Test
    void autoGcOnAllocationMovesNeitherAPinnedNorAMappedBlock() throws Exception {
        MemoryManagerConfig cfg = MemoryManagerConfig.defaults().withAutoGc(true, 0.5)
                .withPoolConfig(MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB)
                        .maxSize(8 * MiB).alignment(256).preAllocate(false).build());
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, cfg, PoolSettings.defaults().withThreadCache(0), null);
        long size = 128 * KiB;
        MemoryHandle[] p = new MemoryHandle[6];
        for (int i = 0; i < p.length; i++) {
            p[i] = m.allocate(size, CPU);
        }
        MemorySegment w = m.mapMemory(p[1], MemoryAccess.WRITE_ONLY);
        w.asSlice(0, size / 2).fill((byte) 0x11);
        w.asSlice(size / 2, size / 2).fill((byte) 0x22);
        m.unmapMemory(p[1]);
        fill(m, p[5], (byte) 0x55);
        m.deallocate(p[0]);
        m.deallocate(p[2]);
        m.deallocate(p[4]); // holes before the pinned, the mapped and the movable block
        MemorySegment view = m.mapMemory(p[3], MemoryAccess.READ_WRITE);

        Pause copy = up.pauseNext(Call.COPY);
        CompletableFuture<Void> copying = start("copy", () -> {
            m.copy(p[1], p[1], size / 2, 0, size / 2); // p[1] becomes all 0x11
            return null;
        });
        copy.awaitArrival();
        m.allocate(4 * MiB, CPU); // 4.375 MiB used: crosses the line of 4 MiB, compacts
        copy.release();
        copying.get(30, TimeUnit.SECONDS);
        view.fill((byte) 0x77);
        m.unmapMemory(p[3]);

        assertNull(firstOtherThan(m, p[1], (byte) 0x11), "the copy landed in the pinned block");
        assertNull(firstOtherThan(m, p[3], (byte) 0x77), "the view's writes reached its handle");
        assertNull(firstOtherThan(m, p[5], (byte) 0x55), "the movable block kept its bytes");
        // Free in the first chunk: the two holes around the pinned block and 384 KiB after p[5], which
        // slid into p[4]'s hole (without the slide the largest would be 256 KiB: 0.6).
        assertEquals(0.4, m.memoryInfo().fragmentationRatio(), 1e-9, "the movable block slid down");
        assertEquals("", up.violations.toString());
    }

    /**
     * A pressure callback that frees memory when told HIGH (the use a callback is for) changes the
     * level again while it is being told: observers hear the changes in the order they happened,
     * each from the level the last one left, and the last they hear is the level now.
     */
    @Test
    void aCallbackThatFreesOnHighLeavesObserversAtTheLevelNow() {
        PooledMemoryManager m = manager(new HookedUpstream(10 * MiB), config(pool(MiB, MiB, 256)),
                PoolSettings.defaults().withThreadCache(0), null);
        MemoryHandle ballast = m.allocate(6 * MiB, CPU); // 60 %: LOW
        List<String> heard = new CopyOnWriteArrayList<>();
        m.addPressureObserver(new MemoryObserver() {
            @Override
            public void pressureChanged(Device device, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
                heard.add(previous + "->" + current);
            }
        });
        AtomicBoolean freed = new AtomicBoolean();
        m.setPressureCallback(level -> {
            if (level == MemoryPressure.HIGH && freed.compareAndSet(false, true)) {
                m.deallocate(ballast); // back to 30 %: LOW
            }
        });
        m.allocate(3 * MiB, CPU); // 90 %: HIGH, and the callback frees
        assertEquals(List.of("LOW->HIGH", "HIGH->LOW"), heard, "in order, each from the level the last one left");
    }

    /**
     * After the owner of a mapping's memory closes, the peer's alias answers "unavailable" for the
     * owner's device, which is the one that went, not for the peer, which still runs.
     */
    @Test
    void anAliasWhoseOwnerClosedNamesTheOwnerAsUnavailable() {
        HookedUpstream up1 = new HookedUpstream(CPU1, 64 * MiB);
        HookedUpstream up2 = new HookedUpstream(CPU2, 64 * MiB);
        PooledMemoryManager[] m = owners(up1, ZeroingPolicy.NONE, up2, ZeroingPolicy.NONE);
        MemoryMapping mapping = m[0].createMapping(CPU1, CPU2, 4 * KiB);
        m[0].close();
        for (Executable call : List.<Executable>of(() -> m[1].mapMemory(mapping.target(), MemoryAccess.READ_ONLY),
                () -> m[1].copy(mapping.target(), mapping.target(), 1, 0, 1))) {
            DeviceUnavailableException e = assertThrows(DeviceUnavailableException.class, call);
            assertEquals(CPU1, e.device(), e.getMessage());
            assertTrue(e.getMessage().startsWith("The memory manager of " + CPU1 + " is closed"), e.getMessage());
        }
        assertFalse(m[1].isClosed());
        m[1].allocate(KiB, CPU2); // the peer runs on
    }

    /**
     * Under zeroing on free, auto-GC run by an allocation empties the emptiest chunk into a fuller
     * one: the bytes the moved block leaves behind are cleared, so whoever gets that chunk's memory
     * next finds zeros (chunks come dirty, as malloc may give them).
     */
    @Test
    void autoGcEvacuationUnderZeroingOnFreeLeavesNoBytesBehind() {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        up.dirt = (byte) 0xEE;
        MemoryManagerConfig cfg = MemoryManagerConfig.defaults().withAutoGc(true, 0.5)
                .withPoolConfig(MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(MiB)
                        .growthIncrement(4 * MiB).maxSize(16 * MiB).alignment(256).preAllocate(false).build());
        PooledMemoryManager m = manager(up, cfg, PoolSettings.defaults().withZeroing(ZeroingPolicy.ON_FREE), null);
        m.allocate(512 * KiB, CPU); // chunk A, 1 MiB
        MemoryHandle a2 = m.allocate(512 * KiB, CPU); // A is full
        MemoryHandle secret = m.allocate(256 * KiB, CPU); // chunk B, 4 MiB, at its start
        fill(m, secret, (byte) 0x5A);
        m.deallocate(a2); // A: 512 KiB free
        m.allocate(7 * MiB + 512 * KiB, CPU); // 8.25 MiB used: crosses the line of 8 MiB; B empties into A
        // Free: 256 KiB in A, all 4 MiB of B (without the move: 512 KiB and 3.75 MiB).
        long reserved = m.memoryInfo().reservedBytes();
        MemoryHandle next = m.allocate(4 * MiB, CPU); // all of B
        assertEquals(reserved, m.memoryInfo().reservedBytes(), "the secret moved out of B: all of B was free");
        assertNull(firstOtherThan(m, next, (byte) 0), "B's next owner finds only zeros");
        assertNull(firstOtherThan(m, secret, (byte) 0x5A), "the moved block kept its bytes");
    }

    /** An upstream whose next copy fails once armed, as a device that reports an error would; else {@code real}. */
    static final class FailingCopies extends ForwardingUpstream {
        volatile boolean failNextCopy;

        FailingCopies(HookedUpstream real) {
            super(real);
        }

        @Override
        public void copy(DeviceChunk src, long srcOffset, DeviceChunk dst, long dstOffset, long bytes) {
            if (failNextCopy) {
                failNextCopy = false;
                throw new IllegalStateException("test: the device reports a copy error");
            }
            real.copy(src, srcOffset, dst, dstOffset, bytes);
        }
    }

    /**
     * The allocation that crosses the line is done before auto-GC runs: a compaction whose copy the
     * device fails costs the caller nothing (the handle comes back, nothing leaks), the failure is
     * logged, and the pool stays whole (the hole the block would have slid into is still free).
     */
    @Test
    void anAutoGcWhoseCopyFailsStillReturnsTheAllocationAndLosesNoMemory() {
        HookedUpstream real = new HookedUpstream(64 * MiB);
        FailingCopies up = new FailingCopies(real);
        List<String> warnings = new CopyOnWriteArrayList<>();
        PoolLog log = new PoolLog() {
            @Override
            public void warn(String message, Throwable cause) {
                warnings.add(message);
            }

            @Override
            public void info(String message) {
            }
        };
        MemoryManagerConfig cfg = MemoryManagerConfig.defaults().withAutoGc(true, 0.5)
                .withPoolConfig(MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB)
                        .maxSize(8 * MiB).alignment(256).preAllocate(false).build());
        PooledMemoryManager m = manager(up, cfg, PoolSettings.defaults().withThreadCache(0).withLog(log), null);
        MemoryHandle[] p = new MemoryHandle[4];
        for (int i = 0; i < p.length; i++) {
            p[i] = m.allocate(256 * KiB, CPU);
        }
        fill(m, p[1], (byte) 0x11);
        m.deallocate(p[0]); // p[1] would slide into this hole
        up.failNextCopy = true;
        MemoryHandle big = m.allocate(4 * MiB - 256 * KiB, CPU); // 4.5 MiB used: crosses the line
        assertTrue(m.owns(big), "the allocation came back");
        assertEquals(3 * 256 * KiB + 4 * MiB - 256 * KiB, m.memoryInfo().usedBytes(), "nothing else is in use");
        assertEquals(1, warnings.size(), warnings.toString());
        assertNull(firstOtherThan(m, p[1], (byte) 0x11), "the block that did not move kept its bytes");
        MemoryHandle again = m.allocate(256 * KiB, CPU); // into p[0]'s old hole, still listed
        assertEquals(MiB + 4 * MiB - 256 * KiB, m.memoryInfo().reservedBytes(), "the hole served it: no growth");
        m.deallocate(again);
        m.defragment(CPU).toCompletableFuture().join(); // the device copies again: the pool is whole
        assertNull(firstOtherThan(m, p[1], (byte) 0x11));
    }

    /**
     * The same when the failed copy is the evacuation of the emptiest chunk into a fuller one: the
     * destination carved for the block is free again, and the emptiest chunk's free space, taken off
     * the lists while the evacuation ran, is listed again.
     */
    @Test
    void anAutoGcWhoseEvacuationCopyFailsKeepsEveryFreeBlockListed() {
        FailingCopies up = new FailingCopies(new HookedUpstream(64 * MiB));
        MemoryManagerConfig cfg = MemoryManagerConfig.defaults().withAutoGc(true, 0.5)
                .withPoolConfig(MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(MiB)
                        .growthIncrement(4 * MiB).maxSize(16 * MiB).alignment(256).preAllocate(false).build());
        PooledMemoryManager m = manager(up, cfg, PoolSettings.defaults().withThreadCache(0), null);
        m.allocate(512 * KiB, CPU); // chunk A, 1 MiB
        MemoryHandle a2 = m.allocate(512 * KiB, CPU);
        MemoryHandle s = m.allocate(256 * KiB, CPU); // chunk B, 4 MiB
        fill(m, s, (byte) 0x5A);
        m.deallocate(a2);
        up.failNextCopy = true; // nothing slides: the first copy is s's evacuation into A
        MemoryHandle big = m.allocate(7 * MiB + 512 * KiB, CPU); // crosses the line of 8 MiB
        assertTrue(m.owns(big));
        assertEquals(MiB / 2 + MiB / 4 + 7 * MiB + MiB / 2, m.memoryInfo().usedBytes(), "no destination left in use");
        assertEquals(m.memoryInfo().usedBytes(), m.quickInfo().usedBytes(), "nor in the cheap figures");
        assertNull(firstOtherThan(m, s, (byte) 0x5A));
        m.allocate(512 * KiB, CPU); // A's hole
        m.allocate(3 * MiB + 3 * MiB / 4, CPU); // B's free tail
        assertEquals(MiB + 4 * MiB + 7 * MiB + MiB / 2, m.memoryInfo().reservedBytes(), "both served without growth");
    }

    /**
     * The cheap figures' reserved bytes are the pools' chunks, as the full figures': a chunk being
     * reserved right now (the upstream call paused), which the upstream may still refuse, is not
     * reserved yet.
     */
    @Test
    void quickInfoDoesNotCountAChunkStillBeingReserved() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults().withThreadCache(0),
                null);
        m.allocate(KiB, CPU);
        assertEquals(MiB, m.quickInfo().reservedBytes());
        Pause reserve = up.pauseNext(Call.RESERVE);
        CompletableFuture<MemoryHandle> growing = start("grow", () -> m.allocate(4 * MiB, CPU));
        reserve.awaitArrival();
        assertEquals(m.memoryInfo().reservedBytes(), m.quickInfo().reservedBytes(), "reserved while the chunk is asked for");
        assertEquals(MiB, m.quickInfo().reservedBytes());
        reserve.release();
        growing.get(30, TimeUnit.SECONDS);
        assertEquals(5 * MiB, m.quickInfo().reservedBytes());
        assertEquals(m.memoryInfo().reservedBytes(), m.quickInfo().reservedBytes());
    }

    /**
     * The same for the reason an allocation is refused: "the device's pools already hold X" counted
     * a chunk still being asked for (which the upstream may yet refuse) as held, where memoryInfo
     * reports what the pools hold. Forced: another thread's growth paused inside the reserve.
     */
    @Test
    void aDeviceFullRefusalSaysWhatThePoolsHoldNotWhatIsBeingAskedFor() throws Exception {
        HookedUpstream up = new HookedUpstream(8 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults().withThreadCache(0),
                null);
        Pause reserve = up.pauseNext(Call.RESERVE);
        CompletableFuture<MemoryHandle> growing = start("grow", () -> m.allocate(4 * MiB, CPU));
        try {
            reserve.awaitArrival();
            OutOfDeviceMemoryException e = assertThrows(OutOfDeviceMemoryException.class,
                    () -> m.allocate(5 * MiB, MemoryType.TENSOR, CPU));
            assertEquals(0, m.memoryInfo().reservedBytes());
            assertTrue(e.getMessage().contains("the device's pools already hold 0 B of its 8.0 MiB capacity"
                    + " (4.0 MiB more being reserved)"), e.getMessage());
        } finally {
            reserve.release();
        }
        growing.get(30, TimeUnit.SECONDS);
    }

    /**
     * A defragmentation's memoryFreed is what it gave back. It was the drop of the device's reserved
     * bytes from its start to its end, so a pool another thread grew meanwhile took its growth off:
     * TENSOR's chunk B (4 MiB) went back, GENERAL grew by 2 MiB, and the stats said 2 MiB freed.
     * Forced: the compaction's first copy (TENSOR's slide) paused while GENERAL grows.
     */
    @Test
    void aDefragmentationSaysWhatItGaveBackWhateverAnotherPoolDidMeanwhile() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, 4 * MiB, 256)), PoolSettings.defaults().withThreadCache(0),
                null);
        MemoryHandle a1 = m.allocate(MiB / 4, MemoryType.TENSOR, CPU); // chunk A, 1 MiB, four quarters
        for (int i = 0; i < 3; i++) {
            m.allocate(MiB / 4, MemoryType.TENSOR, CPU);
        }
        MemoryHandle b1 = m.allocate(MiB / 4, MemoryType.TENSOR, CPU); // A is full: chunk B, 4 MiB
        m.allocate(MiB / 4, MemoryType.TENSOR, CPU);
        m.deallocate(a1);
        m.deallocate(b1); // compaction slides A's and B's blocks down, then empties B into A
        Pause copy = up.pauseNext(Call.COPY);
        CompletableFuture<DefragmentationStats> defrag = start("defragment",
                () -> m.defragment(CPU).toCompletableFuture().get());
        try {
            copy.awaitArrival();
            m.allocate(2 * MiB, CPU); // GENERAL grows meanwhile: a chunk of its own, 2 MiB
        } finally {
            copy.release();
        }
        DefragmentationStats stats = defrag.get(30, TimeUnit.SECONDS);
        assertEquals(MiB + 2 * MiB, m.memoryInfo().reservedBytes(), "B went back");
        assertEquals(4 * MiB, stats.memoryFreed(), "the bytes this defragmentation gave back");
    }

    /**
     * An observer told MEDIUM allocates (on the allocating thread, inside the tell), and its
     * allocation crosses the auto-GC line: auto-GC runs inside the observer without a deadlock,
     * and the change that allocation makes is told after the one the observer heard.
     */
    @Test
    void anObserverWhoseAllocationCrossesTheLineRunsAutoGcInsideTheTell() {
        MemoryManagerConfig cfg = MemoryManagerConfig.defaults().withAutoGc(true, 0.75)
                .withPoolConfig(MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB)
                        .alignment(256).preAllocate(false).build()); // the line: 7.5 of 10 MiB
        PooledMemoryManager m = manager(new HookedUpstream(10 * MiB), cfg, PoolSettings.defaults().withThreadCache(0),
                null);
        m.deallocate(m.allocate(MiB, CPU)); // an empty chunk of 1 MiB for auto-GC to give back
        m.allocate(3 * MiB, CPU);
        List<String> heard = new CopyOnWriteArrayList<>();
        List<MemoryHandle> fromObserver = new CopyOnWriteArrayList<>();
        m.addPressureObserver(new MemoryObserver() {
            @Override
            public void pressureChanged(Device device, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
                heard.add(previous + "->" + current);
                if (current == MemoryPressure.MEDIUM && fromObserver.isEmpty()) {
                    fromObserver.add(m.allocate(2 * MiB, CPU)); // 9 MiB: crosses 7.5 MiB
                }
            }
        });
        m.allocate(4 * MiB, CPU); // 7 MiB: MEDIUM, below the line
        assertEquals(1, fromObserver.size());
        assertTrue(m.owns(fromObserver.get(0)));
        assertEquals(9 * MiB, m.memoryInfo().usedBytes());
        assertEquals(9 * MiB, m.memoryInfo().reservedBytes(), "auto-GC gave the empty chunk back");
        assertEquals(List.of("LOW->MEDIUM", "MEDIUM->HIGH"), heard);
    }
}
