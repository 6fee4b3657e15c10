package io.ferrum.memory.pool.internal;

import java.lang.invoke.VarHandle;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.IntSupplier;

import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.pool.DeviceChunk;

/**
 * The registry of one manager's per-thread caches ({@link ThreadCache}): finding or making the
 * calling thread's, draining them, sweeping those of threads that died, reading what they hold, and
 * letting go of them all at close.
 *
 * <p><b>Holders.</b> A thread's entry in {@link #localCache} is a one-element {@code Object[]}
 * holding its cache: close empties every holder, so a thread that outlives the manager keeps only a
 * JDK array in its thread-local map, never a class of this bundle (which would keep the whole bundle
 * revision in memory after an update).
 *
 * <p><b>Drains.</b> A drain gives a cache's blocks back to their pools. A cache is drained by its
 * owner, or by one sweeper at a time once its owner has died. {@link #drainAll} bumps
 * {@link #cacheEpoch}: every other thread drains its own cache on its next call, the caller at once.
 * The manager drains caches on trim, defragment, configurePool and before it reports out of memory.
 * A drain empties the cache's inbound stacks too (blocks other threads freed for it), and
 * {@link #drainAll} those of every live cache at once, which any thread may take under the pool's lock.
 * An owner's drain and a sweep pass over a pool whose lock a defragmentation holds across device
 * copies (its blocks stay cached; a dead thread's cache stays for a later sweep): they run on the
 * path of allocations and frees in every pool, which must not wait for a copy that may never return.
 *
 * <p><b>Virtual threads</b> get no cache of their own (there may be millions, and a cache per
 * virtual thread would hold its blocks after it ends): they share {@link #shared}, about two per
 * processor, each taken for one call by lease ({@link ThreadCache#tryLease}): the one of the CPU the
 * call runs on ({@link #cpu}; the thread's id where the CPU cannot be known), else the next; both
 * held, the call takes the pool path. Picking by CPU keeps a cache's blocks, and the lines of their
 * bytes, with one core: picked by thread id, the virtual threads of every carrier used every cache
 * in turn (docs/PERFORMANCE.md item 21). Nothing is kept per virtual thread or per carrier. Shared
 * caches are drained like the others (by whoever holds or can take the lease), counted in every
 * figure, and emptied at close. A caller runs nothing of the user's while it holds a lease (pressure
 * callbacks come after it is given back), so whatever a callback does can drain that cache too.
 *
 * <p><b>Invariants.</b> Every live cache is in {@link #caches} or {@link #shared}; after close none
 * is used and every holder is empty. Caches are off (this registry answers "none") when the
 * settings give them no bytes, under a zeroing policy, and with debug on.
 */
final class ThreadCaches {
    private final Pool[] pools;
    private final HandleTable handles;
    private final Lifecycle lifecycle;
    private final LargeBlockPolicy largeBlocks;
    private final long bytesPerThread;
    /** Null when caches are off. */
    private final ThreadLocal<Object[]> localCache;
    private final CopyOnWriteArrayList<ThreadCache> caches = new CopyOnWriteArrayList<>();
    /** The caches virtual threads share; a power of two of them, made on first use. */
    private final ThreadCache[] shared;
    /** The CPU the caller runs on (a hint), or a negative number where it cannot be known. */
    private final IntSupplier cpu;
    /** Bumped to make every thread drain its cache on its next call. */
    private volatile int cacheEpoch;

    ThreadCaches(Pool[] pools, HandleTable handles, Lifecycle lifecycle, LargeBlockPolicy largeBlocks,
                 long bytesPerThread, boolean enabled) {
        this(pools, handles, lifecycle, largeBlocks, bytesPerThread, enabled, CurrentCpu::id);
    }

    /** @param cpu the CPU the caller runs on, or a negative number where unknown (tests choose it) */
    ThreadCaches(Pool[] pools, HandleTable handles, Lifecycle lifecycle, LargeBlockPolicy largeBlocks,
                 long bytesPerThread, boolean enabled, IntSupplier cpu) {
        this.cpu = cpu;
        this.pools = pools;
        this.handles = handles;
        this.lifecycle = lifecycle;
        this.largeBlocks = largeBlocks;
        this.bytesPerThread = bytesPerThread;
        this.localCache = enabled ? new ThreadLocal<>() : null;
        int n = Integer.highestOneBit(Math.max(2, Runtime.getRuntime().availableProcessors() * 2 - 1)) << 1;
        this.shared = new ThreadCache[Math.min(n, 64)];
    }

    /** @return true when threads may cache blocks at all */
    boolean enabled() {
        return localCache != null;
    }

