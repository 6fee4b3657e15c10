package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.OutOfDeviceMemoryException;

/**
 * Figures a person can trust (issue 17): fragmentation reads 0 on empty pools and on a pool just
 * compacted, whatever the number of pools and chunks; it counts only holes between live blocks of
 * one chunk; a defragmentation counts each block it moved once; and pools of several memory types
 * with small initial sizes reserve a few chunks, not an initial size each.
 */
class EngineFiguresTest extends EngineTestSupport {

    /** Without thread caches, so that a freed block is free space in its pool at once. */
    private PooledMemoryManager manager(long initial, long growth) {
        return manager(new ArenaUpstream(256 * MiB), config(pool(initial, growth)), PoolSettings.defaults().withThreadCache(0));
    }

    @Test
    void emptyPoolsOfSeveralTypesReadNoFragmentation() {
        PooledMemoryManager m = manager(MiB, MiB);
        for (MemoryType type : MemoryType.values()) {
            m.deallocate(m.allocate(4 * KiB, type, CPU));
        }
        MemoryInfo info = m.memoryInfo();
        assertEquals(MemoryType.values().length * MiB, info.reservedBytes(), "one empty chunk per type");
        // The old figure (1 - largest free block / all free bytes) read 1 - 1/7 = 86 % here.
        assertEquals(0.0, info.fragmentationRatio(), "empty chunks are free space, not fragmentation");
    }

    @Test
    void freeSpaceSplitByChunkBoundariesIsNoFragmentation() {
        PooledMemoryManager m = manager(MiB, MiB);
        for (int i = 0; i < 3; i++) {
            m.allocate(MiB / 2, CPU); // each chunk: a live block at its start, one free run after it
            m.allocate(MiB / 4 + KiB, CPU); // ...then a quarter, and the next one needs a new chunk
        }
        MemoryInfo info = m.memoryInfo();
        assertTrue(info.reservedBytes() > 2 * MiB, "several chunks: " + info.reservedBytes());
        assertEquals(0.0, info.fragmentationRatio());
    }

    @Test
    void holesBetweenLiveBlocksAreTheFragmentedShareOfFreeBytes() {
        PooledMemoryManager m = manager(MiB, MiB);
        MemoryHandle[] quarter = new MemoryHandle[4];
        for (int i = 0; i < quarter.length; i++) {
            quarter[i] = m.allocate(MiB / 4, CPU);
        }
        m.deallocate(quarter[0]);
        m.deallocate(quarter[2]); // free: two holes of 256 KiB; the largest counts as usable
        assertEquals(0.5, m.memoryInfo().fragmentationRatio(), 1e-12);
        m.allocate(MiB / 4, MemoryType.CACHE, CPU); // another pool: its chunk has one free run
        double cacheFree = MiB - MiB / 4;
        assertEquals(256 * KiB / (512 * KiB + cacheFree), m.memoryInfo().fragmentationRatio(), 1e-12,
                "fragmented bytes over the free bytes of every pool");
    }

    @Test
    void aFreshlyCompactedPoolReadsNoFragmentation() throws Exception {
        PooledMemoryManager m = manager(MiB, MiB);
        List<MemoryHandle> drop = new ArrayList<>();
        for (int i = 0; i < 48; i++) {
            MemoryHandle h = m.allocate(60 * KiB, i % 2 == 0 ? MemoryType.GENERAL : MemoryType.TENSOR, CPU);
            if (i % 3 != 0) {
                drop.add(h);
            }
        }
        drop.forEach(m::deallocate);
        assertTrue(m.memoryInfo().fragmentationRatio() > 0.3, "swiss cheese first: " + m.memoryInfo().fragmentationRatio());
        DefragmentationStats stats = m.defragment(CPU).toCompletableFuture().get();
        assertEquals(0.0, stats.fragmentationAfter(), "after compaction");
        assertEquals(0.0, m.memoryInfo().fragmentationRatio());
    }

