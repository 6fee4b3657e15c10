package io.ferrum.memory.pool.internal;

import java.util.ArrayList;
import java.util.List;

import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.DeviceChunk;
import io.ferrum.memory.pool.DeviceUpstream;
import io.ferrum.memory.pool.PoolLog;

/**
 * The free path of one manager: claiming a handle, counting a block's names down, giving the memory
 * back (to the calling thread's cache or to its pool), and pins, whose last one releases a block
 * freed while it was pinned.
 *
 * <p><b>Names.</b> A block has one name (its handle) or two (a mapping's handle and its alias,
 * which may live in another manager's table). A free claims its name with one compare-and-set
 * ({@link Block#claim}): of two racing frees of one handle exactly one wins, and only the claim that
 * takes the count of names to zero gives the memory back ({@link #lastNameGone}).
 *
 * <p><b>Pins.</b> A copy, a zeroing fill or a scrub pins its blocks under the pool's lock and works
 * outside it; a pinned block is never moved, reused or released. A block freed while pinned is
 * marked {@link Block#freePending}; the last {@link #unpin} releases it. A freed block whose view a
 * native operation still uses ({@link Pool#stuckViews}) stays out of use until the view closes,
 * tried again on the pool's next free, trim, defragmentation or close.
 *
 * <p><b>Zeroing on free.</b> Freed memory is cleared ({@link #scrub}) pinned, outside the lock,
 * before it goes back; a block the device failed to clear stays out of use until close.
 */
final class Reclaimer {
    private final Checks checks;
    private final HandleTable handles;
    private final ThreadCaches caches;
    private final PressureNotifier pressure;
    private final Lifecycle lifecycle;
    private final IssuedAliases issuedAliases;
    private final DeviceUpstream upstream;
    private final PoolLog log;
    private final boolean zeroOnFree;

    Reclaimer(Checks checks, HandleTable handles, ThreadCaches caches, PressureNotifier pressure, Lifecycle lifecycle,
              IssuedAliases issuedAliases, DeviceUpstream upstream, PoolLog log, boolean zeroOnFree) {
        this.checks = checks;
        this.handles = handles;
        this.caches = caches;
        this.pressure = pressure;
        this.lifecycle = lifecycle;
        this.issuedAliases = issuedAliases;
        this.upstream = upstream;
        this.log = log;
        this.zeroOnFree = zeroOnFree;
    }

    /** @return the messages of this manager (a peer's block is reported by its own manager) */
    Checks checks() {
        return checks;
    }

    /** @return this manager's life, whose close a pool's last work may end */
    Lifecycle lifecycle() {
        return lifecycle;
    }

    /** @return the upstream of this manager's device, which holds the chunks of its pools' blocks */
    DeviceUpstream upstream() {
        return upstream;
    }

    /** Frees the name {@code handle} of live block {@code b}. */
    void free(Block b, MemoryHandle handle) {
        long id = handle.id();
        if ((b.scopes & Block.SCOPE_COUNT) != 0 && b.isNamedBy(id) && !Scopes.awaitNone(b)) {
            // A withMapped action, a read, a write or a copy is inside the block: refused, nothing changed.
            throw checks.inScope(handle);
        }
        // One compare-and-set decides which of two racing frees of this handle wins; the count of
        // names left decides which of a mapping's two handles, freed at once, gives the memory back.
        int left = b.claim(id);
        if (left < 0) {
            if (issuedAliases.forgetOrphan(id)) {
                return; // an alias whose block's manager closed just now: that close took the name
            }
            throw checks.invalidHandle(handle);
        }
        Pool pool = b.pool;
        if (pool.reclaimer != this) {
            // An alias this manager issued for a peer's block: the slot is ours, the memory the peer's,
            // which keeps nothing of this manager once the alias is gone.
            b.issuer = null;
            issuedAliases.remove(b, id);
            handles.recycleForeign(id);
            if (left == 0) {
                pool.reclaimer.lastNameGone(b, null);
            }
            return;
        }
        ThreadCache tc = caches.enabled() && pool.type != MemoryType.MAPPED ? caches.cache() : null;
        if (tc != null && tc.shared) {
            // A virtual thread's lease on a shared cache lasts this free only.
            boolean cached;
            try {
                cached = freeClaimed(b, id, left, pool, tc);
            } finally {
                tc.endLease();
            }
            if (cached) {
                pressure.checkOnCachePath(); // outside the lease: a callback may trim or allocate
            } else if (left == 0) {
                lastNameGone(b, null);
            }
        } else if (freeClaimed(b, id, left, pool, tc)) {
            pressure.checkOnCachePath();
        } else if (left == 0) {
            lastNameGone(b, tc);
        }
    }