    /**
     * Caches on. @return the calling thread's cache, drained first if a drain was asked for since
     * its last call; for a virtual thread a shared cache whose lease it now holds (it ends the lease
     * with {@link ThreadCache#endLease}), or null when both it may take are held; null once closed
     */
    ThreadCache cache() {
        Thread t = Thread.currentThread();
        if (t.isVirtual()) {
            return lease(t);
        }
        Object[] holder = localCache.get();
        ThreadCache tc = holder == null ? null : (ThreadCache) holder[0];
        if (tc == null) {
            return holder == null ? newCache() : null;
        } else if (tc.epoch != cacheEpoch) {
            tc.epoch = cacheEpoch;
            drain(tc);
        }
        return tc;
    }

    /**
     * @return the shared cache of the CPU the caller runs on (or the one {@code t}'s id picks), or the
     *         next, leased to the caller and drained if asked; or null
     */
    private ThreadCache lease(Thread t) {
        if (lifecycle.closed) {
            return null;
        }
        int mask = shared.length - 1;
        int c = cpu.getAsInt();
        int at = (c >= 0 ? c : (int) (t.threadId() * 0x9E3779B97F4A7C15L >>> 40)) & mask;
        for (int i = 0; i < 2; i++) {
            ThreadCache tc = sharedAt((at + i) & mask);
            if (tc.tryLease()) {
                if (tc.epoch != cacheEpoch) {
                    tc.epoch = cacheEpoch;
                    drain(tc);
                }
                return tc;
            }
        }
        return null;
    }

    /** @return shared cache {@code i}, made if it does not exist yet */
    private ThreadCache sharedAt(int i) {
        ThreadCache tc = shared[i];
        if (tc == null) {
            synchronized (shared) {
                tc = shared[i];
                if (tc == null) {
                    tc = new ThreadCache(pools.length, bytesPerThread, cacheEpoch, true);
                    shared[i] = tc;
                }
            }
        }
        return tc;
    }

    /**
     * Gives back the blocks of every shared cache whose lease is free (one held is drained by its
     * holder's next lease after {@link #drainAll}). @return true if any held blocks
     */
    boolean drainShared() {
        if (localCache == null) {
            return false;
        }
        boolean any = false;
        for (ThreadCache tc : shared) {
            if (tc != null && tc.count() > 0 && tc.tryLease()) {
                try {
                    any = true;
                    drain(tc);
                } finally {
                    tc.endLease();
                }
            }
        }
        return any;
    }

    /** @return a new cache for the calling platform thread, or null (a closed manager) */
    private ThreadCache newCache() {
        if (lifecycle.closed) {
            return null;
        }
        // A thread that comes may follow threads that went: their blocks go back to the pools now,
        // not at the next trim (short-lived threads would otherwise grow the pools without bound).
        sweepDead();
        ThreadCache tc = new ThreadCache(pools.length, bytesPerThread, cacheEpoch);
        largeBlocks.started(tc);
        Object[] holder = {tc};
        tc.holder = holder;
        localCache.set(holder);
        caches.add(tc);
        if (lifecycle.closed) {
            // Close ran meanwhile and did not see this cache.
            holder[0] = null;
            caches.remove(tc);
            return null;
        }
        return tc;
    }

    /** @return the calling thread's cache if it has one, without creating it */
    ThreadCache own() {
        Object[] holder = localCache == null ? null : localCache.get();
        return holder == null ? null : (ThreadCache) holder[0];
    }

    /** The owner of {@code tc} holds {@code pool}'s lock on a call its cache could not serve. */
    void sawPoolLock(ThreadCache tc, Pool pool) {
        largeBlocks.sawPoolLock(tc, pool, caches);
    }

    /** Drains the caches of threads that have died and drops them. @return true if any held blocks */
    boolean sweepDead() {
        if (localCache == null) {
            return false;
        }
        boolean any = false;
        boolean swept = false;
        // One sweeper at a time: a dead thread's cache has no owner to order its draining.
        synchronized (caches) {
            for (ThreadCache tc : caches) {
                if (!tc.owner.isAlive()) {
                    any |= tc.count() > 0 || tc.inbound()[1] > 0;
                    if (!drain(tc, true)) {
                        continue; // a pool a defragmentation holds: the rest at a later sweep
                    }
                    handles.giveBackAll(tc);
                    caches.remove(tc);
                    swept = true;
                }
            }
        }
        if (swept) {
            // What the dead caches kept above a limit an edit lowered goes now, outside the monitor
            // (upstream calls), as an owner's drain gives it back.
            for (Pool pool : pools) {
                List<DeviceChunk> aboveLimit;
                if (pool.acquireUnlessMoving() != null) {
                    continue; // not waited for: see drain
                }
                try {
                    aboveLimit = takeAboveLimit(pool);
                } finally {
                    pool.lock.unlock();
                }
                releaseAboveLimit(pool, aboveLimit);
            }
        }
        return any;
    }

