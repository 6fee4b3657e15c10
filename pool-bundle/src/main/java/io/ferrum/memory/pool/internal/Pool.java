package io.ferrum.memory.pool.internal;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.DeviceChunk;

/**
 * The pool of one memory type on one device, and its lock: the chunks it reserved, the blocks that
 * tile them, and a {@link FreeBlockIndex} of the free ones. It carves and releases blocks and
 * plans growth; compaction is {@link Compactor}'s, growth's upstream calls {@link Growth}'s.
 *
 * <p><b>Layout.</b> Each chunk ({@link PoolChunk}) is tiled by blocks in address order, linked
 * through prevPhys/nextPhys; free blocks are also listed in the index by size. Block sizes and
 * offsets are multiples of the pool's unit (its alignment, at least {@value #MIN_BLOCK} bytes), so
 * splitting never leaves slivers. A carve takes a free block that fits (with room for the padding
 * an alignment above the unit needs), leaves the front padding and the tail free; a release
 * coalesces with both physical neighbours.
 *
 * <p>Everything here is guarded by {@link #lock}. Invariants, true whenever the lock is free:
 * <ul>
 *   <li>the blocks of a chunk tile it exactly, in address order, and no two adjacent blocks are both
 *       free (outside a defragmentation run);</li>
 *   <li>{@code used} = sum of sizes of non-free blocks = sum of {@code chunk.usedBytes};</li>
 *   <li>{@code reserved} = sum of chunk sizes; {@code reserved + pending <= limit}.</li>
 *   <li>the device's account ({@link DeviceAccount}, read without the lock) changes with the blocks
 *       carved for allocations and released, never with a compaction's move: its destination is
 *       carved apart ({@link #carveDestination}), so no reader sees a moving block twice.</li>
 *   <li>auto-GC at the threshold is armed exactly when no allocation took {@code used} above the
 *       line since {@code used} was last at or below it (a line moved by {@link #configure} counts as
 *       the line).</li>
 * </ul>
 */
public final class Pool {
    /** Smallest block, and the unit every block size and offset is a multiple of ({@link SizeClasses#MIN_BLOCK}). */
    public static final long MIN_BLOCK = SizeClasses.MIN_BLOCK;

    /** No thread id: thread ids are positive. */
    static final long NO_THREAD = -1;

    final MemoryType type;
    /**
     * The free path of the manager whose device this pool's chunks are on (a peer's alias of a
     * block frees through it); set once, while the manager is built.
     */
    Reclaimer reclaimer;
    final ReentrantLock lock = new ReentrantLock();
    /** Signalled when {@link #inflight} drops to zero, for close. */
    final Condition idle = lock.newCondition();
    /** Signalled when a growth ends, for allocations that waited for it rather than growing too. */
    final Condition grown = lock.newCondition();
    /**
     * Signalled when a staging copy made or written back outside the lock is done ({@link
     * MappingState#inTransit}), for mappings of its block that waited for it.
     */
    final Condition settled = lock.newCondition();
    final List<PoolChunk> chunks = new ArrayList<>();
    /** The device-wide figures this pool's carves and releases add to. */
    private final DeviceAccount account;

    /** Set through {@link #configure}. */
    MemoryPoolConfig config;
    /** Auto-GC's threshold in utilisation (NaN: off) and the device capacity it is read against. */
    private final double gcThreshold;
    private final long capacity;
    /** Auto-GC runs when an allocation takes {@link #used} above this; Long.MAX_VALUE: never. */
    private long gcLine;
    /** True until an allocation crosses {@link #gcLine}; true again once used is at or below it. */
    private boolean gcArmed = true;
    long reserved;
    /** Bytes being reserved from the upstream right now, outside the lock. */
    long pending;
    long used;
    long live;
    /**
     * Work on this pool's memory outside its lock: pins (copies, fills, scrubs) and upstream calls
     * (a growth, a trim's release). Close releases the chunks only once it is zero.
     */
    int inflight;
    /** Closed while {@link #inflight} was not zero: whoever ends the last of that work releases the chunks. */
    boolean releaseWhenIdle;
    /**
     * Freed blocks whose views a native operation held open when they had to close (their arena
     * cannot close while an I/O call uses a buffer of it): out of use until the views close.
     */
    final List<Block> stuckViews = new ArrayList<>();
    /**
     * The id of the last thread that took {@link #lock} to allocate or free through its thread cache
     * (for thread caches: is this pool shared between threads?); {@link #NO_THREAD} before the first.
     */
    long lastCacheThread = NO_THREAD;
    boolean closed;
    /**
     * Set under the lock while a defragmentation moves this pool's blocks, null otherwise: the one
     * holder of the lock across device calls, for as long as the device takes (for good, on a wedged
     * GPU). The pool's figures as the move found them, which stand for the whole move (a move changes
     * none of them): the full figures read these instead of waiting ({@link #acquireUnlessMoving}),
     * and a close that has waited its limit leaves the pool to the move ({@link #closeLeft}). Cleared
     * before the defragmentation reads {@link #closeLeft}, under the lock.
     */
    volatile BeforeMove moving;

