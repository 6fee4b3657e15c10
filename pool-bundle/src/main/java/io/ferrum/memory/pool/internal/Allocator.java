package io.ferrum.memory.pool.internal;

import java.util.function.LongSupplier;

import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.DeviceUpstream;

/**
 * The allocation path of one manager: the calling thread's cache first, else a carve from the pool
 * under its lock, growing it when nothing fits.
 *
 * <p><b>Steps</b> of a pool allocation ({@link #allocateIn}): 1. carve under the pool's lock; a block
 * found is named (its handle published), or, under zeroing on allocate, pinned to be cleared outside
 * the lock and named only once cleared (no handle, listed by {@code handles()} or guessed, reaches the
 * previous owner's bytes nor writes into them before the clearing). 2. Nothing fits: this thread's cache and the caches of threads that died go back to the
 * pools, and the carve is tried again. 3. Grow the pool ({@link Growth}). 4. Growth failed: the
 * {@link OutOfMemoryHook} gets one say (drain every cache, auto-GC), then one more try; else
 * out of memory, with the reason. After a carve that takes the pool above its auto-GC line, the
 * allocation runs auto-GC ({@link Maintenance#crossedGcLine}) before it returns.
 *
 * <p><b>Invariants.</b> A block is counted as named {@code names} times (2: a mapping, whose second
 * handle the caller issues) before its first handle is published, so no free of a guessed handle
 * can release it before the second exists. A block carved or taken from a cache for an allocation
 * that then fails (a full handle table, a failed clear) goes back: nothing is lost. The cached path
 * takes no lock, allocates nothing but the handle, and costs the pressure check two reads. A block
 * allocated with the calling thread's cache records it ({@link Block#cachedBy}): a free on another
 * thread returns it there, and a miss here takes those returns in ({@link ThreadCaches#refill}).
 */
final class Allocator {
    private final HandleTable handles;
    private final ThreadCaches caches;
    private final Reclaimer reclaimer;
    private final Growth growth;
    private final Maintenance maintenance;
    private final OutOfMemoryHook outOfMemory;
    private final PressureNotifier pressure;
    private final Checks checks;
    private final DeviceAccount account;
    private final Lifecycle lifecycle;
    private final DeviceUpstream upstream;
    private final LongSupplier clock;
    /** Allocation times come from the coarse clock when the settings use the system clock. */
    private final boolean coarseClock;
    private final boolean tracking;
    private final boolean debug;
    private final boolean zeroOnAllocate;

    Allocator(HandleTable handles, ThreadCaches caches, Reclaimer reclaimer, Growth growth, Maintenance maintenance,
              PressureNotifier pressure, Checks checks, DeviceAccount account, Lifecycle lifecycle, DeviceUpstream upstream,
              LongSupplier clock, boolean coarseClock, boolean tracking, boolean debug, boolean zeroOnAllocate) {
        this.handles = handles;
        this.caches = caches;
        this.reclaimer = reclaimer;
        this.growth = growth;
        this.maintenance = maintenance;
        this.outOfMemory = maintenance;
        this.pressure = pressure;
        this.checks = checks;
        this.account = account;
        this.lifecycle = lifecycle;
        this.upstream = upstream;
        this.clock = clock;
        this.coarseClock = coarseClock;
        this.tracking = tracking;
        this.debug = debug;
        this.zeroOnAllocate = zeroOnAllocate;
    }

