package io.ferrum.memory.pool.internal;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * One thread's cache of freed small blocks of one manager (bins only), so that a thread that frees
 * and allocates again does not take a pool lock, an atomic counter or the handle table's monitor.
 * Which sizes it holds is {@link SizeClasses}'s policy; whether it holds blocks above
 * {@link SizeClasses#MAX_CLASS} now is the {@link LargeBlockPolicy}'s ({@link #cachesLarge}); the
 * registry of a manager's caches, their draining and their end is {@link ThreadCaches}'s.
 *
 * <p><b>Layout.</b> Per pool index p, created on first use: {@code stacks[p]} holds every bin's
 * stack, bin k's at {@code [PAD + k * DEPTH, PAD + (k + 1) * DEPTH)}; {@code depths[p][BYTE_PAD + k]}
 * is that stack's depth. Up to MAX_CLASS a bin holds blocks of exactly its class size; above it a
 * bin holds any size from its class to the next, and a request takes the first block of its bin
 * that is large enough, else the top of the next bin.
 *
 * <p><b>Invariants.</b> Cached blocks are not free in their pool (the pool still counts them as
 * used) and no handle names them. Only the owner thread pushes and pops; other threads only read
 * {@link #bytes()}, {@link #count()} and {@link #bytesOf} (for the manager's figures, which report
 * cached blocks as free), through a seqlock ({@link #seq()}: odd while the contents change), and
 * drain the cache of a thread that has died. Bounded: at most {@link #capacityBytes} bytes, a
 * quarter of it for blocks up to MAX_CLASS (so that a thread alone, which caches nothing larger,
 * keeps little memory from its pool), and {@value #DEPTH} blocks per bin; a free that does not fit
 * goes to the pool.
 *
 * <p><b>Inbound.</b> A block that another thread frees comes back to the cache of the thread that
 * allocated it ({@link Block#cachedBy}), so that a pipeline (one thread allocates, another frees)
 * does not send both threads to the pool's lock for every block: the freeing thread pushes it onto
 * this cache's inbound stack of its pool with one compare-and-set ({@link #offer}), and the owner,
 * on a miss, takes the whole stack with one atomic and sorts it into its bins, under the pool's lock
 * so that what does not fit goes back to the pool at the same moment ({@link #refill}). An inbound
 * stack holds at most a quarter of {@link #capacityBytes} per pool; blocks in it are cached blocks
 * like those in the bins (not free in their pool, named by nothing, each keeping its handle slot)
 * and are counted with them. When the cache ends (its thread died, the manager closed) each stack
 * is taken and closed with {@link #CLOSED}: a later offer fails and that free takes the pool path,
 * so no block is left in a stack that nobody takes.
 *
 * <p><b>Shared caches.</b> Virtual threads have no cache of their own; they use a few shared ones
 * ({@link #shared}), each held by one thread at a time through a lease ({@link #tryLease}): while it
 * holds the lease, that thread is the owner in every rule above. A shared cache caches large blocks
 * from the start ({@link #cachesLarge}: virtual threads run on every carrier, so their pools are
 * always shared between cores), has no inbound stack in use (no block records it as its allocator)
 * and never ends before the manager closes.
 */
final class ThreadCache extends ThreadCacheCounters {
    private static final long MAX_CLASS = SizeClasses.MAX_CLASS;
    private static final int BINS = SizeClasses.BINS;
    static final int DEPTH = 8;
    /**
     * Unused entries at both ends of the reference and int arrays the owner writes on each call (64
     * bytes or more): after a garbage collection two threads' arrays may lie side by side, or one
     * thread's array right after another thread's block.
     */
    static final int PAD = 16;
    /** The same for the byte arrays of stack depths: 64 entries. */
    static final int BYTE_PAD = 64;
    /** Capacity of the spare handle-slot stash, which lives in {@link #slots} from {@link #SLOT_BASE}. */
    static final int SLOTS = 64;
    static final int SLOT_BASE = PAD;
    private static final VarHandle BYTES;
    private static final VarHandle COUNT;
    private static final VarHandle CALLS;
    private static final VarHandle SEQ;
    private static final VarHandle LEASED;
    private static final VarHandle INBOUND = MethodHandles.arrayElementVarHandle(Block[].class);
    /** The top of an inbound stack that is closed: offers fail. */
    static final Block CLOSED = new Block(null, 0, 0);

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            BYTES = l.findVarHandle(ThreadCacheCounters.class, "bytes", long.class);
            COUNT = l.findVarHandle(ThreadCacheCounters.class, "count", int.class);
            CALLS = l.findVarHandle(ThreadCacheCounters.class, "calls", long.class);
            SEQ = l.findVarHandle(ThreadCacheCounters.class, "seq", int.class);
            LEASED = l.findVarHandle(ThreadCacheCounters.class, "leased", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    // 64 bytes after the counters (the JVM lays out a subclass's long fields first).
    long q01;
    long q02;
    long q03;
    long q04;
    long q05;
    long q06;
    long q07;
    long q08;

    final Thread owner = Thread.currentThread();
    /** True for a cache that virtual threads share by lease; false for a platform thread's own. */
    final boolean shared;
    /**
     * What a block allocated through this cache records as its allocator ({@link Block#cachedBy}):
     * this cache, or null for a shared one (a free on another thread then takes the usual path).
     */
    final ThreadCache home;
    /** The owner's thread-local entry for this cache; the manager empties it when it closes. */
    Object[] holder;
    final long ownerId = owner.threadId();
    final long capacityBytes;
    /**
     * Per pool index, created on first use: the stacks of all bins in one array, bin {@code k}'s
     * stack at {@code PAD + k * DEPTH}.
     */
    private final Block[][] stacks;
    /** Per pool index: the depth of bin {@code k}'s stack at {@code BYTE_PAD + k}. */
    private final byte[][] depths;
    /** Spare handle-table slots of this thread, at {@code [SLOT_BASE, SLOT_BASE + slotCount)}. */
    final int[] slots = new int[PAD + SLOTS + PAD];
    /**
     * Per pool index, at {@code PAD + p}: the top of the stack of blocks other threads freed for
     * this cache (linked through {@link Block#nextReturned}), null when empty, {@link #CLOSED} once
     * the cache has ended. Changed only atomically; padded like the owner's arrays, since other
     * threads write it.
     */
    private final Block[] inbound;

    ThreadCache(int pools, long capacityBytes, int epoch) {
        this(pools, capacityBytes, epoch, false);
    }

    ThreadCache(int pools, long capacityBytes, int epoch, boolean shared) {
        this.shared = shared;
        this.home = shared ? null : this;
        // Virtual threads run on every carrier: a pool they use is always shared between cores, the
        // case in which the large-block rule caches large blocks (docs/PERFORMANCE.md item 21).
        this.cachesLarge = shared;
        this.capacityBytes = capacityBytes;
        this.stacks = new Block[pools][];
        this.depths = new byte[pools][];
        this.inbound = new Block[PAD + pools + PAD];
        this.epoch = epoch;
    }

    /** A shared cache: takes its lease if no thread holds it. @return true if the caller holds it now */
    boolean tryLease() {
        return (int) LEASED.getOpaque(this) == 0 && LEASED.compareAndSet(this, 0, 1);
    }

    /** A shared cache: gives back the lease the caller holds; its changes happen before the next holder's. */
    void endLease() {
        LEASED.setRelease(this, 0);
    }

    /**
     * Any thread but the owner: puts {@code b}, a cacheable block of pool {@code p} whose last name
     * the caller has just claimed, onto this cache's inbound stack.
     *
     * @return true if it is there (the caller must not touch it again); false if the stack is closed
     * or full (the caller gives the block back another way)
     */
    boolean offer(int p, Block b) {
        long limit = capacityBytes / 4;
        while (true) {
            Block top = (Block) INBOUND.getVolatile(inbound, PAD + p);
            if (top == CLOSED) {
                return false;
            }
            long bytes = top == null ? b.size : top.returnedBytes + b.size;
            if (bytes > limit) {
                return false;
            }
            b.nextReturned = top;
            b.returnedBytes = bytes;
            b.returnedCount = top == null ? 1 : top.returnedCount + 1;
            if (INBOUND.compareAndSet(inbound, PAD + p, top, b)) {
                return true;
            }
        }
    }

    /** @return true if blocks wait in pool {@code p}'s inbound stack (any thread; a recent value) */
    boolean hasInbound(int p) {
        Block top = (Block) INBOUND.getOpaque(inbound, PAD + p);
        return top != null && top != CLOSED;
    }

    /**
     * Any thread, under pool {@code p}'s lock (or, for the owner, inside a change of its contents):
     * takes pool {@code p}'s inbound stack whole, leaving it empty, or closed when {@code close}.
     * A closed stack stays closed.
     *
     * @return the top of the stack taken, or null
     */
    Block takeInbound(int p, boolean close) {
        while (true) {
            Block top = (Block) INBOUND.getVolatile(inbound, PAD + p);
            if (top == CLOSED) {
                return null;
            }
            if (INBOUND.compareAndSet(inbound, PAD + p, top, close ? CLOSED : null)) {
                return top;
            }
        }
    }

    /**
     * Owner only, under pool {@code p}'s lock: moves the blocks of pool {@code p}'s inbound stack
     * into the bins, in one change of the cache's contents, and hands those that do not fit (a full
     * bin, a full cache, a large block this thread does not cache now) to {@code spill}, which gives
     * them back to the pool under the same lock.
     *
     * @return true if any block was taken
     */
    boolean refill(int p, java.util.function.Consumer<Block> spill) {
        int s = begin();
        Block b = takeInbound(p, false);
        boolean any = b != null;
        Block spilled = null;
        while (b != null) {
            Block next = b.nextReturned;
            b.nextReturned = null;
            if (!SizeClasses.cacheable(b.size, cachesLarge) || !place(p, b)) {
                b.nextReturned = spilled;
                spilled = b;
            }
            b = next;
        }
        end(s);
        while (spilled != null) {
            Block next = spilled.nextReturned;
            spilled.nextReturned = null;
            spill.accept(spilled);
            spilled = next;
        }
        return any;
    }

    /** @return bytes of the blocks in pool {@code p}'s inbound stack (any thread; a recent value) */
    long inboundBytes(int p) {
        Block top = (Block) INBOUND.getAcquire(inbound, PAD + p);
        return top == null || top == CLOSED ? 0 : top.returnedBytes;
    }

    /** @return bytes and count of the blocks in all inbound stacks, as {bytes, count} (any thread; a recent value) */
    long[] inbound() {
        long bytes = 0;
        long count = 0;
        for (int i = PAD; i < inbound.length - PAD; i++) {
            Block top = (Block) INBOUND.getAcquire(inbound, i);
            if (top != null && top != CLOSED) {
                bytes += top.returnedBytes;
                count += top.returnedCount;
            }
        }
        return new long[] {bytes, count};
    }

    /**
     * Owner only.
     *
     * @param size a class size (at most MAX_CLASS) or a block size up to MAX_BLOCK
     * @return a cached block of pool {@code p}: of exactly {@code size} bytes up to MAX_CLASS, of at
     * least {@code size} bytes above it; or null
     */
    Block pop(int p, long size) {
        CALLS.setOpaque(this, (long) CALLS.getOpaque(this) + 1);
        byte[] d = depths[p];
        if (d == null) {
            return null;
        }
        int bin = SizeClasses.bin(size);
        int n = d[BYTE_PAD + bin];
        Block[] stack = stacks[p];
        if (size > MAX_CLASS) {
            // A bin above MAX_CLASS holds blocks of different sizes: take one large enough, else the next bin's top.
            for (int k = n - 1; k >= 0; k--) {
                Block b = stack[PAD + bin * DEPTH + k];
                if (b.size >= size) {
                    int top = PAD + bin * DEPTH + n - 1;
                    int s = begin();
                    if (k != n - 1) {
                        stack[PAD + bin * DEPTH + k] = stack[top];
                        stack[top] = b;
                    }
                    d[BYTE_PAD + bin] = (byte) (n - 1);
                    forget(b);
                    end(s);
                    return b;
                }
            }
            if (bin + 1 == BINS) {
                return null;
            }
            bin++;
            n = d[BYTE_PAD + bin];
        }
        if (n == 0) {
            return null;
        }
        // The entry is left as it is: the next push to this bin is often the same block, and then
        // stores nothing (a reference store into an old array costs a GC card mark).
        return taken(d, bin, n - 1, stack[PAD + bin * DEPTH + n - 1]);
    }

    private Block taken(byte[] d, int bin, int depth, Block b) {
        int s = begin();
        d[BYTE_PAD + bin] = (byte) depth;
        forget(b);
        end(s);
        return b;
    }

    /**
     * Owner (or the drainer of a dead thread's cache): starts a change of the cache's contents.
     * Everything a reader of {@link #bytesOf}, {@link #bytes()} or {@link #count()} sees changes
     * between this and {@link #end}. @return the counter to pass to {@link #end}
     */
    private int begin() {
        int s = (int) SEQ.getOpaque(this);
        SEQ.setOpaque(this, s + 1);
        VarHandle.storeStoreFence();
        return s;
    }

    private void end(int s) {
        SEQ.setRelease(this, s + 2);
    }

    /** Owner only. @return true if {@code b} (of a class size, or above MAX_CLASS any size up to MAX_BLOCK) was cached, false if the cache is full */
    boolean push(int p, Block b) {
        if (!fits(p, b)) {
            return false;
        }
        int s = begin();
        store(p, b);
        end(s);
        return true;
    }

    /** Owner only: whether {@code b} fits in its bin and in the cache's bounds. */
    private boolean fits(int p, Block b) {
        long now = (long) BYTES.getOpaque(this);
        if (now + b.size > capacityBytes || b.size <= MAX_CLASS && smallBytes + b.size > capacityBytes / 4) {
            return false;
        }
        byte[] d = depths[p];
        return d == null || d[BYTE_PAD + SizeClasses.bin(b.size)] < DEPTH;
    }

    /** Owner only, inside a change of the contents: caches {@code b} if it fits. @return whether it did */
    private boolean place(int p, Block b) {
        if (!fits(p, b)) {
            return false;
        }
        store(p, b);
        return true;
    }

    /** Owner only, inside a change of the contents: caches {@code b}, which {@link #fits}. */
    private void store(int p, Block b) {
        byte[] d = depths[p];
        if (d == null) {
            d = depths[p] = new byte[BYTE_PAD + BINS + BYTE_PAD];
            stacks[p] = new Block[PAD + BINS * DEPTH + PAD];
        }
        int bin = SizeClasses.bin(b.size);
        int n = d[BYTE_PAD + bin];
        Block[] stack = stacks[p];
        int at = PAD + bin * DEPTH + n;
        if (stack[at] != b) {
            stack[at] = b;
        }
        d[BYTE_PAD + bin] = (byte) (n + 1);
        if (b.size <= MAX_CLASS) {
            smallBytes += b.size;
        }
        BYTES.setOpaque(this, (long) BYTES.getOpaque(this) + b.size);
        COUNT.setOpaque(this, (int) COUNT.getOpaque(this) + 1);
    }

    /** Owner (or anyone once the owner is dead): hands every cached block of pool {@code p} to {@code sink} and forgets it. */
    void drain(int p, java.util.function.Consumer<Block> sink) {
        byte[] d = depths[p];
        if (d == null) {
            return;
        }
        Block[] stack = stacks[p];
        for (int bin = 0; bin < BINS; bin++) {
            for (int k = d[BYTE_PAD + bin] - 1; k >= 0; k--) {
                int at = PAD + bin * DEPTH + k;
                Block b = stack[at];
                int s = begin();
                stack[at] = null;
                d[BYTE_PAD + bin] = (byte) k;
                forget(b);
                end(s);
                sink.accept(b);
            }
        }
    }

    /** Between {@link #begin} and {@link #end}: counts {@code b} out of the cache. */
    private void forget(Block b) {
        if (b.size <= MAX_CLASS) {
            smallBytes -= b.size;
        }
        BYTES.setOpaque(this, (long) BYTES.getOpaque(this) - b.size);
        COUNT.setOpaque(this, (int) COUNT.getOpaque(this) - 1);
    }

    /**
     * Any thread: the bytes of this cache's blocks of pool {@code p}, read from the owner's stacks.
     *
     * @return the bytes, or -1 when the owner changed the cache meanwhile (read again)
     */
    long bytesOf(int p) {
        int s = seq();
        if ((s & 1) != 0) {
            return -1;
        }
        byte[] d = depths[p];
        Block[] stack = stacks[p];
        long total = 0;
        if (d != null) {
            if (stack == null) {
                return -1;
            }
            for (int bin = 0; bin < BINS; bin++) {
                for (int k = d[BYTE_PAD + bin] - 1; k >= 0; k--) {
                    Block b = stack[PAD + bin * DEPTH + k];
                    if (b == null) {
                        return -1;
                    }
                    total += b.size;
                }
            }
        }
        VarHandle.loadLoadFence();
        return seq() == s ? total : -1;
    }

    /** @return the change counter of {@link #bytes()} and {@link #count()} (any thread); odd while they change */
    int seq() {
        return (int) SEQ.getAcquire(this);
    }

    /** @return bytes of the cached blocks (any thread; a recent value) */
    long bytes() {
        return (long) BYTES.getOpaque(this);
    }

    /** @return how many allocations the owner has asked this cache for (any thread; a recent value) */
    long calls() {
        return (long) CALLS.getOpaque(this);
    }

    /** @return number of cached blocks (any thread; a recent value) */
    int count() {
        return (int) COUNT.getOpaque(this);
    }
}
