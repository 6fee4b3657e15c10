package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.MemoryUsageHint;
import io.ferrum.memory.pool.DeviceChunk;

/**
 * One pool on its own, without an engine: carving splits a free block and leaves the rest listed,
 * releasing merges with free neighbours, alignment leaves free front padding, empty chunks go on
 * trim, growth is planned within the limit, and the lock is exclusive. After every step the pool's
 * invariants hold ({@link #assertInvariants}): blocks tile each chunk in address order, no two
 * adjacent blocks are free, and {@code used}, {@code live} and {@code reserved} add up.
 */
class PoolTest {
    static final long KiB = 1024;

    /** The fixture of the pool a test made last. */
    private PoolFixture fixture;

    private Pool pool(long alignment) {
        fixture = new PoolFixture(alignment);
        return fixture.pool;
    }

    /** Adds a chunk at a 4 KiB-aligned {@code address}: only its address and size matter to carving. */
    private static PoolChunk addChunk(Pool p, long size, long address) {
        p.addChunk(PoolFixture.HeapUpstream.chunk(size, address));
        return p.chunks.get(p.chunks.size() - 1);
    }

    private void assertInvariants(Pool p) {
        assertSame(fixture.pool, p);
        fixture.assertInvariants();
    }

    private static List<Block> blocks(PoolChunk c) {
        List<Block> out = new ArrayList<>();
        for (Block b = c.first; b != null; b = b.nextPhys) {
            out.add(b);
        }
        return out;
    }

    @Test
    void aNewChunkIsOneFreeBlock() {
        Pool p = pool(256);
        assertEquals(0, p.largestFree());
        assertNull(p.carve(256, 256), "nothing to carve from before the first chunk");
        PoolChunk c = addChunk(p, 64 * KiB, 1L << 20);
        assertEquals(1, blocks(c).size());
        assertTrue(c.first.free);
        assertEquals(64 * KiB, p.largestFree());
        assertEquals(64 * KiB, p.freeInReserved());
        assertInvariants(p);
    }

    @Test
    void blockSizesRoundUpToTheAlignmentAndTheSmallestBlock() {
        assertEquals(256, pool(256).blockSize(1));
        assertEquals(256, pool(256).blockSize(256));
        assertEquals(512, pool(256).blockSize(257));
        assertEquals(Pool.MIN_BLOCK, pool(1).blockSize(1), "never below MIN_BLOCK");
        assertEquals(32, pool(1).blockSize(17), "a multiple of MIN_BLOCK even at alignment 1");
    }

    @Test
    void carvingSplitsTheFreeBlockAndKeepsTheRestFree() {
        Pool p = pool(256);
        PoolChunk c = addChunk(p, 64 * KiB, 1L << 20);
        Block a = p.carve(KiB, 256);
        Block b = p.carve(256, 256);
        assertEquals(0, a.offset);
        assertEquals(KiB, a.size);
        assertEquals(KiB, b.offset, "carved next to the first");
        assertSame(p, a.pool);
        assertEquals(List.of(a, b, b.nextPhys), blocks(c));
        assertTrue(b.nextPhys.free);
        assertEquals(64 * KiB - KiB - 256, b.nextPhys.size);
        assertEquals(KiB + 256, p.used);
        assertEquals(2, p.live);
        assertEquals(64 * KiB - KiB - 256, p.largestFree());
        assertInvariants(p);
    }

    @Test
    void aBlockThatFillsTheFreeBlockLeavesNoSliver() {
        Pool p = pool(256);
        PoolChunk c = addChunk(p, 4 * KiB, 1L << 20);
        Block all = p.carve(4 * KiB, 256);
        assertEquals(List.of(all), blocks(c));
        assertNull(p.carve(256, 256), "a full chunk has nothing to give");
        assertEquals(0, p.largestFree());
        assertInvariants(p);
    }

    @Test
    void releasingMergesWithBothFreeNeighbours() {
        Pool p = pool(256);
        PoolChunk c = addChunk(p, 64 * KiB, 1L << 20);
        Block a = p.carve(KiB, 256);
        Block b = p.carve(KiB, 256);
        Block d = p.carve(KiB, 256);
        p.release(a);
        p.release(d); // merges with the free tail after it
        assertEquals(3, blocks(c).size(), "a (free), b, and d merged with the tail");
        assertEquals(64 * KiB - 2 * KiB, p.largestFree());
        assertInvariants(p);
        p.release(b); // merges with a before it and the tail after it
        assertEquals(1, blocks(c).size());
        assertTrue(c.first.free);
        assertEquals(64 * KiB, c.first.size);
        assertEquals(64 * KiB, p.largestFree());
        assertInvariants(p);
    }

