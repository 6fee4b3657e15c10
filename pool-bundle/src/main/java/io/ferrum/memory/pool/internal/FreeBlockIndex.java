package io.ferrum.memory.pool.internal;

import java.util.Arrays;

/**
 * The free blocks of one pool, indexed TLSF-style (two-level segregated fit) so that finding a
 * block that fits and listing a freed one are O(1).
 *
 * <p><b>Notation.</b> For a size {@code s >= 16}: {@code fl(s) = floor(log2 s)} (the first level,
 * 4..63) and {@code sl(s) = (s >> (fl - 4)) & 15} (the second level: which sixteenth of the power of
 * two). List {@code fl * 16 + sl} holds the free blocks whose size has those levels.
 *
 * <pre>
 *   flBitmap  bit fl set    <=> some list of first level fl is non-empty
 *   slBitmap[fl] bit sl set <=> list (fl, sl) is non-empty
 *   heads[fl * 16 + sl]       first block of list (fl, sl), linked through prevFree / nextFree
 * </pre>
 *
 * <p><b>Finding a block for {@code n} bytes</b> ({@link #find}): 1. the head of n's own list, if it
 * is large enough (a good fit); 2. else n rounded up to the next list boundary, and the first
 * non-empty list at or above it, found with one mask and count-trailing-zeros on each bitmap: every
 * block there fits. So a found block is never smaller than asked, and at most one list step (1/16
 * of a power of two) larger than the smallest block that would fit, unless none of that size exists.
 *
 * <p><b>Invariants</b> (the pool's lock guards everything): a block is in at most one list, the
 * one of its current size; a bit is set exactly when its list is non-empty; only blocks marked free
 * are listed (the pool lists and unlists; a defragmentation run may keep a chunk's free blocks
 * unlisted while it moves blocks, and lists them again before it releases the lock).
 */
final class FreeBlockIndex {
    private static final int SL_BITS = 4;
    private static final int SL_COUNT = 1 << SL_BITS;
    private static final int FL_COUNT = 64;

    private final Block[] heads = new Block[FL_COUNT * SL_COUNT];
    private long flBitmap;
    private final int[] slBitmap = new int[FL_COUNT];

    private static int firstLevel(long size) {
        return 63 - Long.numberOfLeadingZeros(size);
    }

    private static int secondLevel(long size, int fl) {
        return (int) ((size >>> (fl - SL_BITS)) & (SL_COUNT - 1));
    }

    /** Lists free block {@code b} under its size (at least 16 bytes). */
    void insert(Block b) {
        int fl = firstLevel(b.size);
        int sl = secondLevel(b.size, fl);
        int idx = fl * SL_COUNT + sl;
        Block head = heads[idx];
        b.prevFree = null;
        b.nextFree = head;
        if (head != null) {
            head.prevFree = b;
        }
        heads[idx] = b;
        flBitmap |= 1L << fl;
        slBitmap[fl] |= 1 << sl;
    }

    /**
     * Unlists {@code b} if it is listed under its current size; a block that is not listed changes
     * nothing (a listed block is either its list's head or has a predecessor).
     */
    void remove(Block b) {
        int fl = firstLevel(b.size);
        int sl = secondLevel(b.size, fl);
        int idx = fl * SL_COUNT + sl;
        if (b.prevFree != null) {
            b.prevFree.nextFree = b.nextFree;
        } else {
            if (heads[idx] != b) {
                return;
            }
            heads[idx] = b.nextFree;
            if (heads[idx] == null) {
                slBitmap[fl] &= ~(1 << sl);
                if (slBitmap[fl] == 0) {
                    flBitmap &= ~(1L << fl);
                }
            }
        }
        if (b.nextFree != null) {
            b.nextFree.prevFree = b.prevFree;
        }
        b.prevFree = null;
        b.nextFree = null;
    }

    /** @return a listed block of at least {@code needed} bytes (at least 16), still listed; or null */
    Block find(long needed) {
        int fl = firstLevel(needed);
        int sl = secondLevel(needed, fl);
        // The request's own class may hold a block that fits: take its head if it does (good fit).
        Block head = heads[fl * SL_COUNT + sl];
        if (head != null && head.size >= needed) {
            return head;
        }
        // Otherwise round up to the next class: every block there fits.
        long rounded = needed + (1L << (fl - SL_BITS)) - 1;
        if (rounded < 0) {
            return null;
        }
        fl = firstLevel(rounded);
        sl = secondLevel(rounded, fl);
        int slMap = slBitmap[fl] & (-1 << sl);
        if (slMap == 0) {
            long flMap = fl + 1 < FL_COUNT ? flBitmap & (-1L << (fl + 1)) : 0;
            if (flMap == 0) {
                return null;
            }
            fl = Long.numberOfTrailingZeros(flMap);
            slMap = slBitmap[fl];
        }
        sl = Integer.numberOfTrailingZeros(slMap);
        return heads[fl * SL_COUNT + sl];
    }

    /** @return the largest listed block's size, 0 if none */
    long largest() {
        if (flBitmap == 0) {
            return 0;
        }
        int fl = 63 - Long.numberOfLeadingZeros(flBitmap);
        int sl = 31 - Integer.numberOfLeadingZeros(slBitmap[fl]);
        long max = 0;
        for (Block b = heads[fl * SL_COUNT + sl]; b != null; b = b.nextFree) {
            max = Math.max(max, b.size);
        }
        return max;
    }

    /** @return true when no block is listed */
    boolean isEmpty() {
        return flBitmap == 0;
    }

    /** Forgets every listed block at once (the pool gave all its chunks back). */
    void clear() {
        Arrays.fill(heads, null);
        flBitmap = 0;
        Arrays.fill(slBitmap, 0);
    }
}