    /** Gives every block of {@code tc} back to its pool (the owner, or anyone once the owner has died). */
    void drain(ThreadCache tc) {
        drain(tc, false);
    }

    /**
     * Gives every block of {@code tc}, in its bins (the owner, or anyone once the owner has died) and
     * in its inbound stacks, back to its pool; {@code end}: closes the inbound stacks too (the cache
     * is being dropped). A pool whose lock a defragmentation holds across device copies is passed
     * over, its blocks left cached: a drain runs on the path of any allocation or free after {@link
     * #drainAll} (and a sweep under the registry's monitor, on a new thread's first call), which must
     * not wait for a device copy that may never return.
     *
     * @return true if every pool was drained; false if one was passed over
     */
    private boolean drain(ThreadCache tc, boolean end) {
        boolean all = true;
        for (Pool pool : pools) {
            int p = pool.type.ordinal();
            if (tc.count() == 0 && !tc.hasInbound(p) && !end) {
                continue;
            }
            List<DeviceChunk> aboveLimit = List.of();
            if (pool.acquireUnlessMoving() != null) {
                all = false;
                continue;
            }
            try {
                tc.drain(p, b -> giveBack(pool, b));
                giveBackInbound(pool, tc.takeInbound(p, end));
                if (!end) {
                    // A sweep of a dead thread's cache runs under the registry's monitor: its caller
                    // gives these back once it lets go of it (sweepDead).
                    aboveLimit = takeAboveLimit(pool);
                }
            } finally {
                pool.lock.unlock();
            }
            releaseAboveLimit(pool, aboveLimit);
        }
        return all;
    }

    /**
     * Under {@code pool}'s lock, after a drain: an edit lowered the pool's limit while a cache held
     * blocks of chunks it could not give back (only a cache's owner drains it, or a sweep once the
     * owner died); those that are empty now go, as the edit's trim would have given them (keeping a
     * pre-allocated initial size). Counted as in-flight work: a close waits until they are released.
     *
     * @return the chunks for {@link #releaseAboveLimit}; empty when the pool is within its limit
     */
    private static List<DeviceChunk> takeAboveLimit(Pool pool) {
        if (pool.closed || pool.reserved <= pool.limit()) {
            return List.of();
        }
        MemoryPoolConfig cfg = pool.config;
        List<DeviceChunk> out = pool.takeEmptyChunks(cfg.preAllocate() ? cfg.initialSize() : 0);
        if (!out.isEmpty()) {
            pool.inflight++; // the upstream closes after they are released
        }
        return out;
    }

    /** Outside the locks: releases what {@link #takeAboveLimit} took and ends that work, whatever the release throws. */
    private void releaseAboveLimit(Pool pool, List<DeviceChunk> chunks) {
        if (chunks.isEmpty()) {
            return;
        }
        try {
            lifecycle.releaseChunks(chunks);
        } finally {
            lifecycle.leaveLocking(pool);
        }
    }

    /** Under {@code pool}'s lock: a cached block goes back to its pool (a closed pool's memory goes with its chunks). */
    private void giveBack(Pool pool, Block b) {
        handles.releaseKept(b);
        if (!pool.closed) {
            pool.release(b);
        }
    }

    /** Under {@code pool}'s lock: the blocks of an inbound stack taken whole, from {@code top} down, go back to the pool. */
    private void giveBackInbound(Pool pool, Block top) {
        for (Block b = top; b != null; ) {
            Block next = b.nextReturned;
            b.nextReturned = null;
            giveBack(pool, b);
            b = next;
        }
    }

    /**
     * The owner of {@code tc}, on a miss: sorts the blocks that other threads freed for it in
     * {@code pool} into its bins, under the pool's lock, giving back to the pool what does not fit.
     *
     * @return true if any block came in (look in the bins again)
     */
    boolean refill(ThreadCache tc, Pool pool) {
        pool.acquire();
        try {
            return tc.refill(pool.type.ordinal(), b -> giveBack(pool, b));
        } finally {
            pool.lock.unlock();
        }
    }

    /** Gives back the blocks waiting in the inbound stacks of every live cache (trim, defragment, out of memory). */
    private void drainInbound() {
        for (ThreadCache tc : caches) {
            for (Pool pool : pools) {
                int p = pool.type.ordinal();
                if (!tc.hasInbound(p)) {
                    continue;
                }
                pool.acquire();
                try {
                    giveBackInbound(pool, tc.takeInbound(p, false));
                } finally {
                    pool.lock.unlock();
                }
            }
        }
    }