    @Test
    void aReleasedBlockForgetsItsOwner() {
        Pool p = pool(256);
        addChunk(p, 64 * KiB, 1L << 20);
        Block a = p.carve(KiB, 256);
        p.carve(KiB, 256); // keeps a from merging with the tail
        a.handleId = 42;
        a.hint = MemoryUsageHint.READ_MOSTLY;
        a.freePending = true;
        p.release(a);
        assertTrue(a.free);
        assertEquals(0, a.handleId);
        assertNull(a.hint);
        assertFalse(a.freePending);
        assertSame(a, p.carve(KiB, 256), "the hole is carved again as it is");
        assertInvariants(p);
    }

    @Test
    void anAlignedCarveLeavesTheFrontPaddingFree() {
        Pool p = pool(256);
        long base = 1L << 20;
        PoolChunk c = addChunk(p, 64 * KiB, base);
        p.carve(256, 256);
        Block aligned = p.carve(KiB, 4 * KiB);
        assertEquals(0, (base + aligned.offset) % (4 * KiB));
        assertEquals(4 * KiB, aligned.offset);
        Block padding = aligned.prevPhys;
        assertTrue(padding.free);
        assertEquals(256, padding.offset);
        assertEquals(4 * KiB - 256, padding.size);
        assertSame(c, aligned.chunk);
        assertEquals(256, p.carve(256, 256).offset, "the padding is the smallest free block that fits");
        assertEquals(3, p.live);
        assertInvariants(p);
    }

    @Test
    void anAlignmentAboveTheChunksAddressIsPaddedToo() {
        Pool p = pool(256);
        long base = (1L << 20) + 4 * KiB; // 4 KiB-aligned, not 16 KiB-aligned
        addChunk(p, 64 * KiB, base);
        Block b = p.carve(KiB, 16 * KiB);
        assertEquals(0, (base + b.offset) % (16 * KiB));
        assertEquals(12 * KiB, b.offset);
        assertInvariants(p);
    }

    @Test
    void aCarveThatFitsNowhereReturnsNullAndChangesNothing() {
        Pool p = pool(256);
        addChunk(p, 16 * KiB, (1L << 20) + 4 * KiB);
        addChunk(p, 16 * KiB, (2L << 20) + 4 * KiB);
        p.carve(8 * KiB, 256);
        long used = p.used;
        assertNull(p.carve(17 * KiB, 256), "the largest free block is 16 KiB");
        assertNull(p.carve(16 * KiB, 32 * KiB), "16 KiB fits only at an address that is not 32 KiB-aligned");
        assertEquals(used, p.used);
        assertEquals(1, p.live);
        assertInvariants(p);
    }

    @Test
    void trimTakesOnlyEmptyChunksBeyondWhatItMustKeep() {
        Pool p = pool(256);
        addChunk(p, 16 * KiB, 1L << 20);
        addChunk(p, 16 * KiB, 2L << 20);
        PoolChunk empty = addChunk(p, 32 * KiB, 3L << 20);
        Block emptied = p.carve(16 * KiB, 256);
        Block kept = p.carve(16 * KiB, 256);
        assertTrue(emptied.chunk != kept.chunk, "each fills one of the 16 KiB chunks");
        p.release(emptied);
        PoolChunk usedChunk = kept.chunk;

        List<DeviceChunk> none = p.takeEmptyChunks(64 * KiB);
        assertEquals(List.of(), none, "keeping 64 KiB reserved leaves nothing to take");
        List<DeviceChunk> taken = p.takeEmptyChunks(16 * KiB);
        assertEquals(List.of(empty.device, emptied.chunk.device), taken,
                "the empty chunks, last first, down to the 16 KiB to keep");
        assertEquals(List.of(usedChunk), p.chunks);
        assertEquals(16 * KiB, p.reserved);
        assertNull(p.carve(256, 256), "the taken chunks' free blocks left the index");
        assertInvariants(p);
    }

