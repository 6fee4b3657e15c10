package io.ferrum.memory.pool.internal;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;

import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.OutOfDeviceMemoryException;
import io.ferrum.memory.pool.DeviceChunk;
import io.ferrum.memory.pool.DeviceUpstream;

/**
 * Growing a pool from the upstream: one new chunk per growth, sized by {@link Pool#planGrowth}.
 *
 * <p><b>Steps.</b> 1. Under the pool's lock: if a growth in flight already books room for the block
 * ({@link Pool#pending}), wait for it and carve again instead of reserving a second chunk (four
 * threads' first allocations would reserve four); else plan the chunk within the pool's limit, book
 * it as pending and count the growth as in-flight work. 2. Outside the lock: book the chunk in the
 * {@link DeviceAccount} (shrinking towards what the block needs if that is all the device has),
 * reserve it from the upstream, clear it under zeroing on free, ask for its host view. 3. Under the lock again: add the
 * chunk (even to a closed pool: the close releases it, now or when this work ends) unless an edit
 * lowered the pool's limit meanwhile below it (then it goes back, and the allocation carves and
 * grows again under the new limit), unbook the pending size, wake the waiters, leave the in-flight
 * work. The chunk is kept from trims until the allocation that grew it has carved again under the
 * lock ({@link PoolChunk#keptForCarve}): a trim in between would give it back empty, and the
 * allocation reserve another.
 *
 * <p><b>Invariants.</b> Limits hold under any concurrency: a pool's reserved plus pending bytes
 * never exceed its limit, the account's reserved bytes never exceed the device capacity. Whatever
 * fails during a growth, an {@code Error} too, gives the booked capacity back. A refusal comes back
 * as the reason (for the out-of-memory message), never as an exception; a backend whose classes
 * went away under the call (its bundle was refreshed) gives {@code DeviceUnavailableException}.
 */
final class Growth {
    private final DeviceUpstream upstream;
    private final DeviceAccount account;
    private final Checks checks;
    private final Lifecycle lifecycle;
    /** Free memory holds only zeros: a new chunk is cleared first (the upstream's need not be). */
    private final boolean zeroOnFree;
    /** For the used bytes a refusal reports: the figures', blocks in thread caches left out. */
    private final ThreadCaches caches;

    /**
     * A chunk new from the upstream and its host view ({@link DeviceUpstream#hostSegment}), asked for
     * with the chunk outside the pools' locks: a backend's may be slow, or call back.
     *
     * @param host the chunk as host memory, or null when the CPU cannot address it
     */
    record Reserved(DeviceChunk chunk, MemorySegment host) {
    }

    Growth(DeviceUpstream upstream, DeviceAccount account, Checks checks, Lifecycle lifecycle, ThreadCaches caches,
           boolean zeroOnFree) {
        this.caches = caches;
        this.upstream = upstream;
        this.account = account;
        this.checks = checks;
        this.lifecycle = lifecycle;
        this.zeroOnFree = zeroOnFree;
    }

