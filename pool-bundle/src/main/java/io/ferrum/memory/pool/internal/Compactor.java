package io.ferrum.memory.pool.internal;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;

import io.ferrum.memory.api.MemoryUsageHint;
import io.ferrum.memory.pool.DeviceChunk;
import io.ferrum.memory.pool.DeviceUpstream;
import io.ferrum.memory.pool.PoolLog;

/**
 * Defragmentation of a pool: moves live blocks so that its free space coalesces and its emptiest
 * chunks empty (a trim then gives them back).
 *
 * <p><b>Algorithm</b>, under the pool's lock: 1. <i>slide down</i>: in each chunk, a free block
 * followed by a movable live block swap places ({@code P - x(free) - n(live) - N} becomes
 * {@code P - n - x(free) - N}, then x merges with N), repeated to the chunk's end, so its live
 * blocks gather at its start; a block moves only to an address its alignment allows. 2. <i>evacuate
 * the emptiest</i>: chunks in order of used bytes; a chunk whose blocks are all movable and whose
 * used bytes fit in the free space of the fuller chunks (never into emptier or empty ones: that
 * would only move data around without letting a chunk go) has each block carved anew there and
 * copied; the free blocks of the chunks being emptied stay unlisted meanwhile, so no carve lands in
 * them. A move changes none of the device's lock-free figures ({@link Pool#carveDestination}): read
 * mid-move, the cheap figures and the pressure level never count the moving block twice.
 *
 * <p><b>Invariants.</b> A block moves only when {@link Block#isMovable()}: not pinned (no copy or
 * fill runs on it), not mapped (a view points at its address), not freed-while-pinned. A moved
 * block keeps its identity (only chunk and offset change), so its handle stays valid and its bytes
 * move with it; the upstream's copy must have memmove semantics for overlapping ranges. Under
 * zeroing on free, the bytes a block leaves behind are cleared before that place is listed free
 * (free memory holds only zeros); a place the device fails to clear stays out of use until close
 * ({@link Pool#keepOutOfUse}), and the error goes to the caller. A copy the device fails moves
 * nothing: the blocks stay where they were, every free block listed (under zeroing on free, once
 * cleared of what the copy may have written; out of use if that fails too), and the error goes to
 * the caller.
 */
final class Compactor {
    private final DeviceUpstream upstream;
    /** Clear the bytes a moved block leaves behind (zeroing on free). */
    private final boolean scrub;
    private final PoolLog log;

    Compactor(DeviceUpstream upstream, boolean scrub, PoolLog log) {
        this.upstream = upstream;
        this.scrub = scrub;
        this.log = log;
    }

    /**
     * Under {@code pool}'s lock: moves its movable live blocks so that free space coalesces.
     *
     * @return live blocks moved, each counted once however often it moved (a block may slide down
     *         and then be evacuated to another chunk); a block in a thread cache may move too, but
     *         it is no live block (the figures count it as free) and is not counted
     */
    long compact(Pool pool) {
        Set<Block> moved = Collections.newSetFromMap(new IdentityHashMap<>());
        for (PoolChunk c : pool.chunks) {
            slideDown(pool, c, moved);
        }
        evacuateEmptiest(pool, moved);
        return moved.size();
    }

    private void slideDown(Pool pool, PoolChunk c, Set<Block> moved) {
        Block x = c.first;
        while (x != null) {
            Block n = x.nextPhys;
            // The claim last: it fails, changing nothing, while a scope is inside n.
            if (x.free && n != null && n.isMovable()
                    && (c.device.address() + x.offset) % n.alignment == 0 && n.claimForMove()) {
                try {
                    swapDown(pool, c, x, n);
                } finally {
                    n.endMove();
                }
                countMove(moved, n);
                // x is still the free block, now after n: keep sliding what follows it.
            } else {
                x = n;
            }
        }
    }

    /**
     * {@code P - x(free) - n(live) - N} becomes {@code P - n - x(free) - N}, then x merges with N.
     * Under zeroing on free, x is cleared of n's old bytes before it is listed; a device that fails
     * that leaves x out of use ({@link Pool#keepOutOfUse}), never listed with a previous owner's bytes.
     */
    private void swapDown(Pool pool, PoolChunk c, Block x, Block n) {
        FreeBlockIndex free = pool.free;
        long target = x.offset;
        long old = n.offset;
        // First the copy: a device that fails it leaves the blocks where they were.
        try {
            upstream.copy(c.device, old, c.device, target, n.requested);
        } catch (RuntimeException | Error e) {
            // It may have written part of n's bytes into x (those it wrote over n's own are n's).
            if (scrub && !clearAfterFailedCopy(c.device, target, Math.min(x.size, n.requested), e)) {
                free.remove(x);
                pool.keepOutOfUse(x);
            }
            throw e;
        }
        free.remove(x);
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
        moveAdvice(n, c.device, old);
        if (scrub) {
            // n's old place that its new one does not cover lies in x now: its whole old place, past
            // its requested bytes too (an earlier slide may have left its own old bytes there). Those
            // in n's new place are n's own: a scrub clears the whole block.
            long from = Math.max(old, x.offset);
            long end = old + n.size;
            if (end > from) {
                try {
                    upstream.fill(c.device, from, end - from, (byte) 0);
                } catch (RuntimeException | Error e) {
                    pool.keepOutOfUse(x);
                    throw e;
                }
            }
        }
        if (after != null && after.free) {
            free.remove(after);
            x.size += after.size;
            x.nextPhys = after.nextPhys;
            if (after.nextPhys != null) {
                after.nextPhys.prevPhys = x;
            }
        }
        free.insert(x);
    }

