package io.ferrum.memory.pool.internal;

import io.ferrum.memory.api.MemoryPoolConfig;

/**
 * The size-class policy: what block a request gets, and which thread-cache bin holds it.
 *
 * <p><b>Notation.</b> {@code unit} = max(pool alignment, {@value #MIN_BLOCK}); {@code n} = the
 * requested bytes; {@code block(n)} = n rounded up to a multiple of unit (at least MIN_BLOCK): what
 * the pool carves. {@code class(b)} = the size a thread-cached block of block size b is rounded up
 * to, so that blocks freed by one request serve the next of a similar size.
 *
 * <pre>
 *  block size b          class(b)                       bin(class)      bins
 *  16 .. 240 B           b (16 B steps)                 b / 16          1 .. 15
 *  256 .. 496 B          b rounded up to 16 B           16 + (b-256)/16 16 .. 31
 *  512 .. 992 B          32 B steps                     32 ..           32 .. 47
 *  2^k .. 2^(k+1)        2^k / 16 steps (k = 8 .. 17)   16 + 16 (k-8) + sixteenth
 *  128 .. 256 KiB        8 KiB steps                    ...             160 .. 175
 *  256 KiB .. 4 MiB      b itself (exact size)          bin of the class just below   176 .. 240
 * </pre>
 *
 * The step is never finer than {@code unit}: with a 4 KiB pool alignment, a 300 B request is a
 * 4 KiB block and class. Up to {@link #MAX_CLASS} a bin holds blocks of exactly its class size;
 * above it, up to {@link #MAX_BLOCK}, blocks keep their exact size (rounding a 1 MiB request by up to
 * 1/16 would waste more than a cache saves) and a bin holds any block between its class size and the
 * next one, so the cache looks in a bin and the next one (a reused block at most two steps, 12.5 %,
 * larger than asked). Larger blocks are not cached. There are {@link #BINS} bins per pool.
 *
 * <p>Pure functions of their arguments; no state.
 */
final class SizeClasses {
    /** Smallest block, and the unit every block size and offset is a multiple of. */
    static final long MIN_BLOCK = 16;
    /** Largest request rounded up to its class size. */
    static final long MAX_CLASS = 256 * 1024;
    /** Largest block a thread cache holds. */
    static final long MAX_BLOCK = 4L * 1024 * 1024;
    /** Bins per pool: 1..15 for 16..240 B, then 16 per power of two from 256 B to MAX_BLOCK. */
    static final int BINS = 16 + 16 * (63 - Long.numberOfLeadingZeros(MAX_BLOCK) - 8) + 1;

    private SizeClasses() {
    }

    /** @return the unit of a pool's block sizes and offsets: its alignment, at least MIN_BLOCK */
    static long unit(MemoryPoolConfig cfg) {
        return Math.max(cfg.alignment(), MIN_BLOCK);
    }

    /** @return the block a request of {@code requested} bytes gets: rounded up to {@code unit}, at least MIN_BLOCK */
    static long blockSize(long requested, long unit) {
        return alignUp(Math.max(requested, MIN_BLOCK), unit);
    }

    /** @return {@code value} rounded up to a multiple of {@code alignment} (a power of two) */
    static long alignUp(long value, long alignment) {
        return (value + alignment - 1) & -alignment;
    }

    /**
     * @return the class size a request of {@code blockSize} bytes (already a multiple of
     * {@code unit}) is rounded up to, or {@code blockSize} itself when it is too large to round
     */
    static long classSize(long blockSize, long unit) {
        if (blockSize > MAX_CLASS || blockSize < 256) {
            return blockSize;
        }
        long step = Math.max(unit, Long.highestOneBit(blockSize) >>> 4);
        return (blockSize + step - 1) & -step;
    }

    /** @return the bin of a block of a class size, or (above MAX_CLASS) of the class size just below it; at most MAX_BLOCK */
    static int bin(long size) {
        if (size < 256) {
            return (int) (size >>> 4);
        }
        int fl = 63 - Long.numberOfLeadingZeros(size);
        int sl = (int) ((size >>> (fl - 4)) & 15);
        return 16 + (fl - 8) * 16 + sl;
    }

    /** @return true if a thread cache may hold a block of {@code size} bytes, given whether it caches large ones now */
    static boolean cacheable(long size, boolean cachesLarge) {
        return size <= MAX_CLASS || (size <= MAX_BLOCK && cachesLarge);
    }
}