    /** The rest of a free whose name {@code id} the caller claimed, {@code left} names remaining; {@code tc}: the caller's cache, or null. */
    private boolean freeClaimed(Block b, long id, int left, Pool pool, ThreadCache tc) {
        // Read after the claim: a pin or a map that raced with it either is seen here or sees the claim.
        ThreadCache home = b.cachedBy;
        if (home != null && home != tc && cacheable(b, left, pool, true) && home.owner.isAlive()
                && cache(b, id, pool, home, true)) {
            // Allocated by another thread from its cache: back to that cache, so that a pipeline
            // (one thread allocates, another frees) keeps both off the pool's lock.
            return true;
        }
        if (tc != null && cacheable(b, left, pool, tc.cachesLarge) && cache(b, id, pool, tc, false)) {
            return true;
        }
        handles.recycle(id, tc);
        return false;
    }

    /**
     * @return true if {@code b}, whose name is being freed ({@code left} names remain), may go to a
     *         thread cache: no other name, pin, mapping or scope, a cached size class, and an
     *         alignment the pool still honours (a block allocated before configurePool raised it goes
     *         to the pool; from a cache it would come back misaligned)
     */
    private static boolean cacheable(Block b, int left, Pool pool, boolean large) {
        long unit;
        return left == 0 && b.pins == 0 && b.mapping == null && b.scopes == 0 && b.hint == null
                && SizeClasses.cacheable(b.size, large)
                && b.alignment >= (unit = SizeClasses.unit(pool.config))
                && b.size == SizeClasses.classSize(b.size, unit);
    }

    /**
     * Puts {@code b} into {@code into}: pushed by the caller, its owner, or offered onto its inbound
     * stack by another thread. The tracker stays for the block's next allocation (reset then), and so
     * does the handle slot, which still points at the block: no reference store on the hot path
     * (under G1 a card mark per call), and no write to the handle table (its lines are shared); a slot
     * whose generations are spent retires, and the block takes a spare one next time.
     * @return true if the cache took it; false and nothing kept when it is full or closed
     */
    private boolean cache(Block b, long id, Pool pool, ThreadCache into, boolean offer) {
        if (b.hint != null) {
            b.hint = null;
        }
        boolean keep = HandleTable.reusable(id);
        b.keptId = keep ? id : 0;
        int p = pool.type.ordinal();
        if (offer ? into.offer(p, b) : into.push(p, b)) {
            if (!keep) {
                handles.retire();
            }
            return true;
        }
        b.keptId = 0;
        return false;
    }

    /** Gives a block taken from a thread cache back to its pool (its allocation failed). */
    void returnToPool(Block b) {
        Pool pool = b.pool;
        pool.acquire();
        try {
            handles.releaseKept(b);
            if (!pool.closed) {
                pool.release(b);
            }
        } finally {
            pool.lock.unlock();
        }
    }