    /**
     * Chunk A (1 MiB) holds four quarters, chunk B (4 MiB) two; the first block of each is freed.
     * Compaction slides a2, a3, a4 down in A and b2 down in B, then empties B into A's free quarter:
     * b2 moved twice but is one block, and four live blocks moved (it used to say five).
     */
    @Test
    void defragmentationCountsEachMovedBlockOnce() throws Exception {
        PooledMemoryManager m = manager(MiB, 4 * MiB);
        MemoryHandle a1 = m.allocate(MiB / 4, CPU);
        for (int i = 0; i < 3; i++) {
            m.allocate(MiB / 4, CPU);
        }
        MemoryHandle b1 = m.allocate(MiB / 4, CPU); // A is full: chunk B
        MemoryHandle b2 = m.allocate(MiB / 4, CPU);
        write(m, b2, (byte) 7);
        m.deallocate(a1);
        m.deallocate(b1);
        long live = m.memoryInfo().activeAllocations();
        DefragmentationStats stats = m.defragment(CPU).toCompletableFuture().get();
        assertEquals(4, live);
        assertEquals(4, stats.blocksMoved(), "every live block moved, each counted once");
        assertEquals(4 * MiB, stats.memoryFreed(), "B emptied into A and went back");
        assertEquals(MiB, m.memoryInfo().reservedBytes());
        assertContent(m, b2, (byte) 7);
    }

    /**
     * Nine blocks of one class; all but the fifth go to this thread's cache (a bin holds eight), the
     * fifth to the pool. The figures count cached blocks as free: with every block freed they read
     * no used byte, no allocation, and so no hole between live blocks either. Before that, the
     * fifth block alone is live, with free space (cached) on both sides of it.
     */
    @Test
    void blocksInAThreadCacheAreFreeSpaceInTheFragmentationToo() {
        PooledMemoryManager m = manager(new ArenaUpstream(256 * MiB), config(pool(MiB, MiB)), PoolSettings.defaults());
        MemoryHandle[] h = new MemoryHandle[9];
        for (int i = 0; i < h.length; i++) {
            h[i] = m.allocate(64 * KiB, CPU);
        }
        for (int i = 0; i < h.length; i++) {
            if (i != 4) {
                m.deallocate(h[i]);
            }
        }
        MemoryInfo one = m.memoryInfo();
        assertEquals(64 * KiB, one.usedBytes());
        assertEquals(1, one.activeAllocations());
        // Free: 4 x 64 KiB before the live block, 4 x 64 KiB and the chunk's untouched 7 x 64 KiB after it.
        assertEquals(4.0 / 15.0, one.fragmentationRatio(), 1e-12, "the cached blocks before the live one are a hole");
        m.deallocate(h[4]); // the bin is full: back to the pool, between cached blocks
        MemoryInfo none = m.memoryInfo();
        assertEquals(0, none.usedBytes());
        assertEquals(0, none.activeAllocations());
        assertEquals(0.0, none.fragmentationRatio(), "no live block, so no hole between live blocks");
        assertEquals(0.0, m.quickInfo().fragmentationRatio());
    }

