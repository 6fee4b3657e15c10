package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;

import org.junit.jupiter.api.Test;

/**
 * The TLSF index alone: what {@link FreeBlockIndex#find} returns at and around the boundaries of
 * its lists (16 per power of two, so a list spans {@code 2^fl / 16} bytes), listing and unlisting
 * in any order, and, against a plain list of the same blocks, that a found block is never smaller
 * than asked and comes from the lowest non-empty list that surely fits.
 */
class FreeBlockIndexTest {
    private final FreeBlockIndex index = new FreeBlockIndex();

    private static Block block(long size) {
        return new Block(null, 0, size);
    }

    private Block listed(long size) {
        Block b = block(size);
        index.insert(b);
        return b;
    }

    /** @return the first size of the list {@code size} belongs to */
    private static long listFloor(long size) {
        long step = Math.max(1, Long.highestOneBit(size) >>> 4);
        return size & -step;
    }

    /** @return the first size of the list after the one {@code size} belongs to */
    private static long nextListFloor(long size) {
        return listFloor(size) + Math.max(1, Long.highestOneBit(size) >>> 4);
    }

    @Test
    void anEmptyIndexFindsNothing() {
        assertTrue(index.isEmpty());
        assertEquals(0, index.largest());
        for (long n : new long[] {16, 17, 256, 4096, 1L << 40, Long.MAX_VALUE}) {
            assertNull(index.find(n), "asked for " + n);
        }
    }

    @Test
    void belowTwoHundredFiftySixBytesEverySizeHasItsOwnList() {
        // 2^4 / 16 = 1 byte per list from 16 to 31, 2 bytes from 32 to 63, ...: exact fits.
        Block b17 = listed(17);
        assertSame(b17, index.find(17));
        assertSame(b17, index.find(16), "a larger list is taken when the own one is empty");
        assertNull(index.find(18));
        Block b40 = listed(40);
        assertSame(b40, index.find(40));
        assertSame(b40, index.find(18), "the lowest non-empty list above");
        assertSame(b17, index.find(17), "the own list first");
    }

    @Test
    void theHeadOfTheRequestsOwnListIsTakenWhenItFits() {
        // 256..271 is one list (256 / 16 = 16 bytes per list).
        Block b271 = listed(271);
        assertSame(b271, index.find(256));
        assertSame(b271, index.find(260));
        assertSame(b271, index.find(271));
        assertNull(index.find(272), "272 starts the next list, which is empty");
    }

    @Test
    void aRequestWhoseListHeadIsTooSmallGetsTheNextListUp() {
        Block b256 = listed(256);
        assertNull(index.find(257), "256 is the only block: too small");
        Block b272 = listed(272);
        assertSame(b272, index.find(257));
        assertSame(b256, index.find(256));
    }

    @Test
    void aFitBehindTheHeadOfTheOwnListIsNotSearched() {
        // One list, 256..271, holds 270 and then 260 at its head: a request for 265 does not walk
        // the list (that would not be O(1)) and the next list up is empty.
        Block b270 = listed(270);
        Block b260 = listed(260);
        assertNull(index.find(265));
        assertSame(b260, index.find(256));
        index.remove(b260);
        assertSame(b270, index.find(265), "with 270 at the head it is found");
    }

    @Test
    void listsCrossAPowerOfTwoAtItsBoundary() {
        // 496..511 is the last list of 256..511; 512..543 the first of 512..1023.
        Block b511 = listed(511);
        assertSame(b511, index.find(497), "the own list's head fits");
        assertSame(b511, index.find(511));
        assertNull(index.find(512));
        index.remove(b511);
        Block b496 = listed(496);
        assertNull(index.find(497), "496 is too small, and nothing is listed from 512");
        Block b512 = listed(512);
        assertSame(b512, index.find(497), "the next list up is the next power of two's first");
        assertSame(b496, index.find(496));
        assertSame(b512, index.find(512));
    }

    @Test
    void aLargerFirstLevelIsFoundWhenTheOwnLevelIsEmpty() {
        Block huge = listed(1L << 40);
        assertSame(huge, index.find(300));
        assertSame(huge, index.find(1L << 40));
        assertNull(index.find((1L << 40) + 1));
        assertNull(index.find(Long.MAX_VALUE), "rounding up a request this large must not wrap around");
        Block top = listed(1L << 62);
        assertSame(top, index.find((1L << 40) + 1));
        assertSame(top, index.find(1L << 62));
    }