    /**
     * A pool's own figures at the start of a defragmentation's move, as {@link Figures#memoryInfo}
     * reads them under the lock.
     */
    record BeforeMove(long reserved, long used, long live, long freeInReserved, long scattered) {
        /** Under {@code pool}'s lock: its figures now. */
        static BeforeMove of(Pool pool, boolean idleIsFree) {
            long[] fs = pool.freeAndScattered(idleIsFree);
            return new BeforeMove(pool.reserved, pool.used, pool.live, fs[0], fs[1]);
        }
    }

    /**
     * Set by a close that waited its limit for a defragmentation of this pool: the defragmentation
     * closes the pool as it ends ({@link Lifecycle#closeLeftPool}). Set before the close reads
     * {@link #moving}; cleared, under the lock, by whichever of the two closes the pool.
     */
    volatile boolean closeLeft;

    /** The free blocks of this pool's chunks. */
    final FreeBlockIndex free = new FreeBlockIndex();

    /**
     * @param gcThreshold the utilisation above which an allocation runs auto-GC, in [0, 1]; NaN for never
     */
    Pool(MemoryType type, MemoryPoolConfig config, DeviceAccount account, double gcThreshold) {
        this.type = type;
        this.account = account;
        this.gcThreshold = gcThreshold;
        this.capacity = account.capacity();
        configure(config);
    }

    /** Under the lock (or before the pool is shared): sets the configuration and what follows from it. */
    void configure(MemoryPoolConfig cfg) {
        this.config = cfg;
        // Utilisation is used bytes over the most the pool may hold: its limit, or the device's capacity.
        long ceiling = Math.min(limit(), capacity);
        this.gcLine = Double.isNaN(gcThreshold) ? Long.MAX_VALUE : (long) Math.floor(gcThreshold * ceiling);
        if (used <= gcLine) {
            // A new line at or above the pool's use (a raised maxSize): the next crossing is one.
            gcArmed = true;
        }
    }

    /**
     * Under the lock, after a carve for an allocation: whether this allocation took the pool's
     * utilisation above the auto-GC threshold, at most once per crossing.
     *
     * @return true if the caller is to run auto-GC now (the line is disarmed until used falls back to it)
     */
    boolean crossedGcLine() {
        if (gcArmed && used > gcLine) {
            gcArmed = false;
            return true;
        }
        return false;
    }


    /**
     * Takes {@link #lock}, spinning briefly first: the lock is held for a fraction of a microsecond
     * on the allocation paths, far less than parking and waking a thread costs (a parked waiter
     * turns two threads sharing a pool into a convoy).
     */
    void acquire() {
        ReentrantLock l = lock;
        if (l.tryLock()) {
            return;
        }
        for (int i = 0; i < 256; i++) {
            Thread.onSpinWait();
            if (!l.isLocked() && l.tryLock()) {
                return;
            }
        }
        l.lock();
    }

    /** How long a wait for the lock that must notice a defragmentation taking it waits at a time. */
    static final long LOOK_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