    /**
     * Drains the calling thread's cache and the caches of threads that have died, and asks every
     * other thread to drain its own on its next call.
     */
    void drainAll() {
        if (localCache == null) {
            return;
        }
        synchronized (caches) {
            cacheEpoch++;
        }
        ThreadCache own = own();
        if (own != null) {
            own.epoch = cacheEpoch;
            drain(own);
        }
        sweepDead();
        drainInbound();
        drainShared();
    }

    /** @return every live cache: the platform threads' and the shared ones made so far */
    private List<ThreadCache> all() {
        List<ThreadCache> out = new ArrayList<>(caches);
        for (ThreadCache tc : shared) {
            if (tc != null) {
                out.add(tc);
            }
        }
        return out;
    }

    /** @return bytes of blocks held in thread caches (a recent value) */
    long cachedBytes() {
        long bytes = 0;
        for (ThreadCache tc : all()) {
            bytes += tc.bytes() + tc.inbound()[0];
        }
        return bytes;
    }

    /**
     * @return the used bytes of {@code account} as the figures report them, blocks in thread caches
     *         left out (a recent value): for the free bytes a refusal names, which must be the figures'
     */
    long reportedUsed(DeviceAccount account) {
        return Math.max(0, account.used() - cachedBytes());
    }

    /** @return bytes and count of blocks held in thread caches, as {bytes, count}, each a recent value */
    long[] cached() {
        long bytes = 0;
        long count = 0;
        for (ThreadCache tc : all()) {
            long[] in = tc.inbound();
            bytes += tc.bytes() + in[0];
            count += tc.count() + in[1];
        }
        return new long[] {bytes, count};
    }

    /**
     * Bytes and count of blocks held in thread caches at one moment: no cache changed while they
     * were read (each cache's change counter read before and after; a block can move from one cache
     * to another between two reads, and would then count twice). With every pool lock held, this
     * moment is one of the pools' too. An inbound stack changes without the owner's counter, but
     * only by a push (a block whose name is already gone becomes cached) or under a pool lock.
     */
    long[] cachedAtOneMoment() {
        if (localCache == null) {
            return new long[2];
        }
        long[] last = null;
        for (int attempt = 0; attempt < 10_000; attempt++) {
            int n = 0;
            int[] seqs = new int[caches.size() + 8];
            boolean changing = false;
            List<ThreadCache> now = all();
            for (ThreadCache tc : now) {
                int q = tc.seq();
                changing |= (q & 1) != 0;
                if (n == seqs.length) {
                    seqs = Arrays.copyOf(seqs, n * 2);
                }
                seqs[n++] = q;
            }
            long bytes = 0;
            long count = 0;
            for (ThreadCache tc : now) {
                long[] in = tc.inbound();
                bytes += tc.bytes() + in[0];
                count += tc.count() + in[1];
            }
            last = new long[] {bytes, count};
            VarHandle.loadLoadFence();
            for (int i = 0; i < n && !changing; i++) {
                changing = now.get(i).seq() != seqs[i];
            }
            if (!changing) {
                return last;
            }
            Thread.onSpinWait();
        }
        return last; // a cache that never stood still: the last reading
    }

    /** Under {@code pool}'s lock: bytes of the pool's blocks held in thread caches. */
    long cachedBytesOf(Pool pool) {
        if (localCache == null) {
            return 0;
        }
        long cachedHere = 0;
        int p = pool.type.ordinal();
        for (ThreadCache tc : all()) {
            long b = -1;
            for (int attempt = 0; b < 0 && attempt < 10_000; attempt++) {
                b = tc.bytesOf(p);
            }
            cachedHere += Math.max(0, b) + tc.inboundBytes(p);
        }
        return cachedHere;
    }

    /**
     * Close: empties every thread's holder, not only the closing thread's (a thread that used this
     * manager and lives on must not keep its cache, and with it this bundle's classes). The blocks
     * in them are the pools', which the close releases whole.
     */
    void close() {
        // Shared caches are simply no longer leased (lease() answers null once closed); their blocks
        // are the pools', which the close releases whole.
        for (ThreadCache tc : caches) {
            for (Pool pool : pools) {
                tc.takeInbound(pool.type.ordinal(), true); // later offers fail: those frees find the pool closed
            }
            Object[] holder = tc.holder;
            if (holder != null) {
                holder[0] = null;
            }
        }
        caches.clear();
        if (localCache != null) {
            localCache.remove();
        }
    }
}
