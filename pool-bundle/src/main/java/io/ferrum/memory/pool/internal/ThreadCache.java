package io.ferrum.memory.pool.internal;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * One thread's cache of freed small blocks of one manager, so that a thread that frees and
 * allocates again does not take a pool lock, an atomic counter or the handle table's monitor.
 *
 * <p>Cached blocks are not free in their pool (the pool still counts them as used) and no handle
 * names them. Only the owner thread pushes and pops; other threads only read {@link #bytes()} and
 * {@link #count()} (for the manager's figures, which report cached blocks as free) and drain the
 * cache of a thread that has died. Bins hold blocks of exactly one size class each (class sizes:
 * 16 B steps below 256 B, then 16 steps per power of two, never finer than the pool alignment).
 *
 * <p>Bounded: at most {@link #capacityBytes} bytes and {@value #DEPTH} blocks per class; a free that
 * does not fit goes to the pool. The manager drains caches on trim, defragment, configurePool and
 * before it reports out of memory (each thread on its next call, the calling thread at once).
 */
final class ThreadCache {
    /** Largest cached block, and largest request rounded up to its class size. */
    static final long MAX_BLOCK = 256 * 1024;
    static final int DEPTH = 8;
    /** Bins per pool: 1..15 for 16..240 B, then 16 per power of two from 256 B to MAX_BLOCK. */
    static final int BINS = 16 + 16 * (63 - Long.numberOfLeadingZeros(MAX_BLOCK) - 8) + 1;
    private static final VarHandle BYTES;
    private static final VarHandle COUNT;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            BYTES = l.findVarHandle(ThreadCache.class, "bytes", long.class);
            COUNT = l.findVarHandle(ThreadCache.class, "count", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final Thread owner = Thread.currentThread();
    final long capacityBytes;
    /** [pool index][bin] -> stack of blocks, created on first use. */
    private final Block[][][] bins;
    private final byte[][] depths;
    /** Spare handle-table slots of this thread. */
    final int[] slots = new int[64];
    int slotCount;
    /** The manager's drain epoch this cache has honoured. */
    int epoch;
    @SuppressWarnings("unused") // accessed through BYTES
    private long bytes;
    @SuppressWarnings("unused") // accessed through COUNT
    private int count;

    ThreadCache(int pools, long capacityBytes, int epoch) {
        this.capacityBytes = capacityBytes;
        this.bins = new Block[pools][][];
        this.depths = new byte[pools][];
        this.epoch = epoch;
    }

    /**
     * @return the class size a request of {@code blockSize} bytes (already a multiple of
     * {@code unit}) is rounded up to, or {@code blockSize} itself when it is too large to cache
     */
    static long classSize(long blockSize, long unit) {
        if (blockSize > MAX_BLOCK || blockSize < 256) {
            return blockSize;
        }
        long step = Math.max(unit, Long.highestOneBit(blockSize) >>> 4);
        return (blockSize + step - 1) & -step;
    }

    /** @return the bin of a block of exactly a class size (at most MAX_BLOCK) */
    static int bin(long size) {
        if (size < 256) {
            return (int) (size >>> 4);
        }
        int fl = 63 - Long.numberOfLeadingZeros(size);
        int sl = (int) ((size >>> (fl - 4)) & 15);
        return 16 + (fl - 8) * 16 + sl;
    }

    /** Owner only. @return a cached block of exactly {@code size} bytes of pool {@code p}, or null */
    Block pop(int p, long size) {
        byte[] d = depths[p];
        if (d == null) {
            return null;
        }
        int bin = bin(size);
        int n = d[bin];
        if (n == 0) {
            return null;
        }
        Block[] stack = bins[p][bin];
        Block b = stack[--n];
        stack[n] = null;
        d[bin] = (byte) n;
        BYTES.setOpaque(this, (long) BYTES.getOpaque(this) - b.size);
        COUNT.setOpaque(this, (int) COUNT.getOpaque(this) - 1);
        return b;
    }

    /** Owner only. @return true if {@code b} (of a class size) was cached, false if the cache is full */
    boolean push(int p, Block b) {
        long now = (long) BYTES.getOpaque(this);
        if (now + b.size > capacityBytes) {
            return false;
        }
        byte[] d = depths[p];
        if (d == null) {
            d = depths[p] = new byte[BINS];
            bins[p] = new Block[BINS][];
        }
        int bin = bin(b.size);
        int n = d[bin];
        if (n == DEPTH) {
            return false;
        }
        Block[] stack = bins[p][bin];
        if (stack == null) {
            stack = bins[p][bin] = new Block[DEPTH];
        }
        stack[n] = b;
        d[bin] = (byte) (n + 1);
        BYTES.setOpaque(this, now + b.size);
        COUNT.setOpaque(this, (int) COUNT.getOpaque(this) + 1);
        return true;
    }

    /** Owner (or anyone once the owner is dead): hands every cached block of pool {@code p} to {@code sink} and forgets it. */
    void drain(int p, java.util.function.Consumer<Block> sink) {
        byte[] d = depths[p];
        if (d == null) {
            return;
        }
        for (int bin = 0; bin < BINS; bin++) {
            Block[] stack = bins[p][bin];
            for (int k = d[bin] - 1; k >= 0; k--) {
                Block b = stack[k];
                stack[k] = null;
                d[bin] = (byte) k;
                BYTES.setOpaque(this, (long) BYTES.getOpaque(this) - b.size);
                COUNT.setOpaque(this, (int) COUNT.getOpaque(this) - 1);
                sink.accept(b);
            }
        }
    }

    /** @return bytes of the cached blocks (any thread; a recent value) */
    long bytes() {
        return (long) BYTES.getOpaque(this);
    }

    /** @return number of cached blocks (any thread; a recent value) */
    int count() {
        return (int) COUNT.getOpaque(this);
    }
}