    /**
     * The last handle of {@code b}, a block of this manager, was claimed: closes its views and gives
     * its memory back, at once or when its last pin goes, cleared first under zeroing on free.
     *
     * @param tc the calling thread's cache, told that it visits the pool lock; or null
     */
    void lastNameGone(Block b, ThreadCache tc) {
        Pool pool = b.pool;
        boolean released = false;
        boolean scrub = false;
        pool.acquire();
        if (tc != null) {
            caches.sawPoolLock(tc, pool);
        }
        List<Block> unstuck = null;
        List<DeviceChunk> closedRelease = null;
        try {
            MappingState mapping = b.mapping;
            // Close every view before the memory can go to anyone else, closed pool or not.
            if (mapping != null && !closeArena(b, mapping)) {
                // A native operation still uses a view (its arena cannot close): the memory stays out
                // of use until the view can close, which is tried again on the pool's next free, trim,
                // defragmentation or close.
                b.freePending = true;
                if (!pool.stuckViews.contains(b)) {
                    pool.stuckViews.add(b);
                }
                return;
            }
            if (pool.closed) {
                // The views a native operation held open kept a closed pool's chunks (Lifecycle); this
                // name's going (an alias freed in the peer, the peer's close) may be the moment they
                // can close: the pool's chunks go then, not only at a second close of this manager.
                closedRelease = Lifecycle.releaseIfDone(pool);
                return;
            }
            if (!pool.stuckViews.isEmpty()) {
                unstuck = unstick(pool);
            }
            if (Scopes.deferFree(b)) {
                // A scope that entered before the name went is still inside: the last to leave gives it back.
            } else if (b.pins > 0) {
                b.freePending = true;
            } else if (zeroOnFree || b.hint != null) {
                // Cleared (and its advice undone) outside the lock while pinned; the unpin after it
                // releases the block.
                b.freePending = true;
                b.pins++;
                pool.inflight++;
                scrub = true;
            } else {
                pool.release(b);
                released = true;
            }
        } finally {
            pool.lock.unlock();
            lifecycle.releaseDeferred(closedRelease);
        }
        if (scrub) {
            if (scrub(b)) {
                unpin(b);
            }
        } else if (released) {
            pressure.check();
        }
        if (unstuck != null) {
            for (Block u : unstuck) {
                lastNameGone(u, null);
            }
        }
    }

    /**
     * Under the pool's lock: closes the views of freed blocks that a native operation held open,
     * where it can now.
     *
     * @return the freed blocks whose views closed: the caller gives them back (outside the lock); or null
     */
    private static List<Block> unstick(Pool pool) {
        List<Block> out = null;
        for (var it = pool.stuckViews.iterator(); it.hasNext(); ) {
            Block b = it.next();
            MappingState m = b.mapping;
            if (m == null || closeArena(b, m)) {
                it.remove();
                b.freePending = false;
                if (out == null) {
                    out = new ArrayList<>();
                }
                out.add(b);
            }
        }
        return out;
    }

    /**
     * Under the pool's lock: closes the views of {@code m}, {@code b}'s mapping, and frees its staging
     * copy; the block is no longer mapped. A mapping whose copy is made or written back outside the
     * lock has no view open, and its copy is freed by the call that makes or writes it ({@link
     * Mappings#map}, {@link Mappings#unmap}).
     *
     * @return true if the views of {@code m} are closed now (they are not while a native operation uses one)
     */
    static boolean closeArena(Block b, MappingState m) {
        if (!m.inTransit()) {
            try {
                m.arena.close();
            } catch (IllegalStateException inUse) {
                return false;
            }
            if (m.stagingArena != null) {
                m.stagingArena.close(); // no view reaches it any more: views are bound to the other arena
            }
        }
        b.mapping = null;
        return true;
    }

    /** Gives back what the pools' stuck views held, where they closed since (trim, defragment). */
    void retryStuckViews(Pool[] pools) {
        for (Pool pool : pools) {
            List<Block> unstuck;
            pool.acquire();
            try {
                unstuck = pool.closed || pool.stuckViews.isEmpty() ? null : unstick(pool);
            } finally {
                pool.lock.unlock();
            }
            if (unstuck != null) {
                for (Block u : unstuck) {
                    lastNameGone(u, null);
                }
            }
        }
    }

    /** Marks a pinned block whose last name was claimed as freed: its last unpin releases it. */
    static void markFreed(Block b) {
        Pool pool = b.pool;
        pool.acquire();
        try {
            b.freePending = true;
        } finally {
            pool.lock.unlock();
        }
    }