    /** A checked request of {@code size} bytes at the pool's own alignment. */
    MemoryHandle allocate(Pool pool, long size, MemoryPoolConfig cfg) {
        long unit = SizeClasses.unit(cfg);
        if (!caches.enabled() || pool.type == MemoryType.MAPPED) {
            return allocateIn(pool, size, unit, pool.blockSize(size), null, 1, null);
        }
        long blockSize = SizeClasses.classSize(pool.blockSize(size), unit);
        ThreadCache tc = blockSize <= SizeClasses.MAX_BLOCK ? caches.cache() : null;
        if (tc != null) {
            MemoryHandle h;
            try {
                h = fromCache(tc, pool, size, unit, blockSize, cfg);
            } finally {
                if (tc.shared) {
                    tc.endLease();
                }
            }
            if (h != null) {
                pressure.checkOnCachePath(); // outside the lease: a callback may trim or allocate
                return h;
            }
            if (tc.shared) {
                // A virtual thread's lease on a shared cache lasts the cached path only: a carve from
                // the pool (which may grow it) runs without it.
                tc = null;
            }
        }
        return allocateIn(pool, size, unit, blockSize, tc, 1, null);
    }

    /** The cached path: a block of {@code blockSize} from {@code tc}, named; or null (a miss). */
    private MemoryHandle fromCache(ThreadCache tc, Pool pool, long size, long unit, long blockSize, MemoryPoolConfig cfg) {
        int p = pool.type.ordinal();
        Block b = tc.pop(p, blockSize);
        if (b == null && tc.hasInbound(p) && caches.refill(tc, pool)) {
            // Blocks that other threads freed for this one came in.
            b = tc.pop(p, blockSize);
        }
        if (b != null && b.alignment < unit) {
            // Cached by a free that read the pool's alignment just before configurePool raised it (after
            // the edit drained the caches): its address need not honour the new one. It goes back to the
            // pool, and the allocation carves there.
            reclaimer.returnToPool(b);
            return null;
        }
        if (b != null) {
            if (b.cachedBy != tc.home) {
                b.cachedBy = tc.home; // written only when it changes: the same-thread path stores nothing
            }
            b.requested = size;
            b.alignment = unit;
            b.allocatedAtNanos = now();
            track(b, cfg);
            long id;
            try {
                id = handles.registerCached(b, tc);
            } catch (RuntimeException e) {
                reclaimer.returnToPool(b); // a full handle table: the block must not be lost
                throw e;
            }
            if (lifecycle.unsettled && !lifecycle.admits()) {
                // Named outside the pools' locks: a close that did not see the name has begun. See
                // Lifecycle, "Closing only if unused".
                throw refusedAfterClose(b, id, 1);
            }
            return new MemoryHandle(id);
        }
        return null;
    }

    /**
     * A block named for an allocation that a close overtook: the name goes again (as a free racing
     * the close would), so that the close reports no allocation that no one was given.
     *
     * @param names the names the block was counted as (2: a mapping, whose second was never issued)
     * @return the refusal of the allocation
     */
    private RuntimeException refusedAfterClose(Block b, long id, int names) {
        try {
            for (int i = 1; i < names; i++) {
                b.dropUnissuedName();
            }
            reclaimer.free(b, new MemoryHandle(id));
        } catch (RuntimeException claimedByTheClose) {
            // the close unregistered the name first: the block goes with its pool
        }
        return checks.closed();
    }

    /** Gives a newly allocated block fresh access statistics when they are on, reusing its tracker if it has one. */
    private void track(Block b, MemoryPoolConfig cfg) {
        if (cfg.enableStats() && tracking) {
            AccessTracker t = b.access;
            if (t == null) {
                b.access = new AccessTracker();
            } else {
                t.reset();
            }
        } else if (b.access != null) {
            b.access = null;
        }
    }

    /** @return now, for an allocation time: to about a millisecond with the system clock, else the settings' clock */
    private long now() {
        return coarseClock ? CoarseClock.nanos() : clock.getAsLong();
    }