    /**
     * Zeroing on free, after a copy the device failed part-way: clears the free bytes it may have
     * written. @return true if cleared; false if the device failed that too (its error is added to
     * the copy's), and the caller keeps the place out of use
     */
    private boolean clearAfterFailedCopy(DeviceChunk chunk, long offset, long bytes, Throwable copyError) {
        try {
            upstream.fill(chunk, offset, bytes, (byte) 0);
            return true;
        } catch (RuntimeException | Error e) {
            copyError.addSuppressed(e);
            return false;
        }
    }

    /**
     * Empties the emptiest chunks into chunks that are fuller than they are (never into emptier or
     * empty ones: that would only move data around without letting a chunk go).
     */
    private void evacuateEmptiest(Pool pool, Set<Block> moved) {
        List<PoolChunk> byUse = new ArrayList<>(pool.chunks);
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
                unlistFree(pool.free, byUse.get(j));
            }
            boolean emptied = true;
            try {
                for (Block b = c.first; b != null; b = b.nextPhys) {
                    if (b.free) {
                        continue;
                    }
                    // A scope may have entered since allMovable: then the chunk does not empty now.
                    if (!b.claimForMove()) {
                        emptied = false;
                        break;
                    }
                    Block dest;
                    try {
                        dest = pool.carveDestination(b.size, b.alignment);
                        if (dest == null) {
                            emptied = false;
                            break;
                        }
                        try {
                            upstream.copy(c.device, b.offset, dest.chunk.device, dest.offset, b.requested);
                        } catch (RuntimeException | Error e) {
                            // Nothing moved: the destination is free again, once cleared of what the
                            // copy may have written into it.
                            if (scrub && !clearAfterFailedCopy(dest.chunk.device, dest.offset, dest.size, e)) {
                                pool.keepDestinationOutOfUse(dest);
                            } else {
                                pool.dropDestination(dest);
                            }
                            throw e;
                        }
                        long from = b.offset;
                        swapPlaces(b, dest);
                        moveAdvice(b, c.device, from);
                    } finally {
                        b.endMove();
                    }
                    countMove(moved, b);
                    // dest now sits where b was, in c: free space once cleared (c's free blocks stay
                    // unlisted). A device that fails the clearing leaves it out of use, as carved.
                    if (scrub) {
                        try {
                            upstream.fill(c.device, dest.offset, dest.size, (byte) 0);
                        } catch (RuntimeException | Error e) {
                            pool.keepDestinationOutOfUse(dest);
                            throw e;
                        }
                    }
                    pool.vacated(dest);
                    b = dest;
                }
            } finally {
                // Also when the device failed a copy or a fill: no free block stays unlisted.
                for (int j = 0; j <= i; j++) {
                    relistFree(pool.free, byUse.get(j));
                }
            }
            if (!emptied) {
                break;
            }
        }
    }

    /**
     * A block with a usage hint moved from {@code from} at {@code offset}: the device advice, which
     * stays with the memory, is undone there (the next owner of those bytes must not inherit it)
     * and given again at the block's new place. A hint never changes contents: a device that fails
     * it is logged, and the move stands.
     */
    private void moveAdvice(Block b, DeviceChunk from, long offset) {
        MemoryUsageHint hint = b.hint;
        if (hint == null) {
            return;
        }
        try {
            upstream.unadvise(from, offset, b.requested);
            upstream.advise(b.chunk.device, b.offset, b.requested, hint);
        } catch (RuntimeException e) {
            log.warn(upstream.device() + ": the usage hint " + hint + " of a block of " + Bytes.exact(b.size)
                    + " did not follow it when defragmentation moved it (" + e.getMessage() + ")", e);
        }
    }

    /**
     * Counts a moved block as a live block relocated when a handle names it: a block in a thread
     * cache (no name, neither pinned nor mapped) moves like a live one, but activeAllocations leaves it out.
     */
    private static void countMove(Set<Block> moved, Block b) {
        if (b.isNamed()) {
            moved.add(b);
        }
    }

    private static boolean allMovable(PoolChunk c) {
        for (Block b = c.first; b != null; b = b.nextPhys) {
            if (!b.free && !b.isMovable()) {
                return false;
            }
        }
        return true;
    }

    private static void unlistFree(FreeBlockIndex free, PoolChunk c) {
        for (Block b = c.first; b != null; b = b.nextPhys) {
            if (b.free) {
                free.remove(b);
            }
        }
    }

    /** Merges adjacent free blocks of c and puts them back on the free lists. */
    private static void relistFree(FreeBlockIndex free, PoolChunk c) {
        Block b = c.first;
        while (b != null) {
            if (b.free) {
                while (b.nextPhys != null && b.nextPhys.free) {
                    Block n = b.nextPhys;
                    b.size += n.size;
                    Pool.unlink(n);
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
}