    @Test
    void listingAndUnlistingInAnyOrderKeepTheOtherBlocksFindable() {
        // Three blocks of one list: unlisting the middle, the head, then the last.
        Block a = listed(1024);
        Block b = listed(1040);
        Block c = listed(1050); // head: c, b, a
        index.remove(b);
        assertSame(c, index.find(1024));
        assertSame(a, c.nextFree);
        assertSame(c, a.prevFree);
        index.remove(c);
        assertNull(c.nextFree);
        assertNull(c.prevFree);
        assertSame(a, index.find(1024));
        index.remove(a);
        assertNull(index.find(1024));
        assertNull(index.find(16), "no bit is left set");
        assertTrue(index.isEmpty());
    }

    @Test
    void unlistingTheLastBlockOfAListClearsOnlyThatList() {
        Block small = listed(290);
        Block other = listed(300); // the same list, 288..303
        Block big = listed(5000);
        index.remove(small);
        index.remove(other);
        assertSame(big, index.find(290), "the next non-empty list is found");
        assertFalse(index.isEmpty());
        index.remove(big);
        assertTrue(index.isEmpty());
    }

    @Test
    void unlistingABlockNotListedWhileItsListIsEmptyChangesNothing() {
        Block kept = listed(4096);
        Block never = block(300);
        index.remove(never);
        assertSame(kept, index.find(300));
        assertEquals(4096, index.largest());
        assertNull(never.nextFree);
        assertNull(never.prevFree);
    }

    @Test
    void unlistingABlockNotListedLeavesTheOthersOfItsListFindable() {
        Block first = listed(300);
        Block second = listed(300);
        Block never = block(300);
        index.remove(never);
        Block found = index.find(300);
        assertTrue(found == first || found == second, "a listed 300 B block is still found");
        index.remove(found);
        assertSame(found == first ? second : first, index.find(300));
    }

    @Test
    void largestIsTheLargestBlockOfTheHighestListNotItsHead() {
        listed(100);
        listed(1056);
        listed(1100); // the list 1024..1087 holds 1056; 1088..1151 holds 1100
        assertEquals(1100, index.largest());
        listed(1090); // the same list as 1100, now its head
        assertEquals(1100, index.largest());
    }

    @Test
    void clearForgetsEveryBlockAndTheIndexServesAgain() {
        for (int i = 1; i <= 50; i++) {
            listed(i * 112L);
        }
        index.clear();
        assertTrue(index.isEmpty());
        assertNull(index.find(16));
        assertEquals(0, index.largest());
        Block again = listed(640);
        assertSame(again, index.find(600));
    }

    @Test
    void aFoundBlockAlwaysFitsAndComesFromTheLowestListThatSurelyFits() {
        Random rnd = new Random(14);
        List<Block> listed = new ArrayList<>();
        for (int round = 0; round < 5_000; round++) {
            if (listed.isEmpty() || rnd.nextInt(3) > 0) {
                long size = 16 + (rnd.nextBoolean() ? rnd.nextInt(4096) : rnd.nextInt(1 << 22));
                Block b = block(size);
                index.insert(b);
                listed.add(b);
            } else {
                index.remove(listed.remove(rnd.nextInt(listed.size())));
            }
            long needed = 16 + (rnd.nextBoolean() ? rnd.nextInt(4096) : rnd.nextInt(1 << 22));
            Block found = index.find(needed);
            // Every block of the list at or after `surely` fits: the own list's floor when needed
            // starts it, else the next list's.
            long surely = listFloor(needed) == needed ? needed : nextListFloor(needed);
            if (found == null) {
                for (Block b : listed) {
                    assertTrue(b.size < surely, "a block of " + b.size + " surely fits " + needed + " but was not found");
                }
                continue;
            }
            assertTrue(listed.contains(found), "found an unlisted block");
            assertTrue(found.size >= needed, found.size + " found for " + needed);
            if (listFloor(found.size) != listFloor(needed)) {
                for (Block b : listed) {
                    assertFalse(b.size >= surely && listFloor(b.size) < listFloor(found.size),
                            "found " + found.size + " for " + needed + ", but " + b.size + " is in a lower list that fits");
                }
            }
            long max = listed.stream().mapToLong(b -> b.size).max().orElse(0);
            assertEquals(max, index.largest());
        }
    }
}
