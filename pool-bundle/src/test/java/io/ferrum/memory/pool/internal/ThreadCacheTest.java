package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/**
 * One thread cache's bins on their own: last in, first out per bin; exact classes up to
 * MAX_CLASS and a first fit (else the next bin's top) above it; {@value ThreadCache#DEPTH} blocks
 * per bin; the byte capacity and its quarter for small blocks; draining one pool; and the figures
 * other threads read, including a read that meets a change in progress.
 */
class ThreadCacheTest {
    static final long KiB = 1024;
    static final long MiB = 1024 * KiB;

    private final ThreadCache cache = new ThreadCache(2, 8 * MiB, 0);

    private static Block block(long size) {
        return new Block(null, 0, size);
    }

    @Test
    void aBinGivesItsBlocksBackLastInFirstOut() {
        Block a = block(KiB);
        Block b = block(KiB);
        assertTrue(cache.push(0, a));
        assertTrue(cache.push(0, b));
        assertSame(b, cache.pop(0, KiB));
        assertSame(a, cache.pop(0, KiB));
        assertNull(cache.pop(0, KiB));
    }

    @Test
    void upToMaxClassABinServesOnlyItsOwnClassAndPool() {
        assertTrue(cache.push(0, block(KiB)));
        assertNull(cache.pop(0, 1088), "the next class up is another bin");
        assertNull(cache.pop(0, 992), "the class below too");
        assertNull(cache.pop(1, KiB), "another pool's bins");
        assertEquals(KiB, cache.pop(0, KiB).size);
    }

    @Test
    void aBinHoldsAtMostDepthBlocks() {
        for (int i = 0; i < ThreadCache.DEPTH; i++) {
            assertTrue(cache.push(0, block(KiB)), "block " + i);
        }
        assertFalse(cache.push(0, block(KiB)), "the bin is full");
        assertTrue(cache.push(0, block(2 * KiB)), "another bin has room");
        assertEquals(ThreadCache.DEPTH + 1, cache.count());
        assertEquals(ThreadCache.DEPTH * KiB + 2 * KiB, cache.bytes());
        cache.pop(0, KiB);
        assertTrue(cache.push(0, block(KiB)), "room again after a pop");
    }

    @Test
    void smallBlocksFillAQuarterOfTheCapacityAndLargeOnesTheRest() {
        ThreadCache small = new ThreadCache(1, 16 * KiB, 0); // 4 KiB for blocks up to MAX_CLASS
        for (int i = 0; i < 4; i++) {
            assertTrue(small.push(0, block(KiB)));
        }
        assertFalse(small.push(0, block(256)), "the small quarter is full");
        small.pop(0, KiB);
        assertTrue(small.push(0, block(512)), "a pop gives its bytes back to the quarter");

        ThreadCache large = new ThreadCache(1, MiB, 0);
        assertTrue(large.push(0, block(300 * KiB)));
        assertTrue(large.push(0, block(300 * KiB)));
        assertTrue(large.push(0, block(300 * KiB)));
        assertFalse(large.push(0, block(300 * KiB)), "1200 KiB would pass the 1 MiB capacity");
        assertTrue(large.push(0, block(124 * KiB)), "900 + 124 KiB is exactly the capacity");
        assertEquals(MiB, large.bytes());
        assertFalse(large.push(0, block(16)));
    }

    @Test
    void aboveMaxClassABinServesTheFirstBlockLargeEnoughElseTheNextBinsTop() {
        // 512 KiB..1 MiB has 32 KiB bins: 576..607 KiB is one bin, 544..575 KiB the one below.
        Block b580 = block(580 * KiB);
        Block b600 = block(600 * KiB);
        Block b585 = block(585 * KiB);
        assertTrue(cache.push(0, b580));
        assertTrue(cache.push(0, b600));
        assertTrue(cache.push(0, b585));
        assertSame(b600, cache.pop(0, 590 * KiB), "the first from the top that is large enough");
        assertNull(cache.pop(0, 590 * KiB), "580 and 585 are too small, and the next bin is empty");
        assertSame(b585, cache.pop(0, 560 * KiB), "its own bin is empty: the next bin's top");
        assertSame(b580, cache.pop(0, 576 * KiB));
        assertEquals(0, cache.count());
        assertEquals(0, cache.bytes());
    }

    @Test
    void drainingAPoolHandsEveryBlockOverAndEmptiesOnlyThatPool() {
        List<Block> mine = new ArrayList<>();
        for (long size : new long[] {16, 256, KiB, KiB, 64 * KiB, 700 * KiB}) {
            Block b = block(size);
            assertTrue(cache.push(0, b));
            mine.add(b);
        }
        Block other = block(KiB);
        cache.push(1, other);
        List<Block> drained = new ArrayList<>();
        cache.drain(0, drained::add);
        assertEquals(mine.size(), drained.size());
        assertTrue(drained.containsAll(mine));
        assertEquals(0, cache.bytesOf(0));
        assertEquals(1, cache.count());
        assertEquals(KiB, cache.bytes());
        assertEquals(KiB, cache.bytesOf(1));
        assertNull(cache.pop(0, KiB));
        assertSame(other, cache.pop(1, KiB));
        cache.drain(0, b -> {
            throw new AssertionError("nothing is left to drain");
        });
    }

    @Test
    void theFiguresOtherThreadsReadAgreeWithTheContents() {
        assertEquals(0, cache.bytesOf(0), "a pool never used");
        cache.push(0, block(KiB));
        cache.push(0, block(3 * KiB));
        cache.push(1, block(512));
        assertEquals(4 * KiB, cache.bytesOf(0));
        assertEquals(512, cache.bytesOf(1));
        assertEquals(4 * KiB + 512, cache.bytes());
        assertEquals(3, cache.count());
        assertEquals(0, cache.seq() & 1, "no change in progress");
        long calls = cache.calls();
        cache.pop(0, KiB);
        cache.pop(0, 2 * KiB); // a miss counts too
        assertEquals(calls + 2, cache.calls());
        assertEquals(3 * KiB, cache.bytesOf(0));
    }

    @Test
    void aReaderThatMeetsAChangeInProgressIsToldToReadAgain() {
        cache.push(0, block(KiB));
        int s = cache.seq();
        cache.seq = s + 1; // the owner between begin() and end(): the contents are changing
        assertEquals(-1, cache.bytesOf(0));
        cache.seq = s + 2;
        assertEquals(KiB, cache.bytesOf(0));
        int before = cache.seq();
        cache.push(0, block(KiB));
        assertEquals(before + 2, cache.seq(), "a push is one change: odd during it, even after");
    }
}
