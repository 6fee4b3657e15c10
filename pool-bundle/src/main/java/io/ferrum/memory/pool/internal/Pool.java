package io.ferrum.memory.pool.internal;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.DeviceChunk;
import io.ferrum.memory.pool.DeviceUpstream;

/**
 * The pool of one memory type on one device: the chunks it reserved and a TLSF (two-level
 * segregated fit) index of their free blocks.
 *
 * <p>TLSF keeps free blocks in 64 x 16 lists by size class: the first level is the power of two,
 * the second splits it in 16. Two bitmaps find the first non-empty list that is large enough in
 * O(1); freeing coalesces with both physical neighbours in O(1). Block sizes are multiples of the
 * pool's alignment (at least {@value #MIN_BLOCK} bytes) so that splitting never leaves slivers.
 *
 * <p>Everything here is guarded by {@link #lock}. Invariants, true whenever the lock is free:
 * <ul>
 *   <li>the blocks of a chunk tile it exactly, in address order, and no two adjacent blocks are both
 *       free (outside a defragmentation run);</li>
 *   <li>{@code used} = sum of sizes of non-free blocks = sum of {@code chunk.usedBytes};</li>
 *   <li>{@code reserved} = sum of chunk sizes; {@code reserved + pending <= limit}.</li>
 * </ul>
 */
public final class Pool {
    /** Smallest block, and the unit every block size and offset is a multiple of ({@link SizeClasses#MIN_BLOCK}). */
    public static final long MIN_BLOCK = SizeClasses.MIN_BLOCK;

    /** No thread id: thread ids are positive. */
    static final long NO_THREAD = -1;

    final MemoryType type;
    /** The manager whose device this pool's chunks are on (a peer's alias of a block frees through it). */
    final PoolEngine engine;
    final ReentrantLock lock = new ReentrantLock();
    /** Signalled when {@link #inflight} drops to zero, for close. */
    final Condition idle = lock.newCondition();
    /** Signalled when a growth ends, for allocations that waited for it rather than growing too. */
    final Condition grown = lock.newCondition();
    final List<PoolChunk> chunks = new ArrayList<>();
    /** The device-wide figures this pool's carves and releases add to. */
    private final DeviceAccount account;

    MemoryPoolConfig config;
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

    /** The free blocks of this pool's chunks. */
    final FreeBlockIndex free = new FreeBlockIndex();

    Pool(PoolEngine engine, MemoryType type, MemoryPoolConfig config, DeviceAccount account) {
        this.engine = engine;
        this.type = type;
        this.config = config;
        this.account = account;
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
        account.allocated(b.size);
        return b;
    }

    /** @return bytes from the start of free block {@code b} to its first address that is a multiple of {@code alignment} */
    private static long padTo(Block b, long alignment) {
        long address = b.chunk.device.address() + b.offset;
        return alignUp(address, alignment) - address;
    }