    /**
     * Outside the lock, on a freed block that a scrub pinned: undoes the device advice of its usage
     * hint ({@link DeviceUpstream#unadvise}), so that its next owner does not inherit it, then
     * clears its bytes under zeroing on free.
     *
     * @return true if done (the caller unpins, which releases it); false if the device failed to
     * clear it: the block is unpinned and stays out of use until the manager closes (its bytes may
     * not be cleared, so no one else may have it)
     */
    private boolean scrub(Block b) {
        if (b.hint != null) {
            // Pinned and nameless: no advise can run on it any more, and the last unpin sees the null.
            b.hint = null;
            try {
                upstream.unadvise(b.chunk.device, b.offset, b.requested);
            } catch (RuntimeException e) {
                // A hint never changes contents: the block goes back all the same.
                log.warn(upstream.device() + ": the usage hint of a freed block of " + Bytes.exact(b.size)
                        + " could not be undone (" + e.getMessage() + ")", e);
            }
        }
        if (!zeroOnFree || b.scrubbed) {
            return true;
        }
        try {
            // The whole block, not only its requested bytes: compaction may have slid the block over
            // its own old bytes, which then lie past its requested ones (Compactor#swapDown).
            upstream.fill(b.chunk.device, b.offset, b.size, (byte) 0);
            b.scrubbed = true;
            return true;
        } catch (RuntimeException e) {
            log.warn(upstream.device() + ": a freed block of " + Bytes.exact(b.size) + " could not be cleared ("
                    + e.getMessage() + "); it stays out of use until the manager closes", e);
            Pool pool = b.pool;
            List<DeviceChunk> release;
            pool.acquire();
            try {
                b.pins--;
                b.freePending = false;
                release = Lifecycle.leave(pool);
            } finally {
                pool.lock.unlock();
            }
            lifecycle.releaseDeferred(release);
            return false;
        }
    }

    /**
     * Under the pool lock: the pool is open and {@code id} still names {@code b}, else the exception
     * that says why. A closed pool is reported as its own manager's ({@code id} may be an alias this
     * manager issued for a peer's block, and then the peer is the one closed).
     */
    void checkLive(Pool pool, Block b, long id) {
        if (pool.closed) {
            throw pool.reclaimer.checks.closed();
        }
        if (!b.isNamedBy(id)) {
            throw checks.invalidHandle(new MemoryHandle(id));
        }
    }

    /**
     * Pins live block {@code b} named {@code id}: it is neither moved, reused nor released until
     * {@link #unpin}. {@code id} may be an alias this manager issued for a peer's block: the pin is
     * work on the peer's pool.
     */
    void pin(Block b, long id) {
        Pool pool = b.pool;
        pool.acquire();
        try {
            checkLive(pool, b, id);
            b.pins++;
            pool.inflight++;
            if (!b.isNamedBy(id)) {
                // A free claimed the handle without the lock just now: it did not see this pin.
                b.pins--;
                Lifecycle.leave(pool);
                throw checks.invalidHandle(new MemoryHandle(id));
            }
        } finally {
            pool.lock.unlock();
        }
    }

    /**
     * Ends a pin. The last pin of a freed block releases it (clearing it first under zeroing on
     * free, pinned again for that); the last work on a closed pool releases its chunks. The block's
     * own manager does this (a peer pinned it through an alias): its zeroing policy clears the
     * block, its upstream takes the chunks back and its close ends.
     */
    void unpin(Block b) {
        Pool pool = b.pool;
        if (pool.reclaimer != this) {
            pool.reclaimer.unpin(b);
            return;
        }
        while (true) {
            boolean released = false;
            boolean scrub = false;
            List<DeviceChunk> release = null;
            pool.acquire();
            try {
                // A freed block whose views a native operation holds open (b.mapping kept) stays out of
                // use: the pool gives it back once the views close (Pool.stuckViews).
                if (b.pins == 1 && b.freePending && b.mapping == null && !pool.closed) {
                    if ((zeroOnFree && !b.scrubbed) || b.hint != null) {
                        scrub = true; // keeps its pin for the scrub
                    } else {
                        b.pins = 0;
                        pool.release(b);
                        released = true;
                    }
                } else {
                    b.pins--;
                }
                if (!scrub) {
                    release = Lifecycle.leave(pool);
                }
            } finally {
                pool.lock.unlock();
            }
            if (!scrub) {
                lifecycle.releaseDeferred(release);
                if (released) {
                    pressure.check();
                }
                return;
            }
            if (!scrub(b)) {
                return;
            }
        }
    }
}