    /**
     * Reserves a new chunk for the pool so that a block of {@code needed} bytes fits.
     *
     * @param grown where the chunk added goes, kept from trims ({@link PoolChunk#keptForCarve}) until
     *              the caller, under the pool's lock, has carved again and cleared it; null: not kept
     *              (a pre-allocation carves nothing)
     * @return null on success (or after waiting for another growth, or giving back a chunk a lowered
     *         limit no longer admits: carve again), else why not
     */
    String grow(Pool pool, long needed, PoolChunk[] grown) {
        long planned;
        pool.acquire();
        try {
            if (pool.closed) {
                throw checks.closed();
            }
            if (pool.pending >= needed) {
                pool.grown.awaitUninterruptibly();
                if (pool.closed) {
                    throw checks.closed();
                }
                return null;
            }
            planned = pool.planGrowth(needed, account.chunkAlignment());
            if (planned == 0) {
                return Checks.poolAtLimit(pool);
            }
            pool.inflight++;
        } finally {
            pool.lock.unlock();
        }
        Reserved chunk = null;
        String failure = null;
        try {
            long size = account.book(planned, needed);
            if (size == 0) {
                failure = checks.deviceFull(account.held(), account.reserved());
            } else {
                try {
                    chunk = reserveChunk(size, pool.type);
                } catch (OutOfDeviceMemoryException e) {
                    failure = Checks.chunkRefused(size, e);
                } catch (LinkageError e) {
                    throw checks.backendGone(e);
                } finally {
                    // Any failure, an Error too: the booked capacity goes back.
                    if (chunk == null) {
                        account.unbook(size);
                    }
                }
            }
        } finally {
            List<DeviceChunk> release = null;
            DeviceChunk beyondLimit = null;
            pool.acquire();
            try {
                pool.pending -= planned;
                if (chunk != null && !pool.closed && pool.reserved + chunk.chunk().size() > pool.limit()) {
                    // An edit lowered the pool's limit while the device was asked: planned under the old
                    // one, the chunk would take the pool above the new one, and its block the used bytes
                    // above what the edit's check vouched for. It goes back; the allocation carves and
                    // grows again under the new limit (a smaller chunk may fit it: no refusal here).
                    beyondLimit = chunk.chunk();
                } else if (chunk != null) {
                    PoolChunk added = pool.addChunk(chunk.chunk(), chunk.host());
                    if (grown != null) {
                        added.keptForCarve = true;
                        grown[0] = added;
                    }
                }
                pool.grown.signalAll();
                if (beyondLimit == null) {
                    release = Lifecycle.leave(pool);
                }
            } finally {
                pool.lock.unlock();
            }
            if (beyondLimit != null) {
                // Released before the work ends: a close waits for it, and the upstream closes after. The
                // work ends whatever the release throws (an Error of a backend whose classes went away).
                try {
                    lifecycle.releaseChunks(List.of(beyondLimit));
                } finally {
                    lifecycle.leaveLocking(pool);
                }
            } else {
                lifecycle.releaseDeferred(release);
            }
        }
        Runnable hook = grownForTests;
        if (hook != null && chunk != null) {
            hook.run();
        }
        return failure;
    }

    /**
     * Tests: run by a growth that added its chunk, once it let go of the pool's lock, before its
     * allocation carves again (a trim forced there); null otherwise (read once per growth).
     */
    static volatile Runnable grownForTests;

    /**
     * Pre-allocation at start: each pool with an entry of its own in the configuration (not one
     * that inherits GENERAL's) that asks for it reserves its initial size.
     */
    void preAllocate(Pool[] pools, MemoryManagerConfig config) {
        for (Map.Entry<MemoryType, MemoryPoolConfig> e : config.poolConfigs().entrySet()) {
            if (e.getValue().preAllocate() && e.getValue().initialSize() > 0) {
                reserveUpTo(pools[e.getKey().ordinal()], e.getValue().initialSize());
            }
        }
    }

    /** Grows the pool until it holds {@code bytes} (pre-allocation). */
    void reserveUpTo(Pool pool, long bytes) {
        long chunkAlignment = account.chunkAlignment();
        while (true) {
            long missing;
            pool.acquire();
            try {
                // A close overtook it (what it reserved goes with the pool). The manager is closed
                // before the close proper marks each pool: both are asked.
                if (pool.closed || lifecycle.closed) {
                    throw checks.closed();
                }
                missing = bytes - pool.reserved - pool.pending;
                while (missing <= 0 && pool.pending > 0) {
                    // Another growth in flight would cover it, but may fail: what it brings counts
                    // only once it is there.
                    pool.grown.awaitUninterruptibly();
                    if (pool.closed) {
                        throw checks.closed();
                    }
                    missing = bytes - pool.reserved - pool.pending;
                }
            } finally {
                pool.lock.unlock();
            }
            if (missing <= 0) {
                return;
            }
            String failure = grow(pool, Math.min(missing, Math.max(pool.config.initialSize(), chunkAlignment)), null);
            if (failure != null) {
                throw checks.preAllocationFailed(bytes, pool.type, failure, caches.reportedUsed(account));
            }
        }
    }

