package io.ferrum.memory.pool.internal;

/**
 * The large-block rule: a thread caches blocks above {@link SizeClasses#MAX_CLASS} while another
 * thread shares its pools. When another thread's cache path held a pool's lock since this thread
 * last did, the pool's lock and free lists move between cores on every visit, whether or not anyone
 * waits (docs/PERFORMANCE.md items 4 and 7): caching large blocks saves those visits. A thread alone keeps
 * the exact fit of the pool.
 *
 * <p><b>Algorithm</b>, on each visit of a pool's lock by a cache's owner: 1. if the last cache path
 * to take this lock was another thread's, start caching large blocks and restart the count; 2. else,
 * every {@link #CHECK_EVERY} visits in a row, look at whether another live thread has called the
 * manager's caches since the last check (at the first check: ever), and cache large blocks only if
 * one has. A thread whose cache serves every call never takes the lock, yet the pool is not the other
 * thread's alone, so counting only visits to the lock is not enough (item 12).
 *
 * <p>State: per cache, in its owner-only fields {@code untilCheck} and {@code othersCalls}; per
 * pool, {@link Pool#lastCacheThread}. Stateless itself; one instance serves every engine.
 */
final class SharedPoolRule implements LargeBlockPolicy {
    /** Visits to a pool's lock in a row by one thread between two checks for other threads. */
    static final int CHECK_EVERY = 4096;

    static final SharedPoolRule INSTANCE = new SharedPoolRule();

    private SharedPoolRule() {
    }

    @Override
    public void started(ThreadCache tc) {
        tc.untilCheck = CHECK_EVERY;
    }

    @Override
    public void sawPoolLock(ThreadCache tc, Pool pool, Iterable<ThreadCache> caches) {
        long last = pool.lastCacheThread;
        if (last != tc.ownerId) {
            pool.lastCacheThread = tc.ownerId;
            if (last != Pool.NO_THREAD) {
                tc.cachesLarge = true;
                tc.untilCheck = CHECK_EVERY;
            }
        } else if (--tc.untilCheck <= 0) {
            tc.untilCheck = CHECK_EVERY;
            long others = 0;
            for (ThreadCache c : caches) {
                if (c != tc && c.owner.isAlive()) {
                    others += c.calls();
                }
            }
            tc.cachesLarge = others != tc.othersCalls;
            tc.othersCalls = others;
        }
    }
}