    /**
     * Carves from the pool under its lock, growing it if needed; {@code tc}, if any, lends a handle
     * slot. The block is counted as named {@code names} times before its first handle is published.
     *
     * @param carved where to put the block (a mapping's second handle is issued for it), or null
     */
    MemoryHandle allocateIn(Pool pool, long size, long alignment, long blockSize, ThreadCache tc, int names,
                            Block[] carved) {
        boolean hookTried = false;
        boolean ownDrained = false;
        boolean zero = zeroOnAllocate;
        // The chunk this allocation's growth added, kept from trims until it carves again; null until it grows.
        PoolChunk[] grown = null;
        while (true) {
            Block b;
            long id = 0;
            boolean gc = false;
            pool.acquire();
            if (tc != null) {
                caches.sawPoolLock(tc, pool);
            }
            try {
                if (grown != null && grown[0] != null) {
                    // Under the lock until the carve below: it lands in the chunk unless another took room there.
                    grown[0].keptForCarve = false;
                    grown[0] = null;
                }
                if (pool.closed) {
                    throw checks.closed();
                }
                b = pool.carve(blockSize, alignment);
                if (b != null) {
                    if (b.cachedBy != tc) {
                        b.cachedBy = tc;
                    }
                    b.requested = size;
                    b.alignment = alignment;
                    b.allocatedAtNanos = now();
                    track(b, pool.config);
                    if (debug) {
                        b.allocationSite = new Throwable("allocated here");
                    }
                    if (!zero) {
                        try {
                            id = tc != null ? handles.register(b, tc) : handles.register(b, names);
                        } catch (RuntimeException e) {
                            pool.release(b); // a full handle table: the carved block must not be lost
                            throw e;
                        }
                    } else {
                        // Pinned while it is cleared outside the lock: compaction cannot move it, nor
                        // close release its chunk, under the fill. Named after the fill.
                        b.pins++;
                        pool.inflight++;
                    }
                    if (carved != null) {
                        carved[0] = b;
                    }
                    gc = pool.crossedGcLine();
                }
            } finally {
                pool.lock.unlock();
            }
            if (b != null) {
                if (zero) {
                    boolean named = false;
                    RuntimeException overtaken = null;
                    try {
                        upstream.fill(b.chunk.device, b.offset, size, (byte) 0);
                        id = tc != null ? handles.register(b, tc) : handles.register(b, names);
                        named = true;
                        // Named outside the lock, as on the cached path; asked while still pinned, so
                        // that a close waits for the name to go before it looks for live blocks.
                        if (lifecycle.unsettled && !lifecycle.admits()) {
                            overtaken = refusedAfterClose(b, id, names);
                        }
                    } finally {
                        if (!named) {
                            // The device failed to clear it, or the handle table is full: the
                            // allocation fails and the block goes back (its last unpin releases it).
                            Reclaimer.markFreed(b);
                        }
                        reclaimer.unpin(b);
                    }
                    if (overtaken != null) {
                        throw overtaken;
                    }
                }
                if (gc) {
                    maintenance.crossedGcLine(pool);
                }
                pressure.check();
                return new MemoryHandle(id);
            }
            if (!ownDrained) {
                ownDrained = true;
                // Before the pool grows, the blocks this thread keeps and those of threads that have
                // died go back to it: a cache must not make the pool larger than the same calls without it.
                ThreadCache own = caches.own();
                boolean drained = own != null && own.count() > 0;
                if (drained) {
                    caches.drain(own);
                }
                drained |= caches.drainShared();
                if (caches.sweepDead() || drained) {
                    continue;
                }
            }
            // Room for the padding when the block's alignment is more than the pool's (free blocks
            // start at multiples of the pool's) or than the chunks' (a new chunk's start).
            long unit = SizeClasses.unit(pool.config);
            long needed = blockSize + (alignment > unit || alignment > account.chunkAlignment()
                    ? alignment - Pool.MIN_BLOCK : 0);
            if (grown == null) {
                grown = new PoolChunk[1];
            }
            String failure = growth.grow(pool, needed, grown);
            if (failure == null) {
                continue;
            }
            if (!hookTried) {
                hookTried = true;
                if (outOfMemory.growthFailed(pool)) {
                    continue;
                }
            }
            throw checks.outOfMemory(size, pool.type, failure, caches.reportedUsed(account));
        }
    }
}