    /**
     * Takes the lock unless a defragmentation holds it ({@link #moving}): the other holders hold it
     * for bookkeeping only. An interrupt does not end the wait; the flag stays set.
     *
     * @return null with the lock held; else, without it, the figures of the move that holds it
     */
    BeforeMove acquireUnlessMoving() {
        ReentrantLock l = lock;
        if (l.tryLock()) {
            return null;
        }
        boolean interrupted = false;
        try {
            while (true) {
                BeforeMove m = moving;
                if (m != null) {
                    return m;
                }
                try {
                    if (l.tryLock(LOOK_NANOS, TimeUnit.NANOSECONDS)) {
                        return null;
                    }
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * Takes every pool's lock, in pool order as {@link Figures#memoryInfo} takes them, unless a
     * defragmentation holds one across device copies ({@link #moving}): then lets go of those taken. A
     * path that holds several pools' locks must never wait for a move while it holds another: the
     * figures, the close and the allocations of that other pool would wait for the device copy too,
     * for good on a wedged device.
     *
     * @return null with every lock held; else the pool a defragmentation holds, with no lock held
     *         (wait for it with {@link #awaitMoveEnd}, holding nothing, and take them all again)
     */
    static Pool acquireAllUnlessMoving(Pool[] pools) {
        int locked = 0;
        Pool moving = null;
        try {
            for (Pool pool : pools) {
                if (pool.acquireUnlessMoving() != null) {
                    moving = pool;
                    break;
                }
                locked++;
            }
        } finally {
            if (locked < pools.length) {
                for (int i = locked - 1; i >= 0; i--) {
                    pools[i].lock.unlock();
                }
            }
        }
        return moving;
    }

    /**
     * Waits, holding no pool's lock, until the defragmentation that holds this pool's lets go of it,
     * for at most {@code nanos} ({@link Long#MAX_VALUE}: for as long as it takes, uninterruptibly). An
     * interrupt ends a bounded wait; the flag stays set.
     *
     * @return true if the lock was free within that time (it is not kept)
     */
    boolean awaitMoveEnd(long nanos) {
        ReentrantLock l = lock;
        if (nanos == Long.MAX_VALUE) {
            l.lock();
            l.unlock();
            return true;
        }
        try {
            if (nanos > 0 && l.tryLock(nanos, TimeUnit.NANOSECONDS)) {
                l.unlock();
                return true;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return false;
    }

    /**
     * {@link #acquire} for a path whose caller must not be left holding the lock by a {@code
     * StackOverflowError} (the staged {@code withMapped} actions' hold, {@link DataPath}): the lock's
     * own critical sections run on the thread's reserved stack (JEP 270) and throw the overflow as
     * they return, the lock taken, where the caller's {@code finally} that unlocks is not yet in
     * force. That overflow lets the lock go here before it leaves. Reads the hold count first, so
     * not for the allocation paths.
     */
    void acquireOrLetGo() {
        ReentrantLock l = lock;
        int held = l.getHoldCount();
        try {
            acquire();
        } catch (StackOverflowError e) {
            if (l.getHoldCount() > held) {
                l.unlock();
            }
            throw e;
        }
    }

    /** @return the block size for a request: rounded up to the pool alignment and MIN_BLOCK */
    long blockSize(long requested) {
        return SizeClasses.blockSize(requested, SizeClasses.unit(config));
    }

    static long alignUp(long value, long alignment) {
        return SizeClasses.alignUp(value, alignment);
    }

    /** @return the largest free block's size, 0 if none */
    long largestFree() {
        return free.largest();
    }

    // ---------------------------------------------------------------- carve and release

    /**
     * Carves a live block of {@code size} bytes whose device address is a multiple of
     * {@code alignment}, from the free blocks of this pool.
     *
     * @return the new live block, or null when no free block fits
     */
    Block carve(long size, long alignment) {
        Block b = cut(size, alignment);
        if (b != null) {
            account.allocated(b.size);
        }
        return b;
    }

    /**
     * Compaction: carves the place a block of {@code size} bytes moves to, counted in this pool's
     * figures (read under its lock, which the move holds) but not in the device's account (read
     * without it: the cheap figures, the pressure level), which a move leaves as it was. The move
     * ends with {@link #vacated}, or with {@link #dropDestination} or {@link #keepDestinationOutOfUse}.
     *
     * @return the destination, or null when no free block fits
     */
    Block carveDestination(long size, long alignment) {
        return cut(size, alignment);
    }

    /** {@link #carve} but for the device's account. */
    private Block cut(long size, long alignment) {
        long unit = Math.max(config.alignment(), MIN_BLOCK);
        Block b = free.find(alignment <= unit ? size : size + alignment - MIN_BLOCK);
        if (b == null) {
            return null;
        }
        long pad = padTo(b, alignment);
        if (b.size - pad < size) {
            // A free block from before the pool's alignment was raised, or at the start of a chunk
            // less aligned than the pool: look again with room for the padding.
            b = free.find(size + alignment - MIN_BLOCK);
            if (b == null) {
                return null;
            }
            pad = padTo(b, alignment);
        }
        free.remove(b);
        if (pad > 0) {
            // Front padding stays free; the block proper starts after it.
            Block rest = new Block(b.chunk, b.offset + pad, b.size - pad);
            linkAfter(b, rest);
            b.size = pad;
            b.free = true;
            free.insert(b);
            b = rest;
        }
        if (b.size - size >= MIN_BLOCK) {
            Block tail = new Block(b.chunk, b.offset + size, b.size - size);
            tail.free = true;
            linkAfter(b, tail);
            b.size = size;
            free.insert(tail);
        }
        b.free = false;
        b.pool = this;
        b.chunk.usedBytes += b.size;
        used += b.size;
        live++;
        return b;
    }

    /** @return bytes from the start of free block {@code b} to its first address that is a multiple of {@code alignment} */
    private static long padTo(Block b, long alignment) {
        long address = b.chunk.device.address() + b.offset;
        return alignUp(address, alignment) - address;
    }

    /** Returns a live block's memory to the free lists, coalescing with free neighbours. */
    void release(Block b) {
        account.released(b.size);
        giveBack(b);
    }

    /** {@link #release} but for the device's account. */
    private void giveBack(Block b) {
        b.chunk.usedBytes -= b.size;
        used -= b.size;
        live--;
        if (used <= gcLine) {
            gcArmed = true;
        }
        b.free = true;
        b.handleId = 0;
        b.aliasId = 0;
        if (b.issuer != null) {
            b.issuer = null; // written only when set: a volatile store costs every release a fence
        }
        b.mapping = null;
        b.access = null;
        b.hint = null;
        b.allocationSite = null;
        b.freePending = false;
        b.scrubbed = false;
        coalesceAndList(b);
    }

    private void coalesceAndList(Block b) {
        Block prev = b.prevPhys;
        if (prev != null && prev.free) {
            free.remove(prev);
            prev.size += b.size;
            unlink(b);
            b = prev;
        }
        Block next = b.nextPhys;
        if (next != null && next.free) {
            free.remove(next);
            b.size += next.size;
            unlink(next);
        }
        free.insert(b);
    }

    private static void linkAfter(Block b, Block added) {
        added.prevPhys = b;
        added.nextPhys = b.nextPhys;
        if (b.nextPhys != null) {
            b.nextPhys.prevPhys = added;
        }
        b.nextPhys = added;
    }

    static void unlink(Block b) {
        if (b.prevPhys != null) {
            b.prevPhys.nextPhys = b.nextPhys;
        } else {
            b.chunk.first = b.nextPhys;
        }
        if (b.nextPhys != null) {
            b.nextPhys.prevPhys = b.prevPhys;
        }
        b.prevPhys = null;
        b.nextPhys = null;
    }

    // ---------------------------------------------------------------- chunks

    /** Adds a freshly reserved chunk that the CPU cannot address as one free block. */
    void addChunk(DeviceChunk device) {
        addChunk(device, null);
    }

    /**
     * Adds a freshly reserved chunk as one free block; {@code host} is its host view, or null.
     *
     * @return the pool's chunk
     */
    PoolChunk addChunk(DeviceChunk device, MemorySegment host) {
        PoolChunk chunk = new PoolChunk(device, host);
        Block whole = new Block(chunk, 0, chunk.size);
        whole.free = true;
        chunk.first = whole;
        chunks.add(chunk);
        reserved += chunk.size;
        account.held(chunk.size);
        free.insert(whole);
        return chunk;
    }

    /** @return the most bytes this pool may hold from the device under its configuration */
    long limit() {
        return limitOf(config);
    }

    /** @return the most bytes a pool may hold from the device under {@code cfg} */
    static long limitOf(MemoryPoolConfig cfg) {
        if (!cfg.enableAutoExpansion()) {
            return cfg.initialSize();
        }
        return cfg.maxSize().orElse(Long.MAX_VALUE);
    }

    /**
     * Plans a growth for a block needing {@code needed} bytes (alignment slack included) and books
     * it as pending.
     *
     * @return the chunk size to reserve, or 0 when the pool's limit leaves no room for it
     */
    long planGrowth(long needed, long chunkAlignment) {
        long min = alignUp(needed, chunkAlignment);
        long room = limit() - reserved - pending;
        if (min > room || min < 0) {
            return 0;
        }
        // A request of a quarter of the growth increment or more gets a chunk of its own size: carved
        // from a regular chunk it would leave a remainder that only smaller blocks can use.
        long wanted = reserved + pending == 0 && config.initialSize() >= needed
                ? config.initialSize()
                : needed >= config.growthIncrement() / 4 ? needed : config.growthIncrement();
        wanted = alignUp(wanted, chunkAlignment);
        long size = Math.max(min, Math.min(wanted, room & -chunkAlignment));
        pending += size;
        return size;
    }

    private static boolean isEmpty(PoolChunk c) {
        return c.first.free && c.first.nextPhys == null;
    }

    /**
     * Removes empty chunks beyond {@code keepBytes} of reservation and returns them for release
     * (outside the lock).
     */
    List<DeviceChunk> takeEmptyChunks(long keepBytes) {
        List<DeviceChunk> out = new ArrayList<>();
        for (int i = chunks.size() - 1; i >= 0; i--) {
            PoolChunk c = chunks.get(i);
            if (isEmpty(c) && !c.keptForCarve && reserved - c.size >= keepBytes) {
                free.remove(c.first);
                chunks.remove(i);
                reserved -= c.size;
                account.held(-c.size);
                out.add(c.device);
            }
        }
        return out;
    }

    /** Removes every chunk (for close) and returns them for release. */
    List<DeviceChunk> takeAllChunks() {
        List<DeviceChunk> out = new ArrayList<>(chunks.size());
        for (PoolChunk c : chunks) {
            out.add(c.device);
        }
        chunks.clear();
        free.clear();
        account.releasedAll(used, live);
        account.held(-reserved);
        reserved = 0;
        used = 0;
        live = 0;
        gcArmed = true;
        return out;
    }

    /** @return every live block (some handle still names it), in chunk and address order */
    List<Block> liveBlocks() {
        List<Block> out = new ArrayList<>();
        for (PoolChunk c : chunks) {
            for (Block b = c.first; b != null; b = b.nextPhys) {
                if (!b.free && b.isNamed()) {
                    out.add(b);
                }
            }
        }
        return out;
    }

    /** @return every block that is not free (live, freed while pinned, or in a thread cache), in chunk and address order */
    List<Block> allocatedBlocks() {
        List<Block> out = new ArrayList<>();
        for (PoolChunk c : chunks) {
            for (Block b = c.first; b != null; b = b.nextPhys) {
                if (!b.free) {
                    out.add(b);
                }
            }
        }
        return out;
    }

    /** @return free bytes inside the reserved chunks (blocks in thread caches are not free here) */
    long freeInReserved() {
        return reserved - used;
    }

    /**
     * Under the lock: the free bytes of this pool's chunks, and those of them that lie outside the
     * largest free run of their own chunk (the numerator of {@link Figures}' fragmentation). An empty
     * chunk, or one whose live blocks sit together with one free run after them, adds nothing to the
     * second. Walks every block.
     *
     * @param idleIsFree whether blocks in thread caches ({@link Block#isIdle}) count as free, as the
     *                   figures report them (caches on); a run is free and idle blocks side by side
     * @return {free bytes, scattered bytes}, each zero or more
     */
    long[] freeAndScattered(boolean idleIsFree) {
        long free = 0;
        long scattered = 0;
        for (PoolChunk c : chunks) {
            long largest = 0;
            long chunkFree = 0;
            long run = 0;
            for (Block b = c.first; b != null; b = b.nextPhys) {
                if (b.free || (idleIsFree && b.isIdle())) {
                    run += b.size;
                    chunkFree += b.size;
                    largest = Math.max(largest, run);
                } else {
                    run = 0;
                }
            }
            free += chunkFree;
            scattered += chunkFree - largest;
        }
        return new long[] {free, scattered};
    }

    /**
     * Under the lock, zeroing on free: compaction left a moved block's bytes in {@code b} (a free
     * block it took off the free lists; a destination it carved goes through {@link
     * #keepDestinationOutOfUse}) and the device failed to clear them. {@code b} stays out of use until close, counted as used, like a freed block whose
     * clearing failed ({@link Reclaimer}): listed free, the next owner would read them.
     */
    void keepOutOfUse(Block b) {
        if (b.free) {
            b.free = false;
            b.chunk.usedBytes += b.size;
            used += b.size;
            live++;
            account.allocated(b.size);
        }
        b.pool = this;
        b.requested = b.size; // moved whole, should compaction move it (a place it may take)
        b.alignment = MIN_BLOCK;
    }

    /**
     * Compaction moved live block {@code b} away and left {@code moved}, the destination it carved
     * ({@link #carveDestination}), in {@code b}'s old place: that place is free space now (not
     * listed: the compactor lists it when it is done with the chunk). The device's account never
     * counted the destination, so the move leaves it as it was.
     */
    void vacated(Block moved) {
        moved.free = true;
        moved.chunk.usedBytes -= moved.size;
        used -= moved.size;
        live--;
    }

    /** A move that failed before anything moved: its destination ({@link #carveDestination}) is free again. */
    void dropDestination(Block dest) {
        giveBack(dest);
    }

    /**
     * Zeroing on free: a destination ({@link #carveDestination}) the device failed to clear stays out of
     * use until close ({@link #keepOutOfUse}), now counted in the device's account as well.
     */
    void keepDestinationOutOfUse(Block dest) {
        account.allocated(dest.size); // keepOutOfUse books only a block that was free
        keepOutOfUse(dest);
    }

    /** @return the pool's memory type */
    public MemoryType type() {
        return type;
    }
}