    /** Returns a live block's memory to the free lists, coalescing with free neighbours. */
    void release(Block b) {
        b.chunk.usedBytes -= b.size;
        used -= b.size;
        live--;
        account.released(b.size);
        b.free = true;
        b.handleId = 0;
        b.aliasId = 0;
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

    private static void unlink(Block b) {
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

    /** Adds a freshly reserved chunk as one free block. */
    void addChunk(DeviceChunk device) {
        PoolChunk chunk = new PoolChunk(device);
        Block whole = new Block(chunk, 0, chunk.size);
        whole.free = true;
        chunk.first = whole;
        chunks.add(chunk);
        reserved += chunk.size;
        free.insert(whole);
    }

    /** @return the most bytes this pool may hold from the device under its configuration */
    long limit() {
        if (!config.enableAutoExpansion()) {
            return config.initialSize();
        }
        return config.maxSize().orElse(Long.MAX_VALUE);
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
            if (isEmpty(c) && reserved - c.size >= keepBytes) {
                free.remove(c.first);
                chunks.remove(i);
                reserved -= c.size;
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
        reserved = 0;
        used = 0;
        live = 0;
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

    /** @return free bytes inside the reserved chunks */
    long freeInReserved() {
        return reserved - used;
    }

    // ---------------------------------------------------------------- compaction

    /**
     * Moves movable live blocks so free space coalesces: first each chunk slides its blocks towards
     * its start, then the emptiest chunks are evacuated into free space of fuller ones. Handles stay
     * valid (blocks keep their identity) and contents move with them. Runs under the lock; the
     * copies go to the upstream, which must give memmove semantics for overlapping ranges.
     *
     * @param scrub clear the bytes a moved block leaves behind (zeroing on free: free memory holds only zeros)
     * @return blocks moved
     */
    long compact(DeviceUpstream upstream, boolean scrub) {
        long moved = 0;
        for (PoolChunk c : chunks) {
            moved += slideDown(c, upstream, scrub);
        }
        moved += evacuateEmptiest(upstream, scrub);
        return moved;
    }

    private long slideDown(PoolChunk c, DeviceUpstream upstream, boolean scrub) {
        long moved = 0;
        Block x = c.first;
        while (x != null) {
            Block n = x.nextPhys;
            if (x.free && n != null && n.isMovable()
                    && (c.device.address() + x.offset) % n.alignment == 0) {
                // P - x(free) - n(live) - N  becomes  P - n - x(free) - N, then x merges with N.
                free.remove(x);
                long target = x.offset;
                upstream.copy(c.device, n.offset, c.device, target, n.requested);
                if (scrub) {
                    // The part of n's old bytes that its new place does not cover is free now.
                    long from = Math.max(n.offset, target + n.requested);
                    long end = n.offset + n.requested;
                    if (end > from) {
                        upstream.fill(c.device, from, end - from, (byte) 0);
                    }
                }
                Block p = x.prevPhys;
                Block after = n.nextPhys;
                n.prevPhys = p;
                if (p != null) {
                    p.nextPhys = n;
                } else {
                    c.first = n;
                }
                n.nextPhys = x;
                x.prevPhys = n;
                x.nextPhys = after;
                if (after != null) {
                    after.prevPhys = x;
                }
                n.offset = target;
                x.offset = target + n.size;
                if (after != null && after.free) {
                    free.remove(after);
                    x.size += after.size;
                    x.nextPhys = after.nextPhys;
                    if (after.nextPhys != null) {
                        after.nextPhys.prevPhys = x;
                    }
                }
                free.insert(x);
                moved++;
                // x is still the free block, now after n: keep sliding what follows it.
            } else {
                x = n;
            }
        }
        return moved;
    }

    /**
     * Empties the emptiest chunks into chunks that are fuller than they are (never into emptier or
     * empty ones: that would only move data around without letting a chunk go).
     */
    private long evacuateEmptiest(DeviceUpstream upstream, boolean scrub) {
        long moved = 0;
        List<PoolChunk> byUse = new ArrayList<>(chunks);
        byUse.sort(Comparator.comparingLong(c -> c.usedBytes));
        for (int i = 0; i < byUse.size(); i++) {
            PoolChunk c = byUse.get(i);
            if (c.usedBytes == 0 || !allMovable(c)) {
                continue;
            }
            // Destinations: the chunks after c in this order (at least as full), minus c itself.
            long room = 0;
            for (int j = i + 1; j < byUse.size(); j++) {
                room += byUse.get(j).size - byUse.get(j).usedBytes;
            }
            if (room < c.usedBytes) {
                continue;
            }
            for (int j = 0; j <= i; j++) {
                unlistFree(byUse.get(j));
            }
            boolean emptied = true;
            for (Block b = c.first; b != null; b = b.nextPhys) {
                if (b.free) {
                    continue;
                }
                Block dest = carve(b.size, b.alignment);
                if (dest == null) {
                    emptied = false;
                    break;
                }
                upstream.copy(c.device, b.offset, dest.chunk.device, dest.offset, b.requested);
                if (scrub) {
                    upstream.fill(c.device, b.offset, b.requested, (byte) 0);
                }
                swapPlaces(b, dest);
                // dest now sits where b was, in c: it is free space (c's free blocks stay unlisted).
                dest.free = true;
                c.usedBytes -= dest.size;
                used -= dest.size;
                live--;
                account.released(dest.size);
                b = dest;
                moved++;
            }
            for (int j = 0; j <= i; j++) {
                relistFree(byUse.get(j));
            }
            if (!emptied) {
                break;
            }
        }
        return moved;
    }

    private static boolean allMovable(PoolChunk c) {
        for (Block b = c.first; b != null; b = b.nextPhys) {
            if (!b.free && !b.isMovable()) {
                return false;
            }
        }
        return true;
    }

    private void unlistFree(PoolChunk c) {
        for (Block b = c.first; b != null; b = b.nextPhys) {
            if (b.free) {
                free.remove(b);
            }
        }
    }

    /** Merges adjacent free blocks of c and puts them back on the free lists. */
    private void relistFree(PoolChunk c) {
        Block b = c.first;
        while (b != null) {
            if (b.free) {
                while (b.nextPhys != null && b.nextPhys.free) {
                    Block n = b.nextPhys;
                    b.size += n.size;
                    unlink(n);
                }
                free.insert(b);
            }
            b = b.nextPhys;
        }
    }

    /** Exchanges the places (chunk, offset, neighbours) of two blocks of equal size. */
    private static void swapPlaces(Block a, Block b) {
        PoolChunk ac = a.chunk;
        long ao = a.offset;
        Block ap = a.prevPhys;
        Block an = a.nextPhys;
        PoolChunk bc = b.chunk;
        long bo = b.offset;
        Block bp = b.prevPhys;
        Block bn = b.nextPhys;

        place(b, ac, ao, ap, an);
        place(a, bc, bo, bp, bn);
        // Swapping the usedBytes accounting of the two chunks: a (live) moved to bc, b to ac.
        ac.usedBytes += b.size - a.size;
        bc.usedBytes += a.size - b.size;
    }

    private static void place(Block x, PoolChunk chunk, long offset, Block prev, Block next) {
        x.chunk = chunk;
        x.offset = offset;
        x.prevPhys = prev;
        x.nextPhys = next;
        if (prev != null) {
            prev.nextPhys = x;
        } else {
            chunk.first = x;
        }
        if (next != null) {
            next.prevPhys = x;
        }
    }

    /** @return the pool's memory type */
    public MemoryType type() {
        return type;
    }
}