    @Test
    void growthIsPlannedWithinTheLimitAndBookedAsPending() {
        Pool p = pool(256); // initial 64 KiB, growth 64 KiB, maxSize 256 KiB
        assertEquals(64 * KiB, p.planGrowth(KiB, 4 * KiB), "the first growth is the initial size");
        assertEquals(64 * KiB, p.pending);
        assertEquals(64 * KiB, p.planGrowth(KiB, 4 * KiB), "a small request: one growth increment");
        assertEquals(20 * KiB, p.planGrowth(17 * KiB, 4 * KiB), "17 KiB >= 64 KiB / 4: a chunk of its own size, aligned");
        assertEquals(16 * KiB, p.planGrowth(16 * KiB, 4 * KiB), "exactly a quarter: its own size too");
        assertEquals(164 * KiB, p.pending);
        assertEquals(0, p.planGrowth(96 * KiB, 4 * KiB), "92 KiB of room is left: 96 KiB does not fit");
        assertEquals(88 * KiB, p.planGrowth(88 * KiB, 4 * KiB));
        assertEquals(4 * KiB, p.planGrowth(16, 4 * KiB), "an increment is wanted, the 4 KiB left is planned");
        assertEquals(256 * KiB, p.pending);
        assertEquals(0, p.planGrowth(16, 4 * KiB), "the limit is reached");
        assertEquals(256 * KiB, p.pending, "a refused plan books nothing");
    }

    @Test
    void anAllocationAboveTheAutoGcLineCrossesItOnceUntilUsedFallsBackToIt() {
        fixture = new PoolFixture(256, 1L << 30, 0.5); // maxSize 256 KiB: the line is 128 KiB
        Pool p = fixture.pool;
        addChunk(p, 256 * KiB, 1L << 20);
        Block half = p.carve(128 * KiB, 256);
        assertFalse(p.crossedGcLine(), "at the line is not above it");
        Block over = p.carve(256, 256);
        assertTrue(p.crossedGcLine(), "above the line");
        assertFalse(p.crossedGcLine(), "once per crossing");
        Block more = p.carve(64 * KiB, 256);
        assertFalse(p.crossedGcLine(), "still above: no second crossing");
        p.release(more);
        assertFalse(p.crossedGcLine(), "above the line after a release: still disarmed");
        p.release(over);
        p.carve(KiB, 256);
        assertTrue(p.crossedGcLine(), "falling back to the line re-armed it");
        assertSame(p, half.pool);
        assertInvariants(p);
    }

    @Test
    void theAutoGcLineIsTheThresholdOfTheSmallerOfTheLimitAndTheCapacity() {
        fixture = new PoolFixture(256, 64 * KiB, 0.5); // the device holds less than maxSize: the line is 32 KiB
        Pool p = fixture.pool;
        addChunk(p, 64 * KiB, 1L << 20);
        p.carve(32 * KiB, 256);
        assertFalse(p.crossedGcLine());
        p.carve(256, 256);
        assertTrue(p.crossedGcLine());

        fixture = new PoolFixture(256, 1L << 30, 0.5);
        p = fixture.pool;
        addChunk(p, 256 * KiB, 1L << 20);
        p.configure(PoolFixture.config(256, 128 * KiB)); // a new maxSize moves the line to 64 KiB
        p.carve(64 * KiB + 256, 256);
        assertTrue(p.crossedGcLine());
    }

    @Test
    void thresholdsAtTheEndsAndNoneAtAll() {
        for (double threshold : new double[] {Double.NaN, 1.0}) {
            fixture = new PoolFixture(256, 1L << 30, threshold);
            Pool p = fixture.pool;
            addChunk(p, 256 * KiB, 1L << 20);
            p.carve(256 * KiB, 256);
            assertFalse(p.crossedGcLine(), threshold + ": a full pool never crosses");
        }
        fixture = new PoolFixture(256, 1L << 30, 0.0);
        Pool p = fixture.pool;
        addChunk(p, 256 * KiB, 1L << 20);
        p.carve(256, 256);
        assertTrue(p.crossedGcLine(), "0.0: the first block crosses");
    }

    @Test
    void aSecondThreadWaitsForThePoolLock() throws Exception {
        Pool p = pool(256);
        p.acquire();
        CountDownLatch started = new CountDownLatch(1);
        CountDownLatch acquired = new CountDownLatch(1);
        Thread t = new Thread(() -> {
            started.countDown();
            p.acquire();
            acquired.countDown();
            p.lock.unlock();
        });
        t.start();
        try {
            assertTrue(started.await(30, TimeUnit.SECONDS));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!p.lock.hasQueuedThread(t)) {
                assertTrue(System.nanoTime() < deadline, "the second thread never queued for the lock");
                Thread.onSpinWait(); // it spins, then parks in the lock's queue
            }
            assertEquals(1, acquired.getCount(), "no second owner while the lock is held");
        } finally {
            p.lock.unlock();
        }
        assertTrue(acquired.await(30, TimeUnit.SECONDS), "it gets the lock once released");
        t.join();
    }
}