    /**
     * A live edit's pre-allocation ({@code configurePool}, {@code configurePools}): reserves what
     * {@code pool} lacks to hold {@code bytes}, as one chunk kept outside the pool. The pool keeps
     * its configuration meanwhile, so no allocation carves from the chunk, nor grows under the
     * edit's limits, before the edit is decided. Counted as the pool's in-flight work (a close waits
     * for it, and the upstream stays open); the caller ends it with {@link #addReserved} or
     * {@link #releaseReserved}.
     *
     * @param cfg the edit's configuration of the pool: its initial size is what the pool is to hold
     * @return the chunk and its host view, or null (nothing counted) when the pool holds that already
     * @throws io.ferrum.memory.api.MemoryException closed; the chunk would take the pool above the
     *         limit of {@code cfg} (chunks are whole multiples of the chunk alignment: refused as at
     *         start, {@link #reserveUpTo}); or the device cannot hold the chunk
     */
    Reserved reserveFor(Pool pool, MemoryPoolConfig cfg) {
        long bytes = cfg.initialSize();
        long size;
        pool.acquire();
        try {
            if (pool.closed || lifecycle.closed) {
                throw checks.closed();
            }
            if (bytes <= pool.reserved) {
                return null;
            }
            size = Pool.alignUp(bytes - pool.reserved, account.chunkAlignment());
            if (pool.reserved + size > Pool.limitOf(cfg)) {
                throw checks.preAllocationFailed(bytes, pool.type, Checks.poolAtLimit(pool.reserved, cfg),
                        caches.reportedUsed(account));
            }
            pool.inflight++;
        } finally {
            pool.lock.unlock();
        }
        Reserved chunk = null;
        try {
            if (account.book(size, size) == 0) {
                throw checks.preAllocationFailed(bytes, pool.type, checks.deviceFull(account.held(), account.reserved()),
                        caches.reportedUsed(account));
            }
            try {
                chunk = reserveChunk(size, pool.type);
            } catch (OutOfDeviceMemoryException e) {
                throw checks.preAllocationFailed(bytes, pool.type, Checks.chunkRefused(size, e),
                        caches.reportedUsed(account));
            } catch (LinkageError e) {
                throw checks.backendGone(e);
            } finally {
                if (chunk == null) {
                    account.unbook(size);
                }
            }
        } finally {
            if (chunk == null) {
                lifecycle.leaveLocking(pool);
            }
        }
        return chunk;
    }

    /**
     * Under {@code pool}'s lock, its edit taken: adds a chunk of {@link #reserveFor} if the pool's
     * (new) limit admits it, and ends that in-flight work.
     *
     * @return true if the pool took it; false: the caller gives it back with {@link #releaseReserved}
     *         (a growth since filled the pool), and the work is not ended yet
     */
    boolean addReserved(Pool pool, Reserved chunk) {
        if (pool.reserved + chunk.chunk().size() > pool.limit()) {
            return false;
        }
        pool.addChunk(chunk.chunk(), chunk.host());
        Lifecycle.leave(pool); // the pool is open (the caller checked): nothing to release
        return true;
    }

    /** Outside the locks: gives back a chunk of {@link #reserveFor} that no pool took, and ends its in-flight work. */
    void releaseReserved(Pool pool, Reserved chunk) {
        try {
            lifecycle.releaseChunks(List.of(chunk.chunk()));
        } finally {
            lifecycle.leaveLocking(pool); // whatever the release throws: a close waits for this work
        }
    }

    /**
     * Outside the locks: a chunk of {@code size} bytes from the upstream, cleared under zeroing on
     * free (a pool's free bytes are zero then), with its host view; a chunk that could not be
     * cleared, or whose view failed with an Error, goes back.
     */
    private Reserved reserveChunk(long size, MemoryType type) {
        DeviceChunk c = upstream.reserve(size, type);
        try {
            if (zeroOnFree) {
                upstream.fill(c, 0, c.size(), (byte) 0);
            }
            return new Reserved(c, hostView(c));
        } catch (RuntimeException | Error e) {
            upstream.release(c);
            throw e;
        }
    }

    /** @return the chunk as host memory, or null when the CPU cannot address it (then views stage through copies) */
    private MemorySegment hostView(DeviceChunk chunk) {
        try {
            return upstream.hostSegment(chunk).orElse(null);
        } catch (RuntimeException e) {
            return null;
        }
    }
}