    /**
     * Starts a thread that frees a 64 KiB block into its own cache, opens {@code cached}, and keeps
     * the block there (the thread alive) until {@code end} opens.
     */
    private static Thread keepACachedBlock(PooledMemoryManager m, CountDownLatch cached, CountDownLatch end) {
        Thread other = new Thread(() -> {
            m.deallocate(m.allocate(64 * KiB, CPU)); // stays in this thread's cache while it lives
            cached.countDown();
            try {
                end.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "keeps-a-cached-block");
        other.start();
        return other;
    }

    /**
     * A block another thread freed into its own cache is not live (activeAllocations leaves it out)
     * but compaction may still slide it: it moved, yet it is no live block relocated. Layout before:
     * x (freed, a hole) - y (in the other thread's cache) - z (live) - the rest free.
     */
    @Test
    void defragmentationCountsOnlyLiveBlocksAsMovedNotOnesInAThreadCache() throws Exception {
        PooledMemoryManager m = manager(new ArenaUpstream(256 * MiB), config(pool(MiB, MiB)), PoolSettings.defaults());
        MemoryHandle x = m.allocate(64 * KiB, CPU);
        CountDownLatch cached = new CountDownLatch(1);
        CountDownLatch end = new CountDownLatch(1);
        Thread other = keepACachedBlock(m, cached, end);
        try {
            assertTrue(cached.await(30, TimeUnit.SECONDS));
            MemoryHandle z = m.allocate(64 * KiB, CPU);
            write(m, z, (byte) 3);
            m.deallocate(x);
            m.trim(); // this thread's cache goes back: x is a hole in the pool
            assertEquals(1, m.memoryInfo().activeAllocations(), "z is the only live block");
            DefragmentationStats stats = m.defragment(CPU).toCompletableFuture().get();
            assertEquals(1, stats.blocksMoved(), "live blocks moved: z alone, not the other thread's cached block");
            assertContent(m, z, (byte) 3);
        } finally {
            end.countDown();
            other.join(TimeUnit.SECONDS.toMillis(30));
        }
    }

    /**
     * An out-of-memory refusal says how much was free when it failed. Blocks another live thread
     * keeps in its cache are free in every figure (the refusal asks that thread to give them back on
     * its next call), so the refusal must say what memoryInfo says at that moment: it counted them
     * as used, and read 64 KiB less free than the device's figures did; so did a refused pre-allocation.
     */
    @Test
    void anOutOfMemoryRefusalSaysAsMuchFreeAsTheFigures() throws Exception {
        PooledMemoryManager m = manager(new ArenaUpstream(8 * MiB), config(pool(MiB, MiB)), PoolSettings.defaults());
        CountDownLatch cached = new CountDownLatch(1);
        CountDownLatch end = new CountDownLatch(1);
        Thread other = keepACachedBlock(m, cached, end);
        try {
            assertTrue(cached.await(30, TimeUnit.SECONDS));
            MemoryHandle live = m.allocate(MiB, CPU);
            OutOfDeviceMemoryException e = assertThrows(OutOfDeviceMemoryException.class, () -> m.allocate(7 * MiB, CPU));
            MemoryInfo info = m.memoryInfo();
            assertEquals(MiB, info.usedBytes(), "the cached block is free in the figures");
            assertEquals(info.freeBytes(), e.freeBytes(), "free bytes of the refusal: " + e.getMessage());
            // A refused pre-allocation says the same (configurePool gives back only the caller's cache).
            OutOfDeviceMemoryException pre = assertThrows(OutOfDeviceMemoryException.class, () -> m.configurePool(CPU,
                    MemoryType.TENSOR, pool(7 * MiB, MiB).toBuilder().preAllocate(true).build()));
            assertEquals(m.memoryInfo().freeBytes(), pre.freeBytes(), "free bytes of the refused pre-allocation: " + pre.getMessage());
            m.deallocate(live);
        } finally {
            end.countDown();
            other.join(TimeUnit.SECONDS.toMillis(30));
        }
    }

    /** Nine small blocks of every memory type: with small first chunks, reserved stays a few chunks above used. */
    @Test
    void smallFirstChunksKeepReservedNearUsedAcrossMemoryTypes() {
        PooledMemoryManager m = manager(2 * MiB, 64 * MiB);
        MemoryType[] types = MemoryType.values();
        for (int i = 0; i < 9; i++) {
            m.allocate(64 * KiB, types[i % types.length], CPU);
        }
        MemoryInfo info = m.memoryInfo();
        assertEquals(types.length * 2 * MiB, info.reservedBytes(), "one first chunk per type in use");
        MemoryHandle big = m.allocate(512 * MiB / 8, CPU); // a quarter of the increment or more: a chunk of its own
        assertEquals(types.length * 2 * MiB + 64 * MiB, m.memoryInfo().reservedBytes());
        m.deallocate(big);
    }
}
