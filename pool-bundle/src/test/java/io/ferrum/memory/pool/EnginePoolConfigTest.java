package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.OutOfDeviceMemoryException;

/**
 * A pool's configuration at work: growth by the increment or by the request, a chunk of its own
 * for a large request, pre-allocation, a fixed pool, {@code maxSize} and the device capacity as hard
 * limits (also under concurrent allocation), and reconfiguration of a live pool.
 */
class EnginePoolConfigTest extends EngineTestSupport {
    @Test
    void poolGrowsByTheIncrementOrByTheRequestIfLarger() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, 2 * MiB));
        m.allocate(MiB, CPU);
        assertEquals(MiB, m.memoryInfo().reservedBytes());
        m.allocate(KiB, CPU);
        assertEquals(3 * MiB, m.memoryInfo().reservedBytes(), "grew by growthIncrement");
        m.allocate(5 * MiB, CPU);
        assertEquals(8 * MiB, m.memoryInfo().reservedBytes(), "grew by the request, which was larger");
        assertEquals(3, up.reserves.get());
    }

    @Test
    void aRequestOfAQuarterOfTheGrowthIncrementOrMoreGetsAChunkOfItsOwnSize() {
        ArenaUpstream up = new ArenaUpstream(256 * MiB);
        PooledMemoryManager m = manager(up, pool(4 * MiB, 16 * MiB));
        m.allocate(MiB, CPU);
        assertEquals(4 * MiB, m.memoryInfo().reservedBytes(), "the first chunk is the initial size");
        m.allocate(5 * MiB, CPU);
        assertEquals(9 * MiB, m.memoryInfo().reservedBytes(), "5 MiB >= 16 MiB / 4: a 5 MiB chunk");
        m.allocate(4 * MiB, CPU);
        assertEquals(13 * MiB, m.memoryInfo().reservedBytes(), "4 MiB, exactly a quarter, does not fit the 3 MiB left: its own chunk");
        m.allocate(3 * MiB, CPU);
        assertEquals(13 * MiB, m.memoryInfo().reservedBytes(), "3 MiB fits the first chunk's rest");
        m.allocate(MiB, CPU);
        assertEquals(29 * MiB, m.memoryInfo().reservedBytes(), "1 MiB < 16 MiB / 4 finds no room: a growth increment");
        m.allocate(15 * MiB, CPU);
        assertEquals(29 * MiB, m.memoryInfo().reservedBytes(), "15 MiB fits the rest of that increment");
    }

    /**
     * A maxSize set below what the pool holds gives back the empty chunks: reserved stood above the
     * limit just set (64 MiB under a maxSize of 1 MiB in a shell session) until a trim or defragment.
     */
    @Test
    void aMaxSizeBelowWhatThePoolHoldsGivesBackItsEmptyChunks() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, 4 * MiB));
        MemoryHandle kept = m.allocate(768 * KiB, CPU);
        MemoryHandle big = m.allocate(512 * KiB, CPU); // does not fit the first chunk's rest: a 4 MiB increment
        assertEquals(5 * MiB, m.memoryInfo().reservedBytes(), "the first chunk and one growth increment");
        m.deallocate(big);
        m.configurePool(CPU, MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB)
                .maxSize(2 * MiB).alignment(256).build());
        assertEquals(MiB, m.memoryInfo().reservedBytes(), "the empty increment went back; the chunk with a live block stayed");
        assertEquals(MiB, up.liveBytes());
        m.deallocate(kept);
        // A maxSize the pool is within changes nothing.
        m.configurePool(CPU, MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB)
                .maxSize(8 * MiB).alignment(256).build());
        assertEquals(MiB, m.memoryInfo().reservedBytes());
    }

    @Test
    void preAllocateReservesTheInitialSizeAtOnce() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        MemoryPoolConfig cfg = pool(4 * MiB, MiB).toBuilder().preAllocate(true).build();
        PooledMemoryManager m = manager(up, cfg);
        assertEquals(4 * MiB, m.memoryInfo().reservedBytes());
        assertEquals(0, m.memoryInfo().usedBytes());
        assertEquals(0, m.trim(), "a pre-allocated pool keeps its initial size on trim");
    }

    /**
     * A pre-allocation the device cannot hold refuses the change, and a refused change leaves the pool
     * as it was. The pool took the new configuration before it pre-allocated, and kept it when that
     * failed: the shell printed the error, and mem:pool showed the refused initialSize and preAllocate.
     */
    @Test
    void aPreAllocationTheDeviceCannotHoldLeavesThePoolAsItWas() {
        ArenaUpstream up = new ArenaUpstream(16 * MiB);
        PooledMemoryManager m = manager(up, pool(4 * MiB, 4 * MiB));
        MemoryHandle h = m.allocate(MiB, CPU); // GENERAL reserves its first 4 MiB
        MemoryPoolConfig before = m.poolConfig(MemoryType.TENSOR);
        MemoryPoolConfig asked = pool(16 * MiB, 4 * MiB).toBuilder().preAllocate(true).build();
        OutOfDeviceMemoryException e = assertRejected(m, OutOfDeviceMemoryException.class,
                () -> m.configurePool(CPU, MemoryType.TENSOR, asked));
        assertTrue(e.getMessage().contains("pre-allocate"), e.getMessage());
        assertEquals(before, m.poolConfig(MemoryType.TENSOR), "the refused configuration stayed on the pool");
        assertEquals(4 * MiB, up.liveBytes());
        m.deallocate(h);
    }

    /**
     * A pre-allocation that its own limit cannot hold (the device reserves whole 4 KiB chunks, and a
     * fixed pool of 1,000,000 bytes may hold no chunk that covers it) is refused at start. A live
     * edit reserved the chunk, found it above the new limit, gave it back and applied: the pool took
     * a configuration that pre-allocates with nothing pre-allocated, and could not grow at all.
     */
    @Test
    void aPreAllocationItsOwnLimitCannotHoldIsRefusedAsAtStart() {
        ArenaUpstream up = new ArenaUpstream(16 * MiB);
        MemoryPoolConfig fixed = pool(1_000_000, MiB).toBuilder().autoExpansion(false).preAllocate(true).build();
        OutOfDeviceMemoryException atStart = assertThrows(OutOfDeviceMemoryException.class,
                () -> manager(up, fixed));
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryPoolConfig before = m.poolConfig(MemoryType.GENERAL);
        OutOfDeviceMemoryException e = assertRejected(m, OutOfDeviceMemoryException.class,
                () -> m.configurePool(CPU, MemoryType.GENERAL, fixed));
        assertEquals(atStart.getMessage(), e.getMessage());
        assertEquals(before, m.poolConfig(MemoryType.GENERAL));
        assertEquals(0, up.liveBytes());
    }

    /**
     * An alignment above the device's capacity was taken (the shell attack: {@code mem:pool cpu:0
     * alignment=1t}): every block then rounded up past the device, and each allocation was refused
     * with figures saying the device was free. It is refused as an initial size above the capacity
     * is, and nothing changes.
     */
    @Test
    void anAlignmentAboveTheDevicesCapacityIsRefusedAndChangesNothing() {
        ArenaUpstream up = new ArenaUpstream(16 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryPoolConfig before = m.poolConfig(MemoryType.GENERAL);
        InvalidMemoryRequestException e = assertRejected(m, InvalidMemoryRequestException.class,
                () -> m.configurePool(CPU, MemoryType.GENERAL, before.toBuilder().alignment(32 * MiB).build()));
        assertEquals("Cannot set alignment of the GENERAL pool on cpu:0 to 33554432 bytes (32.0 MiB): the device has"
                + " 16777216 bytes (16.0 MiB)", e.getMessage());
        assertEquals(before, m.poolConfig(MemoryType.GENERAL));
        MemoryHandle h = m.allocate(4096, CPU);
        assertTrue(m.owns(h), "the pool still serves");
        m.deallocate(h);
    }

    /**
     * configurePools is all or none: a later pool whose pre-allocation the device cannot hold puts
     * back the pools already changed, and what they pre-allocated for the refused configuration goes
     * back too. Only their configurations went back: GENERAL kept the 8 MiB it reserved for the
     * refused edit, which the device then held for nothing.
     */
    @Test
    void aRefusedConfigurePoolsGivesBackWhatAnEarlierPoolPreAllocated() {
        ArenaUpstream up = new ArenaUpstream(16 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryPoolConfig generalBefore = m.poolConfig(MemoryType.GENERAL);
        io.ferrum.memory.api.MemoryManagerConfig next = config(pool(8 * MiB, MiB).toBuilder().preAllocate(true).build())
                .withPoolConfig(MemoryType.TENSOR, pool(16 * MiB, MiB).toBuilder().preAllocate(true).build());
        assertRejected(m, OutOfDeviceMemoryException.class, () -> m.configurePools(next));
        assertEquals(generalBefore, m.poolConfig(MemoryType.GENERAL));
        assertEquals(0, up.liveBytes(), "the device holds nothing for the refused configuration");
    }

    /**
     * A refused configurePools changes nothing, the chunks an earlier pool's lower maxSize would give
     * back included: GENERAL gave back its empty 4 MiB increment for the new maxSize, TENSOR's
     * pre-allocation was then refused, and the rollback put back GENERAL's configuration but not the
     * chunk: the pool held 1 MiB instead of 5 and would grow again on its next allocation.
     */
    @Test
    void aRefusedConfigurePoolsKeepsTheChunksALowerMaxSizeWouldGiveBack() {
        ArenaUpstream up = new ArenaUpstream(16 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, 4 * MiB));
        MemoryHandle kept = m.allocate(768 * KiB, CPU);
        MemoryHandle big = m.allocate(512 * KiB, CPU); // does not fit the first chunk's rest: a 4 MiB increment
        m.deallocate(big);
        assertEquals(5 * MiB, up.liveBytes(), "the first chunk and an empty growth increment");
        int releasesBefore = up.releases.get();
        MemoryPoolConfig generalBefore = m.poolConfig(MemoryType.GENERAL);
        io.ferrum.memory.api.MemoryManagerConfig next = config(pool(MiB, MiB).toBuilder().maxSize(2 * MiB).build())
                .withPoolConfig(MemoryType.TENSOR, pool(16 * MiB, MiB).toBuilder().preAllocate(true).build());
        assertRejected(m, OutOfDeviceMemoryException.class, () -> m.configurePools(next));
        assertEquals(generalBefore, m.poolConfig(MemoryType.GENERAL));
        assertEquals(java.util.Map.of(MemoryType.GENERAL, 5 * MiB), m.reservedByType());
        assertEquals(5 * MiB, up.liveBytes(), "the device holds what it held before the refused edit");
        assertEquals(releasesBefore, up.releases.get(), "no chunk went back to the device");
        m.deallocate(kept);
    }

    /**
     * The rollback put a pool back by configuring it again with its old configuration, whose maxSize
     * then gave back every empty chunk of a pool that the refused edit had grown above it, those it
     * held before the edit too: GENERAL held 1 MiB instead of 5.
     */
    @Test
    void aRefusedConfigurePoolsGivesBackOnlyWhatItReserved() {
        ArenaUpstream up = new ArenaUpstream(16 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, 4 * MiB).toBuilder().maxSize(8 * MiB).build());
        MemoryHandle kept = m.allocate(768 * KiB, CPU);
        MemoryHandle big = m.allocate(512 * KiB, CPU); // a 4 MiB increment
        m.deallocate(big);
        assertEquals(5 * MiB, up.liveBytes(), "the first chunk and an empty growth increment");
        io.ferrum.memory.api.MemoryManagerConfig next = config(pool(10 * MiB, MiB).toBuilder().maxSize(10 * MiB)
                .preAllocate(true).build())
                .withPoolConfig(MemoryType.TENSOR, pool(8 * MiB, MiB).toBuilder().preAllocate(true).build());
        assertRejected(m, OutOfDeviceMemoryException.class, () -> m.configurePools(next));
        assertEquals(java.util.Map.of(MemoryType.GENERAL, 5 * MiB), m.reservedByType());
        assertEquals(5 * MiB, up.liveBytes(), "the device holds what it held before the refused edit");
        m.deallocate(kept);
    }

    /**
     * configurePools decides the whole edit before it gives anything back, so an edit whose
     * pre-allocation needs the room that another pool's lower maxSize would free is refused, and
     * changes nothing; the same change as two edits (the maxSize first) applies.
     */
    @Test
    void anEditThatNeedsTheRoomALowerMaxSizeWouldFreeIsRefusedAndWorksAsTwo() {
        ArenaUpstream up = new ArenaUpstream(16 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, 12 * MiB));
        m.deallocate(m.allocate(12 * MiB, CPU)); // GENERAL holds an empty 12 MiB chunk
        assertEquals(12 * MiB, up.liveBytes());
        MemoryPoolConfig lower = pool(MiB, MiB).toBuilder().maxSize(2 * MiB).build();
        io.ferrum.memory.api.MemoryManagerConfig both = config(lower)
                .withPoolConfig(MemoryType.TENSOR, pool(8 * MiB, MiB).toBuilder().preAllocate(true).build());
        assertRejected(m, OutOfDeviceMemoryException.class, () -> m.configurePools(both));
        assertEquals(12 * MiB, up.liveBytes(), "nothing was given back for the refused edit");
        m.configurePools(config(lower));
        m.configurePools(both);
        assertEquals(java.util.Map.of(MemoryType.TENSOR, 8 * MiB), m.reservedByType());
    }

    /**
     * A start pre-allocates only the pools its configuration names (GENERAL here); the others
     * inherit GENERAL's values with preAllocate, so trim kept as much as GENERAL's initialSize of
     * each, memory they had grown into, not pre-allocated: a start and the same configuration
     * applied as an edit (which gives those pools preAllocate=false) trimmed differently.
     */
    @Test
    void aPoolThatOnlyInheritsAPreAllocationIsTrimmedLikeAnyOther() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(4 * MiB, 4 * MiB).toBuilder().preAllocate(true).build());
        assertEquals(4 * MiB, up.liveBytes(), "GENERAL pre-allocated its initialSize");
        MemoryHandle h = m.allocate(MiB, MemoryType.TENSOR, CPU);
        m.deallocate(h);
        m.trim();
        assertEquals(java.util.Map.of(MemoryType.GENERAL, 4 * MiB), m.reservedByType(),
                "TENSOR, which never pre-allocated, gives back its empty chunk; GENERAL keeps its pre-allocation");
        assertEquals(false, m.poolConfig(MemoryType.TENSOR).preAllocate(), "TENSOR does not pre-allocate");
    }

    /**
     * A fixed pool (enableAutoExpansion=false) may hold its initialSize and no more: made fixed below
     * the bytes of its live blocks, it was taken as a maxSize below them is not, and the pool then
     * held 4 MiB under a limit of 1 MiB (mem:pool showed a pool fuller than full). It is refused
     * as such a maxSize is, and nothing changes.
     */
    @Test
    void aFixedSizeBelowThePoolsLiveBlocksIsRefused() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryHandle h = m.allocate(3 * MiB, CPU);
        MemoryPoolConfig before = m.poolConfig(MemoryType.GENERAL);
        InvalidMemoryRequestException e = assertRejected(m, InvalidMemoryRequestException.class,
                () -> m.configurePool(CPU, MemoryType.GENERAL, pool(MiB, MiB).toBuilder().autoExpansion(false).build()));
        assertEquals("Cannot fix the GENERAL pool on cpu:0 at its initialSize of 1048576 bytes (1.0 MiB)"
                + " (enableAutoExpansion=false): its live blocks already use 3145728 bytes (3.0 MiB)", e.getMessage());
        assertEquals(before, m.poolConfig(MemoryType.GENERAL));
        m.deallocate(h);
        m.configurePool(CPU, MemoryType.GENERAL, pool(MiB, MiB).toBuilder().autoExpansion(false).build());
        assertEquals(false, m.poolConfig(MemoryType.GENERAL).enableAutoExpansion(), "fixed once its blocks fit");
        assertTrue(m.memoryInfo().reservedBytes() <= MiB, "the empty chunks above its fixed size went back, as for a maxSize");
    }

    @Test
    void fixedPoolFailsWhenFullAndStaysConsistent() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB).toBuilder().autoExpansion(false).growthIncrement(0).build());
        MemoryHandle a = m.allocate(MiB / 2, CPU);
        m.allocate(MiB / 2, CPU);
        OutOfDeviceMemoryException e = assertRejected(m, OutOfDeviceMemoryException.class, () -> m.allocate(256, CPU));
        assertEquals(256, e.requestedBytes());
        assertEquals(CPU, e.device());
        assertTrue(e.getMessage().contains("enableAutoExpansion=false"), e.getMessage());
        m.deallocate(a);
        m.allocate(256, CPU);
        assertEquals(MiB, m.memoryInfo().reservedBytes());
    }

    @Test
    void maxSizeIsAHardLimitUnderConcurrentAllocation() throws Exception {
        ArenaUpstream up = new ArenaUpstream(256 * MiB);
        MemoryPoolConfig cfg = pool(0, MiB).toBuilder().maxSize(8 * MiB).build();
        PooledMemoryManager m = manager(up, cfg);
        int threads = 4;
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> ts = new ArrayList<>();
        AtomicLong ok = new AtomicLong();
        AtomicLong oom = new AtomicLong();
        CopyOnWriteArrayList<Throwable> other = new CopyOnWriteArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread th = new Thread(() -> {
                try {
                    start.await();
                    for (int i = 0; i < 200; i++) {
                        try {
                            m.allocate(64 * KiB, CPU);
                            ok.incrementAndGet();
                        } catch (OutOfDeviceMemoryException e) {
                            oom.incrementAndGet();
                        }
                        assertTrue(m.memoryInfo().reservedBytes() <= 8 * MiB);
                    }
                } catch (Throwable e) {
                    other.add(e);
                }
            });
            th.start();
            ts.add(th);
        }
        start.countDown();
        for (Thread th : ts) {
            th.join();
        }
        assertEquals(List.of(), other);
        assertEquals(8 * MiB / (64 * KiB), ok.get(), "exactly the limit's worth of blocks fit");
        assertEquals(threads * 200 - ok.get(), oom.get());
        assertTrue(up.liveBytes() <= 8 * MiB, "the upstream never gave more than maxSize: " + up.liveBytes());
        assertEquals(8 * MiB, m.memoryInfo().usedBytes());
    }

    @Test
    void capacityBoundsEveryPoolTogether() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB)), PoolSettings.defaults().withCapacity(4 * MiB));
        assertEquals(4 * MiB, m.memoryInfo().totalBytes());
        m.allocate(2 * MiB, MemoryType.GENERAL, CPU);
        m.allocate(2 * MiB, MemoryType.CACHE, CPU);
        assertRejected(m, OutOfDeviceMemoryException.class, () -> m.allocate(MiB, MemoryType.TENSOR, CPU));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocate(5 * MiB, CPU));
    }

    @Test
    void badPoolConfigurationIsRejected() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        m.allocate(2 * MiB, CPU);
        MemoryPoolConfig before = m.poolConfig(MemoryType.GENERAL);
        assertRejected(m, InvalidMemoryRequestException.class,
                () -> m.configurePool(CPU, MemoryPoolConfig.builder().initialSize(0).maxSize(MiB).build()));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.configurePool(CPU, null));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.configurePool(Device.cpu(3), before));
        assertEquals(before, m.poolConfig(MemoryType.GENERAL));
        MemoryPoolConfig bigger = before.toBuilder().growthIncrement(4 * MiB).build();
        m.configurePool(CPU, bigger);
        assertEquals(bigger, m.poolConfig(MemoryType.GENERAL));
        long reserved = m.memoryInfo().reservedBytes();
        m.allocate(MiB / 2, CPU);
        assertEquals(reserved + 4 * MiB, m.memoryInfo().reservedBytes(), "new growth increment applies to future growth");
    }
}
