package io.ferrum.memory.pool.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.VarHandle;
import java.time.Instant;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.HandleSpace;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryAccessStats;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryMapping;
import io.ferrum.memory.api.MemoryObserver;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.MemoryUsageHint;
import io.ferrum.memory.api.OutOfDeviceMemoryException;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.pool.DeviceChunk;
import io.ferrum.memory.pool.DeviceUpstream;
import io.ferrum.memory.pool.HostStreamManager;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.StreamExecutor;
import io.ferrum.memory.pool.PooledMemoryManager;
import io.ferrum.memory.pool.ZeroingPolicy;

/**
 * The pool engine: one {@link Pool} per memory type over one {@link DeviceUpstream}.
 *
 * <p>Concurrency rules (see docs/ARCHITECTURE.md): each pool has one lock, held only for
 * bookkeeping (carving, releasing, pinning), never across an upstream call except during
 * defragmentation of that pool. Copies pin their blocks under the lock and run outside it; a pinned
 * or mapped block is never moved or reused. Growth books its size as pending under the lock, asks
 * the upstream outside it, then adds the chunk: limits hold under any concurrency; an allocation
 * that finds a growth in flight large enough waits for it instead of growing too. Handle lookups
 * take no lock.
 *
 * <p>Work outside a pool's lock on its memory (a pin: a copy, a zeroing fill; a growth; a trim's
 * release) counts in {@link Pool#inflight}. {@link #close()} releases a pool's chunks only when that
 * count is zero: it waits for it, and after its wait (or at once, interrupted) leaves the release to
 * whoever ends the last such work; the upstream is closed after the last chunk is released.
 */
public final class PoolEngine implements PooledMemoryManager {
    private static final long CLOSE_WAIT_NANOS = TimeUnit.SECONDS.toNanos(30);

    private final DeviceUpstream upstream;
    private final Device device;
    private final MemoryManagerConfig config;
    private final PoolSettings settings;
    private final long capacity;
    private final long chunkAlignment;
    private final EnumMap<MemoryType, Pool> pools = new EnumMap<>(MemoryType.class);
    private final Pool[] poolList;
    private final HandleTable handles;
    private final Checks checks;
    /** Whether threads cache blocks above SizeClasses.MAX_CLASS. */
    private final LargeBlockPolicy largeBlocks = SharedPoolRule.INSTANCE;
    private final DeviceAccount account;
    /** The fragmentation ratio of the last full {@link #memoryInfo(Device)}, for {@link #quickInfo()}. */
    private volatile double lastFragmentation;
    private final StreamExecutor streams;
    private final boolean ownsStreams;
    private final Semaphore transfers;
    private final Instant epoch;
    private final long epochNanos;
    private final LongAdder copiedBytes = new LongAdder();
    private final LongAdder copyNanos = new LongAdder();
    private final CopyOnWriteArrayList<MemoryObserver> observers = new CopyOnWriteArrayList<>();
    /** Held by the one thread telling a pressure change; never an allocation lock, never waited for. */
    private final ReentrantLock pressureLock = new ReentrantLock();
    private volatile MemoryPressure lastPressure = MemoryPressure.LOW;
    private volatile Consumer<MemoryPressure> pressureCallback;
    private volatile boolean closed;
    /** The close itself and each pool whose release waits for its last work; the upstream closes at zero. */
    private final AtomicInteger closeHolds = new AtomicInteger(1);
    /**
     * Aliases this manager issued for blocks of other managers (a mapping across devices), with
     * their ids: they die when this manager closes, so the memory does not stay named forever.
     */
    private final ConcurrentHashMap<Block, Long> issuedAliases = new ConcurrentHashMap<>();
    /**
     * Per-thread caches of freed small blocks; null when the settings turn them off. A thread's entry
     * is a one-element {@code Object[]} holding its {@link ThreadCache}: close empties every holder,
     * so a thread that outlives the manager keeps only a JDK array in its thread-local map, never a
     * class of this bundle (which would keep the whole bundle revision in memory after an update).
     */
    private final ThreadLocal<Object[]> localCache;
    private final CopyOnWriteArrayList<ThreadCache> caches = new CopyOnWriteArrayList<>();
    /** Bumped to make every thread drain its cache on its next call. */
    private volatile int cacheEpoch;
    /** Below this many used bytes the pressure is LOW whatever the caches hold (capacity x MEDIUM's threshold, rounded down). */
    private final long lowBelow;
    /** Allocation times come from the coarse clock when the settings use the system clock. */
    private final boolean coarseClock;

    public PoolEngine(DeviceUpstream upstream, MemoryManagerConfig config, PoolSettings settings,
                      StreamExecutor streams) {
        this(upstream, config, settings, streams, null);
    }

    /** @param handles the handle table (tests: a small one), or null for a full-size one */
    PoolEngine(DeviceUpstream upstream, MemoryManagerConfig config, PoolSettings settings,
               StreamExecutor streams, HandleTable handles) {
        if (upstream == null || config == null || settings == null) {
            throw Checks.missingParts();
        }
        this.handles = handles != null ? handles : new HandleTable();
        this.upstream = upstream;
        this.device = upstream.device();
        this.config = config;
        this.settings = settings;
        long physical = upstream.physicalCapacity();
        this.capacity = settings.capacityBytes() > 0 ? Math.min(settings.capacityBytes(), physical) : physical;
        // One byte under the threshold so that rounding can only make the fast check ask for the exact one.
        this.lowBelow = capacity == 0 ? Long.MAX_VALUE
                : (long) Math.floor(capacity * (MemoryPressure.MEDIUM.thresholdPercent() / 100.0)) - 1;
        this.chunkAlignment = Math.max(upstream.chunkAlignment(), Pool.MIN_BLOCK);
        this.account = new DeviceAccount(capacity, chunkAlignment);
        this.checks = new Checks(device, capacity, chunkAlignment, this.handles, upstream.backendName());
        checks.chunkAlignment();
        this.ownsStreams = streams == null;
        this.streams = streams != null ? streams : new HostStreamManager(device);
        this.transfers = new Semaphore(config.maxConcurrentTransfers());
        this.epoch = Instant.now();
        this.epochNanos = settings.nanoClock().getAsLong();
        this.coarseClock = settings.nanoClock() == PoolSettings.SYSTEM_NANOS;
        if (coarseClock) {
            CoarseClock.acquire();
        }
        for (MemoryType type : MemoryType.values()) {
            pools.put(type, new Pool(this, type, config.poolConfig(type), account));
        }
        this.poolList = pools.values().toArray(new Pool[0]);
        this.localCache = settings.threadCacheBytes() > 0 && settings.zeroing() == ZeroingPolicy.NONE
                && !config.enableDebug() ? new ThreadLocal<>() : null;
        try {
            for (Map.Entry<MemoryType, MemoryPoolConfig> e : config.poolConfigs().entrySet()) {
                if (e.getValue().preAllocate() && e.getValue().initialSize() > 0) {
                    reserveUpTo(pools.get(e.getKey()), e.getValue().initialSize());
                }
            }
        } catch (RuntimeException e) {
            close();
            throw e;
        }
    }

    // ================================================================ checks

    private void checkOpen() {
        if (closed) {
            throw checks.closed();
        }
    }

    /** @return the live block named by {@code handle}, or an exception that says why there is none */
    private Block resolve(MemoryHandle handle) {
        checkOpen();
        checks.handle(handle);
        Block b = handles.lookup(handle.id());
        if (b == null) {
            throw checks.invalidHandle(handle);
        }
        return b;
    }

    // ================================================================ allocation

    @Override
    public Device device() {
        return device;
    }

    @Override
    public MemoryHandle allocate(long size, MemoryType type, Device d) {
        checkOpen();
        checks.device(d);
        Checks.type(type);
        Pool pool = pools.get(type);
        MemoryPoolConfig cfg = pool.config;
        checks.size(size, type, cfg);
        long unit = Math.max(cfg.alignment(), Pool.MIN_BLOCK);
        if (localCache == null || type == MemoryType.MAPPED) {
            return allocateIn(pool, size, unit, pool.blockSize(size), null, 1, null);
        }
        long blockSize = SizeClasses.classSize(pool.blockSize(size), unit);
        ThreadCache tc = blockSize <= SizeClasses.MAX_BLOCK ? cache() : null;
        if (tc != null) {
            Block b = tc.pop(type.ordinal(), blockSize);
            if (b != null) {
                b.requested = size;
                b.alignment = unit;
                b.allocatedAtNanos = allocationNanos();
                track(b, cfg);
                long id;
                try {
                    id = handles.registerCached(b, tc);
                } catch (RuntimeException e) {
                    returnToPool(b); // a full handle table: the block must not be lost
                    throw e;
                }
                checkPressureOnCachePath();
                return new MemoryHandle(id);
            }
        }
        return allocateIn(pool, size, unit, blockSize, tc, 1, null);
    }

    /** Gives a block taken from a thread cache back to its pool (its allocation failed). */
    private void returnToPool(Block b) {
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

    /** @return true if a block of {@code size} bytes may go to {@code tc} (large ones only while the thread caches them) */
    private static boolean cacheable(ThreadCache tc, long size) {
        return SizeClasses.cacheable(size, tc.cachesLarge);
    }

    /** Gives a newly allocated block fresh access statistics when they are on, reusing its tracker if it has one. */
    private void track(Block b, MemoryPoolConfig cfg) {
        if (cfg.enableStats() && config.enableTracking()) {
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
    private long allocationNanos() {
        return coarseClock ? CoarseClock.nanos() : settings.nanoClock().getAsLong();
    }

    /**
     * @return the calling thread's cache, drained first if a drain was asked for since its last
     * call; null for virtual threads (a cache each would hold too much) and when caches are off
     */
    private ThreadCache cache() {
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

    /** @return a new cache for the calling thread, or null (a virtual thread; a closed manager) */
    private ThreadCache newCache() {
        if (Thread.currentThread().isVirtual() || closed) {
            return null;
        }
        // A thread that comes may follow threads that went: their blocks go back to the pools now,
        // not at the next trim (short-lived threads would otherwise grow the pools without bound).
        sweepDeadCaches();
        ThreadCache tc = new ThreadCache(poolList.length, settings.threadCacheBytes(), cacheEpoch);
        largeBlocks.started(tc);
        Object[] holder = {tc};
        tc.holder = holder;
        localCache.set(holder);
        caches.add(tc);
        if (closed) {
            // Close ran meanwhile and did not see this cache.
            holder[0] = null;
            caches.remove(tc);
            return null;
        }
        return tc;
    }

    /** @return the calling thread's cache if it has one, without creating it */
    private ThreadCache ownCache() {
        Object[] holder = localCache == null ? null : localCache.get();
        return holder == null ? null : (ThreadCache) holder[0];
    }

    /**
     * Drains the caches of threads that have died and drops them. @return true if any held blocks
     */
    private boolean sweepDeadCaches() {
        boolean any = false;
        // One sweeper at a time: a dead thread's cache has no owner to order its draining.
        synchronized (caches) {
            for (ThreadCache tc : caches) {
                if (!tc.owner.isAlive()) {
                    any |= tc.count() > 0;
                    drain(tc);
                    handles.giveBackAll(tc);
                    caches.remove(tc);
                }
            }
        }
        return any;
    }

    /** Gives every block of {@code tc} back to its pool (the owner, or anyone once the owner has died). */
    private void drain(ThreadCache tc) {
        for (Pool pool : poolList) {
            if (tc.count() == 0) {
                return;
            }
            pool.acquire();
            try {
                tc.drain(pool.type.ordinal(), b -> {
                    handles.releaseKept(b);
                    if (!pool.closed) {
                        pool.release(b);
                    }
                });
            } finally {
                pool.lock.unlock();
            }
        }
    }

    /**
     * Drains the calling thread's cache and the caches of threads that have died, and asks every
     * other thread to drain its own on its next call.
     */
    private void drainCaches() {
        if (localCache == null) {
            return;
        }
        synchronized (caches) {
            cacheEpoch++;
        }
        ThreadCache own = ownCache();
        if (own != null) {
            own.epoch = cacheEpoch;
            drain(own);
        }
        sweepDeadCaches();
    }

    /** @return bytes and count of blocks held in thread caches, as {bytes, count}, each a recent value */
    private long[] cached() {
        long bytes = 0;
        long count = 0;
        for (ThreadCache tc : caches) {
            bytes += tc.bytes();
            count += tc.count();
        }
        return new long[] {bytes, count};
    }

    /**
     * Bytes and count of blocks held in thread caches at one moment: no cache changed while they
     * were read (each cache's change counter read before and after; a block can move from one cache
     * to another between two reads, and would then count twice). With every pool lock held, this
     * moment is one of the pools' too.
     */
    private long[] cachedAtOneMoment() {
        if (localCache == null) {
            return new long[2];
        }
        long[] last = null;
        for (int attempt = 0; attempt < 10_000; attempt++) {
            int n = 0;
            int[] seqs = new int[caches.size() + 8];
            boolean changing = false;
            List<ThreadCache> now = new ArrayList<>(caches);
            for (ThreadCache tc : now) {
                int q = tc.seq();
                changing |= (q & 1) != 0;
                if (n == seqs.length) {
                    seqs = java.util.Arrays.copyOf(seqs, n * 2);
                }
                seqs[n++] = q;
            }
            long bytes = 0;
            long count = 0;
            for (ThreadCache tc : now) {
                bytes += tc.bytes();
                count += tc.count();
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

    @Override
    public MemoryHandle allocateAligned(long size, long alignment, MemoryType type, Device d) {
        checkOpen();
        checks.device(d);
        Checks.type(type);
        Pool pool = pools.get(type);
        MemoryPoolConfig cfg = pool.config;
        checks.size(size, type, cfg);
        return allocateIn(pool, size, checks.alignment(alignment, cfg), pool.blockSize(size), null, 1, null);
    }

    /**
     * Carves from the pool under its lock, growing it if needed; {@code tc}, if any, lends a handle
     * slot. The block is counted as named {@code names} times (2: a mapping, whose second handle the
     * caller issues) before its first handle is published, so that no free of a guessed handle can
     * release it before the second exists.
     *
     * @param carved where to put the block (a mapping's second handle is issued for it), or null
     */
    private MemoryHandle allocateIn(Pool pool, long size, long alignment, long blockSize, ThreadCache tc, int names,
                                    Block[] carved) {
        boolean gcTried = false;
        boolean ownDrained = false;
        boolean zero = settings.zeroing() == ZeroingPolicy.ON_ALLOCATE;
        while (true) {
            Block b;
            long id = 0;
            pool.acquire();
            if (tc != null) {
                largeBlocks.sawPoolLock(tc, pool, caches);
            }
            try {
                if (pool.closed) {
                    throw checks.closed();
                }
                b = pool.carve(blockSize, alignment);
                if (b != null) {
                    b.requested = size;
                    b.alignment = alignment;
                    b.allocatedAtNanos = allocationNanos();
                    track(b, pool.config);
                    if (config.enableDebug()) {
                        b.allocationSite = new Throwable("allocated here");
                    }
                    try {
                        id = tc != null ? handles.register(b, tc) : handles.register(b, names);
                    } catch (RuntimeException e) {
                        pool.release(b); // a full handle table: the carved block must not be lost
                        throw e;
                    }
                    if (carved != null) {
                        carved[0] = b;
                    }
                    if (zero) {
                        // Pinned while it is cleared outside the lock: compaction cannot move it, nor
                        // close release its chunk, under the fill.
                        b.pins++;
                        pool.inflight++;
                    }
                }
            } finally {
                pool.lock.unlock();
            }
            if (b != null) {
                if (zero) {
                    boolean filled = false;
                    try {
                        upstream.fill(b.chunk.device, b.offset, size, (byte) 0);
                        filled = true;
                    } finally {
                        if (!filled && b.claim(id) >= 0) {
                            // The device failed to clear it: the allocation fails and the block goes back.
                            handles.recycle(id, null);
                            markFreed(b);
                        }
                        unpin(b);
                    }
                }
                checkPressure();
                return new MemoryHandle(id);
            }
            if (!ownDrained) {
                ownDrained = true;
                // Before the pool grows, the blocks this thread keeps and those of threads that have
                // died go back to it: a cache must not make the pool larger than the same calls without it.
                ThreadCache own = ownCache();
                boolean drained = own != null && own.count() > 0;
                if (drained) {
                    drain(own);
                }
                if (localCache != null && sweepDeadCaches() || drained) {
                    continue;
                }
            }
            // Room for the padding when the block's alignment is more than the pool's (free blocks
            // start at multiples of the pool's) or than the chunks' (a new chunk's start).
            long unit = Math.max(pool.config.alignment(), Pool.MIN_BLOCK);
            long needed = blockSize + (alignment > unit || alignment > chunkAlignment ? alignment - Pool.MIN_BLOCK : 0);
            String failure = grow(pool, needed);
            if (failure == null) {
                continue;
            }
            if (!gcTried) {
                gcTried = true;
                // Blocks cached by threads are memory too: take them back before giving up.
                drainCaches();
                if (config.enableAutoGc()) {
                    autoGc(pool);
                }
                continue;
            }
            throw checks.outOfMemory(size, pool.type, failure, account.used());
        }
    }

    /**
     * Reserves a new chunk for the pool so that a block of {@code needed} bytes fits.
     *
     * @return null on success, else why not
     */
    private String grow(Pool pool, long needed) {
        long planned;
        pool.acquire();
        try {
            if (pool.closed) {
                throw checks.closed();
            }
            if (pool.pending >= needed) {
                // A growth in flight can hold this block too: wait for it instead of reserving a
                // second chunk (four threads' first allocations would reserve four), then carve again.
                pool.grown.awaitUninterruptibly();
                if (pool.closed) {
                    throw checks.closed();
                }
                return null;
            }
            planned = pool.planGrowth(needed, chunkAlignment);
            if (planned == 0) {
                return Checks.poolAtLimit(pool);
            }
            pool.inflight++;
        } finally {
            pool.lock.unlock();
        }
        DeviceChunk chunk = null;
        String failure = null;
        try {
            long size = account.book(planned, needed);
            if (size == 0) {
                failure = checks.deviceFull(account.reserved());
            } else {
                try {
                    DeviceChunk c = upstream.reserve(size);
                    if (settings.zeroing() == ZeroingPolicy.ON_FREE) {
                        // Free memory holds only zeros under this policy; the upstream's need not.
                        try {
                            upstream.fill(c, 0, c.size(), (byte) 0);
                        } catch (RuntimeException | Error e) {
                            upstream.release(c);
                            throw e;
                        }
                    }
                    chunk = c;
                } catch (OutOfDeviceMemoryException e) {
                    failure = Checks.chunkRefused(size, e);
                } catch (LinkageError e) {
                    // The backend's classes went away under the call (its bundle was refreshed).
                    throw checks.backendGone(e);
                } finally {
                    // Any failure, an Error too: the booked capacity goes back.
                    if (chunk == null) {
                        account.unbook(size);
                    }
                }
            }
        } finally {
            List<DeviceChunk> release;
            pool.acquire();
            try {
                pool.pending -= planned;
                if (chunk != null) {
                    // Even into a closed pool: its close releases it, now or when this work ends.
                    pool.addChunk(chunk);
                }
                pool.grown.signalAll();
                release = leave(pool);
            } finally {
                pool.lock.unlock();
            }
            releaseDeferred(release);
        }
        return failure;
    }

    /**
     * Under the pool's lock: one piece of work outside the lock ({@link Pool#inflight}) has ended.
     *
     * @return the chunks to release, when it was the last work on a pool that close left to it; else null
     */
    private static List<DeviceChunk> leave(Pool pool) {
        if (--pool.inflight > 0) {
            return null;
        }
        pool.idle.signalAll();
        if (!pool.releaseWhenIdle || !pool.stuckViews.isEmpty()) {
            return null;
        }
        pool.releaseWhenIdle = false;
        return pool.takeAllChunks();
    }

    /** Outside the locks: releases what {@link #leave} handed over and ends the close when it was the last. */
    private void releaseDeferred(List<DeviceChunk> chunks) {
        if (chunks == null) {
            return;
        }
        releaseChunks(chunks);
        finishClose();
    }

    private void releaseChunks(List<DeviceChunk> chunks) {
        for (DeviceChunk c : chunks) {
            try {
                upstream.release(c);
            } catch (RuntimeException e) {
                settings.log().warn(device + ": releasing a chunk of " + c.size() + " bytes failed", e);
            }
            account.unbook(c.size());
        }
    }

    /** Drops one hold on the upstream (the close's own, or a pool's deferred release); the last closes it. */
    private void finishClose() {
        if (closeHolds.decrementAndGet() == 0) {
            try {
                upstream.close();
            } catch (RuntimeException e) {
                settings.log().warn(device + ": closing the upstream failed", e);
            }
        }
    }

    private void reserveUpTo(Pool pool, long bytes) {
        while (true) {
            long missing;
            pool.acquire();
            try {
                missing = bytes - pool.reserved - pool.pending;
            } finally {
                pool.lock.unlock();
            }
            if (missing <= 0) {
                return;
            }
            String failure = grow(pool, Math.min(missing, Math.max(pool.config.initialSize(), chunkAlignment)));
            if (failure != null) {
                throw checks.preAllocationFailed(bytes, pool.type, failure, account.used());
            }
        }
    }

    /** Auto-GC: give back empty chunks of every pool, compact the starved one. */
    private void autoGc(Pool starved) {
        trim();
        defragmentPool(starved);
    }

    @Override
    public void deallocate(MemoryHandle handle) {
        Block b = resolve(handle);
        long id = handle.id();
        // One compare-and-set decides which of two racing frees of this handle wins; the count of
        // names left decides which of a mapping's two handles, freed at once, gives the memory back.
        int left = b.claim(id);
        if (left < 0) {
            throw checks.invalidHandle(handle);
        }
        Pool pool = b.pool;
        if (pool.engine != this) {
            // An alias this manager issued for a peer's block: the slot is ours, the memory the peer's.
            issuedAliases.remove(b, id);
            handles.recycle(id, null);
            if (left == 0) {
                pool.engine.lastNameGone(b, null);
            }
            return;
        }
        ThreadCache tc = localCache != null && pool.type != MemoryType.MAPPED ? cache() : null;
        // Read after the claim: a pin or a map that raced with it either is seen here or sees the claim.
        long unit;
        // A block allocated before configurePool raised the alignment (b.alignment below the unit)
        // goes to the pool, which honours the new one; from a cache it would come back misaligned.
        if (tc != null && left == 0 && b.pins == 0 && b.mapping == null && cacheable(tc, b.size)
                && b.alignment >= (unit = Math.max(pool.config.alignment(), Pool.MIN_BLOCK))
                && b.size == SizeClasses.classSize(b.size, unit)) {
            // The tracker stays for the block's next allocation (reset then), and so does the handle
            // slot, which still points at the block: no reference store on the hot path (under G1 a
            // card mark per call), and no write to the handle table (its lines are shared).
            if (b.hint != null) {
                b.hint = null;
            }
            // A slot whose generations are spent is not kept: it retires, and the block takes a spare one next time.
            boolean keep = HandleTable.reusable(id);
            b.keptId = keep ? id : 0;
            if (tc.push(pool.type.ordinal(), b)) {
                if (!keep) {
                    handles.retire();
                }
                checkPressureOnCachePath();
                return;
            }
            b.keptId = 0;
        }
        handles.recycle(id, tc);
        if (left == 0) {
            lastNameGone(b, tc);
        }
    }

    /**
     * The last handle of {@code b}, a block of this manager, was claimed: closes its views and gives
     * its memory back, at once or when its last pin goes, cleared first under zeroing on free.
     *
     * @param tc the calling thread's cache, told that it visits the pool lock; or null
     */
    private void lastNameGone(Block b, ThreadCache tc) {
        Pool pool = b.pool;
        boolean released = false;
        boolean scrub = false;
        pool.acquire();
        if (tc != null) {
            largeBlocks.sawPoolLock(tc, pool, caches);
        }
        List<Block> unstuck = null;
        try {
            MappingState mapping = b.mapping;
            // Close every view before the memory can go to anyone else, closed pool or not.
            if (mapping != null && !closeViews(b, mapping, false)) {
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
                return;
            }
            if (!pool.stuckViews.isEmpty()) {
                unstuck = unstick(pool);
            }
            if (b.pins > 0) {
                b.freePending = true;
            } else if (settings.zeroing() == ZeroingPolicy.ON_FREE) {
                // Cleared outside the lock while pinned; the unpin after it releases the block.
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
        }
        if (scrub) {
            if (scrub(b)) {
                unpin(b);
            }
        } else if (released) {
            checkPressure();
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

    /** @return true if the views of {@code m} are closed now (they are not while a native operation uses one) */
    private static boolean closeArena(Block b, MappingState m) {
        try {
            m.arena.close();
        } catch (IllegalStateException inUse) {
            return false;
        }
        b.mapping = null;
        return true;
    }

    /** Gives back what the pool's stuck views held, where they closed since (trim, defragment). */
    private void retryStuckViews() {
        for (Pool pool : poolList) {
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
    private static void markFreed(Block b) {
        Pool pool = b.pool;
        pool.acquire();
        try {
            b.freePending = true;
        } finally {
            pool.lock.unlock();
        }
    }

    /**
     * Clears the bytes of a freed block that a scrub pinned (zeroing on free), outside the lock.
     *
     * @return true if cleared (the caller unpins, which releases it); false if the device failed:
     * the block is unpinned and stays out of use until the manager closes (its bytes may not be
     * cleared, so no one else may have it)
     */
    private boolean scrub(Block b) {
        try {
            upstream.fill(b.chunk.device, b.offset, b.requested, (byte) 0);
            b.scrubbed = true;
            return true;
        } catch (RuntimeException e) {
            settings.log().warn(device + ": a freed block of " + Bytes.exact(b.requested) + " could not be cleared ("
                    + e.getMessage() + "); it stays out of use until the manager closes", e);
            Pool pool = b.pool;
            List<DeviceChunk> release;
            pool.acquire();
            try {
                b.pins--;
                b.freePending = false;
                release = leave(pool);
            } finally {
                pool.lock.unlock();
            }
            releaseDeferred(release);
            return false;
        }
    }

    /**
     * Under the pool's lock: closes every view of {@code b}, after writing a staging copy back.
     *
     * @return false, changing nothing, while a native operation (an NIO read into a view's buffer,
     * say) still uses a view: its arena cannot close then
     */
    private boolean closeViews(Block b, MappingState mapping, boolean writeBack) {
        if (mapping.staging != null && writeBack && mapping.writable) {
            upstream.copyFromHost(mapping.staging, b.chunk.device, b.offset, b.requested);
        }
        return closeArena(b, mapping);
    }

    /** Under the pool lock: the pool is open and {@code id} still names {@code b}, else the exception that says why. */
    private void checkLive(Pool pool, Block b, long id) {
        if (pool.closed) {
            throw checks.closed();
        }
        if (!b.isNamedBy(id)) {
            throw checks.invalidHandle(new MemoryHandle(id));
        }
    }

    private void pin(Block b, long id) {
        Pool pool = b.pool;
        pool.acquire();
        try {
            checkLive(pool, b, id);
            b.pins++;
            pool.inflight++;
            if (!b.isNamedBy(id)) {
                // A free claimed the handle without the lock just now: it did not see this pin.
                b.pins--;
                leave(pool);
                throw checks.invalidHandle(new MemoryHandle(id));
            }
        } finally {
            pool.lock.unlock();
        }
    }

    /**
     * Ends a pin. The last pin of a freed block releases it (clearing it first under zeroing on
     * free, pinned again for that); the last work on a closed pool releases its chunks.
     */
    private void unpin(Block b) {
        Pool pool = b.pool;
        while (true) {
            boolean released = false;
            boolean scrub = false;
            List<DeviceChunk> release = null;
            pool.acquire();
            try {
                // A freed block whose views a native operation holds open (b.mapping kept) stays out of
                // use: the pool gives it back once the views close (Pool.stuckViews).
                if (b.pins == 1 && b.freePending && b.mapping == null && !pool.closed) {
                    if (settings.zeroing() == ZeroingPolicy.ON_FREE && !b.scrubbed) {
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
                    release = leave(pool);
                }
            } finally {
                pool.lock.unlock();
            }
            if (!scrub) {
                releaseDeferred(release);
                if (released) {
                    checkPressure();
                }
                return;
            }
            if (!scrub(b)) {
                return;
            }
        }
    }

    // ================================================================ copies

    @Override
    public void copy(MemoryHandle src, MemoryHandle dst, long size, long srcOffset, long dstOffset) {
        Block s = resolve(src);
        Block d = resolve(dst);
        checks.range(src, s, srcOffset, size, "source");
        checks.range(dst, d, dstOffset, size, "destination");
        if (size == 0) {
            return;
        }
        pin(s, src.id());
        try {
            if (d != s) {
                pin(d, dst.id());
            }
            try {
                doCopy(s, srcOffset, d, dstOffset, size);
            } finally {
                if (d != s) {
                    unpin(d);
                }
            }
        } finally {
            unpin(s);
        }
    }

    private void doCopy(Block s, long srcOffset, Block d, long dstOffset, long size) {
        long t0 = settings.nanoClock().getAsLong();
        upstream.copy(s.chunk.device, s.offset + srcOffset, d.chunk.device, d.offset + dstOffset, size);
        long t1 = settings.nanoClock().getAsLong();
        if (t1 > t0) {
            copiedBytes.add(size);
            copyNanos.add(t1 - t0);
        }
        AccessTracker sa = s.access;
        if (sa != null) {
            sa.record(false, srcOffset, size, t1, s.allocatedAtNanos);
        }
        AccessTracker da = d.access;
        if (da != null) {
            da.record(true, dstOffset, size, t1, d.allocatedAtNanos);
        }
    }

    @Override
    public CompletionStage<Void> copyAsync(MemoryTransfer transfer, StreamHandle stream) {
        checks.transfer(transfer);
        Block s = resolve(transfer.src());
        Block d = resolve(transfer.dst());
        checks.range(transfer.src(), s, transfer.srcOffset(), transfer.size(), "source");
        checks.range(transfer.dst(), d, transfer.dstOffset(), transfer.size(), "destination");
        if (!streams.knows(stream)) {
            throw checks.unknownStream(stream);
        }
        if (transfer.size() == 0) {
            return CompletableFuture.completedFuture(null);
        }
        // Pinned now, so the blocks can neither move nor be reused until the copy has run.
        pin(s, transfer.src().id());
        if (d != s) {
            try {
                pin(d, transfer.dst().id());
            } catch (RuntimeException e) {
                unpin(s);
                throw e;
            }
        }
        Runnable work = () -> {
            transfers.acquireUninterruptibly();
            try {
                doCopy(s, transfer.srcOffset(), d, transfer.dstOffset(), transfer.size());
            } finally {
                transfers.release();
                if (d != s) {
                    unpin(d);
                }
                unpin(s);
            }
        };
        try {
            // The stream manager either refuses the work here (it will never run) or runs it once.
            return streams.submit(stream, work);
        } catch (RuntimeException | Error e) {
            // Refused (the stream was destroyed meanwhile, the stream manager closed): no pin stays.
            if (d != s) {
                unpin(d);
            }
            unpin(s);
            throw e;
        }
    }

    // ================================================================ information

    @Override
    public MemoryInfo memoryInfo(Device d) {
        checkOpen();
        checks.device(d);
        long reserved = 0;
        long used = 0;
        long live = 0;
        long freeInReserved = 0;
        long largest = 0;
        long[] cached;
        // Every pool lock at once (always in pool order; no other path holds two), and the caches
        // read at one moment under them: blocks move between a pool and a cache only under its
        // lock or by a cache's owner, so used and live are those of one instant.
        int locked = 0;
        try {
            for (Pool pool : poolList) {
                pool.acquire();
                locked++;
                reserved += pool.reserved;
                used += pool.used;
                live += pool.live;
                freeInReserved += pool.freeInReserved();
                largest = Math.max(largest, pool.largestFree());
            }
            cached = cachedAtOneMoment();
        } finally {
            for (int i = locked - 1; i >= 0; i--) {
                poolList[i].lock.unlock();
            }
        }
        double fragmentation = freeInReserved == 0 ? 0.0 : 1.0 - (double) largest / (double) freeInReserved;
        fragmentation = Math.max(0.0, Math.min(1.0, fragmentation));
        lastFragmentation = fragmentation;
        // Blocks in thread caches are free for their threads' next allocations: not reported as used.
        used = Math.max(0, used - cached[0]);
        live = Math.max(0, live - cached[1]);
        return new MemoryInfo(capacity, used, Math.max(0, capacity - used), reserved, live, fragmentation, bandwidth());
    }

    private OptionalDouble bandwidth() {
        long nanos = copyNanos.sum();
        return nanos == 0 ? OptionalDouble.empty() : OptionalDouble.of((double) copiedBytes.sum() / (double) nanos);
    }

    @Override
    public MemoryInfo quickInfo() {
        checkOpen();
        long used = account.used();
        long reserved = Math.max(account.reserved(), used);
        long[] cached = cached();
        used = Math.max(0, used - cached[0]);
        return new MemoryInfo(capacity, used, Math.max(0, capacity - used), reserved,
                Math.max(0, account.live() - cached[1]), lastFragmentation, bandwidth());
    }

    private MemoryHandleInfo info(Block b, long id) {
        MemoryHandleInfo i = new MemoryHandleInfo(new MemoryHandle(id), b.requested, device, b.alignment,
                epoch.plusNanos(b.allocatedAtNanos - epochNanos), b.mapping != null, b.pool.type);
        return b.isNamedBy(id) ? i : null;
    }

    @Override
    public Optional<MemoryHandleInfo> handleInfo(MemoryHandle handle) {
        Block b = liveOrNull(handle);
        return b == null ? Optional.empty() : Optional.ofNullable(info(b, handle.id()));
    }

    @Override
    public boolean owns(MemoryHandle handle) {
        return liveOrNull(handle) != null;
    }

    @Override
    public List<MemoryHandleInfo> handles() {
        checkOpen();
        List<MemoryHandleInfo> out = new ArrayList<>();
        for (Pool pool : poolList) {
            pool.acquire();
            try {
                for (Block b : pool.liveBlocks()) {
                    // A mapping's block may be named by its alias alone (its first handle was freed).
                    long id = b.handleId != 0 ? b.handleId : b.aliasId;
                    MemoryHandleInfo i = id != 0 ? info(b, id) : null;
                    if (i != null) {
                        out.add(i);
                    }
                }
            } finally {
                pool.lock.unlock();
            }
        }
        return out;
    }

    @Override
    public HandleSpace handleSpace() {
        return handles.space();
    }

    @Override
    public String backendName() {
        return upstream.backendName();
    }

    // ================================================================ pools

    @Override
    public void configurePool(Device d, MemoryType type, MemoryPoolConfig cfg) {
        checkOpen();
        checks.device(d);
        Checks.type(type);
        checks.poolConfig(type, cfg);
        Pool pool = pools.get(type);
        // Validated before anything changes: a refused call leaves the caches, and so every figure, as they were.
        // Blocks in thread caches count in pool.used; whatever they hold, less than what is live cannot do.
        if (cfg.maxSize().isPresent()) {
            long live = liveBytes(pool);
            if (cfg.maxSize().getAsLong() < live) {
                throw checks.maxSizeBelowUse(type, cfg, live);
            }
        }
        // A new alignment changes class sizes: cached blocks go back to their pools first.
        drainCaches();
        pool.acquire();
        try {
            pool.config = cfg;
        } finally {
            pool.lock.unlock();
        }
        if (cfg.preAllocate() && cfg.initialSize() > 0) {
            reserveUpTo(pool, cfg.initialSize());
        }
    }

    /** @return bytes of the pool's live blocks (its used bytes less its blocks in thread caches) */
    private long liveBytes(Pool pool) {
        pool.acquire();
        try {
            long cachedHere = 0;
            if (localCache != null) {
                int p = pool.type.ordinal();
                for (ThreadCache tc : caches) {
                    long b = -1;
                    for (int attempt = 0; b < 0 && attempt < 10_000; attempt++) {
                        b = tc.bytesOf(p);
                    }
                    cachedHere += Math.max(0, b);
                }
            }
            return pool.used - cachedHere;
        } finally {
            pool.lock.unlock();
        }
    }

    @Override
    public MemoryPoolConfig poolConfig(MemoryType type) {
        checkOpen();
        Checks.type(type);
        return pools.get(type).config;
    }

    @Override
    public long trim() {
        checkOpen();
        drainCaches();
        retryStuckViews();
        long released = 0;
        for (Pool pool : poolList) {
            List<DeviceChunk> empty;
            pool.acquire();
            try {
                if (pool.closed) {
                    throw checks.closed();
                }
                MemoryPoolConfig cfg = pool.config;
                empty = pool.takeEmptyChunks(cfg.preAllocate() ? cfg.initialSize() : 0);
                if (empty.isEmpty()) {
                    continue;
                }
                pool.inflight++; // a close waits until these are released: the upstream closes after
            } finally {
                pool.lock.unlock();
            }
            List<DeviceChunk> release;
            try {
                releaseChunks(empty);
                for (DeviceChunk c : empty) {
                    released += c.size();
                }
            } finally {
                pool.acquire();
                try {
                    release = leave(pool);
                } finally {
                    pool.lock.unlock();
                }
                releaseDeferred(release);
            }
        }
        return released;
    }

    @Override
    public CompletionStage<DefragmentationStats> defragment(Device d) {
        checkOpen();
        checks.device(d);
        try {
            long t0 = System.nanoTime();
            double before = memoryInfo(device).fragmentationRatio();
            long reservedBefore = account.reserved();
            drainCaches();
            long moved = 0;
            for (Pool pool : poolList) {
                moved += defragmentPool(pool);
            }
            trim();
            double after = memoryInfo(device).fragmentationRatio();
            long freed = Math.max(0, reservedBefore - account.reserved());
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            return CompletableFuture.completedFuture(new DefragmentationStats(freed, moved, ms, before, after));
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    private long defragmentPool(Pool pool) {
        pool.acquire();
        try {
            if (pool.closed) {
                throw checks.closed();
            }
            return pool.compact(upstream, settings.zeroing() == ZeroingPolicy.ON_FREE);
        } finally {
            pool.lock.unlock();
        }
    }

    // ================================================================ pressure

    @Override
    public void setPressureCallback(Consumer<MemoryPressure> callback) {
        this.pressureCallback = callback;
    }

    @Override
    public boolean addPressureObserver(MemoryObserver observer) {
        Objects.requireNonNull(observer, "observer");
        observers.addIfAbsent(observer);
        return true;
    }

    @Override
    public void removePressureObserver(MemoryObserver observer) {
        observers.remove(observer);
    }

    /**
     * The level of the used bytes {@link #memoryInfo} reports: blocks in thread caches do not count.
     * The pools' used bytes (cached ones included) bound it from above, so below {@link #lowBelow}
     * the caches need not be read.
     */
    private MemoryPressure currentPressure() {
        long used = account.used();
        if (used < lowBelow) {
            return MemoryPressure.LOW;
        }
        if (localCache != null) {
            used = Math.max(0, used - cached()[0]);
        }
        return MemoryPressure.forUtilization((double) used / (double) capacity * 100.0);
    }

    /**
     * After an allocation or free served by a thread cache: blocks entering or leaving a cache
     * change the reported use too. Costs two reads while the pools' use is below the MEDIUM level
     * and the last level was LOW.
     */
    private void checkPressureOnCachePath() {
        if (lastPressure == MemoryPressure.LOW && account.used() < lowBelow) {
            return;
        }
        checkPressure();
    }

    /**
     * Edge-triggered pressure notification. The cheap check runs on every change. One thread at a
     * time tells a change (which orders the notifications): a thread that finds another telling one
     * goes on at once, and the teller looks again after each round, so the change that thread made is
     * told too (changes made meanwhile are told as one). A callback or observer that blocks holds up
     * only the call whose change it is telling; one that throws is logged.
     */
    private void checkPressure() {
        while (currentPressure() != lastPressure) {
            if (!pressureLock.tryLock()) {
                // The teller looks again once it lets go: this change is not lost.
                return;
            }
            try {
                MemoryPressure now = currentPressure();
                MemoryPressure before = lastPressure;
                if (now != before) {
                    lastPressure = now;
                    tellPressure(before, now);
                }
            } finally {
                pressureLock.unlock();
            }
        }
    }

    private void tellPressure(MemoryPressure before, MemoryPressure now) {
        Consumer<MemoryPressure> cb = pressureCallback;
        if (cb != null) {
            try {
                cb.accept(now);
            } catch (VirtualMachineError e) {
                throw e;
            } catch (Throwable e) {
                // An Error too: a callback of a stopped bundle fails with NoClassDefFoundError.
                settings.log().warn("Pressure callback of " + device + " failed on " + before + " -> " + now
                        + "; allocation goes on", e);
            }
        }
        if (!observers.isEmpty()) {
            MemoryInfo info;
            try {
                info = memoryInfo(device);
            } catch (DeviceUnavailableException e) {
                info = null; // closed meanwhile
            }
            for (MemoryObserver o : observers) {
                try {
                    o.pressureChanged(device, before, now, info);
                } catch (VirtualMachineError e) {
                    throw e;
                } catch (Throwable e) {
                    settings.log().warn("Pressure observer " + o + " of " + device + " failed", e);
                }
            }
        }
    }

    // ================================================================ mapping, hints, statistics

    @Override
    public MemorySegment mapMemory(MemoryHandle handle, MemoryAccess access) {
        Checks.access(access);
        Block b = resolve(handle);
        Pool pool = b.pool;
        pool.acquire();
        try {
            checkLive(pool, b, handle.id());
            MappingState m = b.mapping;
            if (m == null) {
                Arena arena = Arena.ofShared();
                MemorySegment staging = null;
                Optional<MemorySegment> host = upstream.hostSegment(b.chunk.device);
                if (host.isEmpty()) {
                    staging = arena.allocate(b.requested, 64);
                    upstream.copyToHost(b.chunk.device, b.offset, staging, b.requested);
                }
                m = new MappingState(arena, staging);
                b.mapping = m;
                if (!b.isNamedBy(handle.id())) {
                    // A free claimed the handle without the lock just now: it did not see this mapping.
                    closeViews(b, m, false);
                    throw checks.invalidHandle(handle);
                }
            }
            MemorySegment base = m.staging != null ? m.staging
                    : upstream.hostSegment(b.chunk.device).orElseThrow().asSlice(b.offset, b.requested);
            MemorySegment view = base.reinterpret(m.arena, null);
            if (access != MemoryAccess.READ_ONLY) {
                m.writable = true;
            }
            AccessTracker t = b.access;
            if (t != null) {
                long now = settings.nanoClock().getAsLong();
                if (access != MemoryAccess.WRITE_ONLY) {
                    t.record(false, 0, b.requested, now, b.allocatedAtNanos);
                }
                if (access != MemoryAccess.READ_ONLY) {
                    t.record(true, 0, b.requested, now, b.allocatedAtNanos);
                }
            }
            return access == MemoryAccess.READ_ONLY ? view.asReadOnly() : view;
        } finally {
            pool.lock.unlock();
        }
    }

    @Override
    public void unmapMemory(MemoryHandle handle) {
        Block b = resolve(handle);
        Pool pool = b.pool;
        pool.acquire();
        try {
            checkLive(b.pool, b, handle.id());
            if (b.mapping == null) {
                throw checks.notMapped(handle);
            }
            if (!closeViews(b, b.mapping, true)) {
                throw checks.viewInUse(handle);
            }
        } finally {
            pool.lock.unlock();
        }
    }

    /**
     * The memory lives on this device; the other handle is issued by the manager of the other
     * device (this one when both are the same), found through {@link PoolSettings#peers()}.
     */
    @Override
    public MemoryMapping createMapping(Device sourceDevice, Device targetDevice, long size) {
        checkOpen();
        checks.mappingDevices(sourceDevice, targetDevice);
        Device other = sourceDevice.equals(device) ? targetDevice : sourceDevice;
        PoolEngine peer = this;
        if (!other.equals(device)) {
            PooledMemoryManager found = other.kind().equals(device.kind()) ? settings.peers().apply(other) : null;
            if (!(found instanceof PoolEngine p) || p.closed) {
                throw checks.noPeer(sourceDevice, targetDevice, other);
            }
            peer = p;
        }
        Pool pool = pools.get(MemoryType.MAPPED);
        checks.size(size, MemoryType.MAPPED, pool.config);
        // Counted as named twice from the start: a free of the (guessable) first handle before the
        // second is issued leaves the block to the second.
        Block[] carved = new Block[1];
        MemoryHandle primary = allocateIn(pool, size, Math.max(pool.config.alignment(), Pool.MIN_BLOCK),
                pool.blockSize(size), null, 2, carved);
        Block b = carved[0];
        long alias;
        try {
            alias = peer.handles.registerAlias(b);
        } catch (RuntimeException e) {
            if (b.dropUnissuedName() == 0) {
                lastNameGone(b, null);
            }
            deallocateQuietly(primary);
            throw e;
        }
        if (peer != this) {
            peer.issuedAliases.put(b, alias);
            if (peer.closed) {
                // The peer closed meanwhile and may not have seen this alias: it dies now.
                peer.dropAlias(b, alias);
            }
        }
        MemoryHandle second = new MemoryHandle(alias);
        return sourceDevice.equals(device)
                ? new MemoryMapping(primary, second, sourceDevice, targetDevice, size)
                : new MemoryMapping(second, primary, sourceDevice, targetDevice, size);
    }

    private void deallocateQuietly(MemoryHandle h) {
        try {
            deallocate(h);
        } catch (RuntimeException ignored) {
            // already freed by whoever freed it
        }
    }

    /** Ends an alias this manager issued for a peer's block (this manager closes), if it is still live. */
    private void dropAlias(Block b, long alias) {
        issuedAliases.remove(b, alias);
        int left = b.claim(alias);
        if (left == 0) {
            b.pool.engine.lastNameGone(b, null);
        }
    }

    /** Runs {@code action} on a live block that stays put (pinned) while it runs. */
    private void withPinned(MemoryHandle handle, Consumer<Block> action) {
        Block b = resolve(handle);
        pin(b, handle.id());
        try {
            action.accept(b);
        } finally {
            unpin(b);
        }
    }

    /** @return the live block named by {@code handle}, or null; never throws */
    private Block liveOrNull(MemoryHandle handle) {
        return closed || handle == null || !handle.isValid() ? null : handles.lookup(handle.id());
    }

    @Override
    public void prefetch(MemoryHandle handle, Device target) {
        Checks.prefetchTarget(target);
        withPinned(handle, b -> upstream.prefetch(b.chunk.device, b.offset, b.requested, target));
    }

    @Override
    public Optional<MemoryAccessStats> accessStats(MemoryHandle handle) {
        Block b = liveOrNull(handle);
        AccessTracker t = b == null ? null : b.access;
        if (t == null) {
            return Optional.empty();
        }
        MemoryAccessStats stats = t.snapshot(epoch, epochNanos, b.allocatedAtNanos);
        // A block freed and reused meanwhile keeps its tracker: its figures are not this handle's.
        return b.isNamedBy(handle.id()) ? Optional.of(stats) : Optional.empty();
    }

    @Override
    public void setUsageHint(MemoryHandle handle, MemoryUsageHint hint) {
        Checks.usageHint(hint);
        withPinned(handle, b -> {
            b.hint = hint;
            upstream.advise(b.chunk.device, b.offset, b.requested, hint);
        });
    }

    @Override
    public Optional<MemoryUsageHint> usageHint(MemoryHandle handle) {
        Block b = liveOrNull(handle);
        return b == null ? Optional.empty() : Optional.ofNullable(b.hint);
    }

    // ================================================================ close

    @Override
    public void close() {
        synchronized (this) {
            if (closed) {
                retryClose();
                return;
            }
            closed = true;
        }
        if (coarseClock) {
            CoarseClock.release();
        }
        // Every thread's entry is emptied, not only the closing thread's: a thread that used this
        // manager and lives on must not keep its cache, and with it this bundle's classes.
        for (ThreadCache tc : caches) {
            Object[] holder = tc.holder;
            if (holder != null) {
                holder[0] = null;
            }
        }
        caches.clear();
        if (localCache != null) {
            localCache.remove();
        }
        // Aliases this manager issued for peers' blocks die with it: their memory is not named forever.
        for (Map.Entry<Block, Long> e : issuedAliases.entrySet()) {
            dropAlias(e.getKey(), e.getValue());
        }
        long leakedCount = 0;
        long leakedBytes = 0;
        int deferred = 0;
        int stuck = 0;
        List<String> sites = new ArrayList<>();
        List<DeviceChunk> chunks = new ArrayList<>();
        for (Pool pool : poolList) {
            pool.acquire();
            try {
                pool.closed = true;
                pool.grown.signalAll();
                long deadline = System.nanoTime() + CLOSE_WAIT_NANOS;
                while (pool.inflight > 0) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        break;
                    }
                    try {
                        pool.idle.awaitNanos(left);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        break;
                    }
                }
                for (Block b : pool.allocatedBlocks()) {
                    // Every view goes, of blocks still named and of blocks a racing free has claimed alike.
                    MappingState m = b.mapping;
                    if (m != null && !closeArena(b, m) && !pool.stuckViews.contains(b)) {
                        pool.stuckViews.add(b);
                    }
                    if (!b.isNamed()) {
                        continue;
                    }
                    leakedCount++;
                    leakedBytes += b.requested;
                    if (b.allocationSite != null && sites.size() < 20) {
                        StackTraceElement[] st = b.allocationSite.getStackTrace();
                        sites.add(new MemoryHandle(b.handleId != 0 ? b.handleId : b.aliasId) + " (" + b.requested + " bytes) at "
                                + (st.length > 2 ? st[2] : st.length > 0 ? st[st.length - 1] : "?"));
                    }
                    handles.unregister(b, b.handleId);
                    // An alias in another manager's table stays there, and answers "unavailable".
                }
                if (pool.inflight == 0 && pool.stuckViews.isEmpty()) {
                    chunks.addAll(pool.takeAllChunks());
                } else {
                    // Copies still run on this memory: whoever ends the last of them releases it. A
                    // view a native operation still uses keeps it until close is called again.
                    pool.releaseWhenIdle = true;
                    closeHolds.incrementAndGet();
                    deferred += pool.inflight;
                    stuck += pool.stuckViews.size();
                }
            } finally {
                pool.lock.unlock();
            }
        }
        releaseChunks(chunks);
        if (stuck > 0) {
            settings.log().warn(device + ": closed while native operations still used " + stuck + " mapped views;"
                    + " their pools' memory stays reserved until close() is called again after those operations end", null);
        }
        if (deferred > 0) {
            settings.log().warn(device + ": closed while " + deferred + " copies or upstream calls still ran on its memory;"
                    + " that memory is released when the last of them ends", null);
        }
        if (leakedCount > 0) {
            settings.log().warn(device + ": closed with " + leakedCount + " live allocations (" + Bytes.exact(leakedBytes)
                    + ") still allocated; their memory was released"
                    + (sites.isEmpty() ? " (enable debug to record allocation sites)" : ". Allocation sites: " + sites), null);
        }
        if (ownsStreams) {
            streams.close();
        }
        lastPressure = MemoryPressure.LOW;
        finishClose();
    }

    /**
     * A second close: pools that views in use by native operations kept open are released now,
     * where those views close (and no copy runs on them any more).
     */
    private void retryClose() {
        for (Pool pool : poolList) {
            List<DeviceChunk> release = null;
            pool.acquire();
            try {
                if (pool.releaseWhenIdle && !pool.stuckViews.isEmpty()) {
                    pool.stuckViews.removeIf(b -> b.mapping == null || closeArena(b, b.mapping));
                    if (pool.stuckViews.isEmpty() && pool.inflight == 0) {
                        pool.releaseWhenIdle = false;
                        release = pool.takeAllChunks();
                    }
                }
            } finally {
                pool.lock.unlock();
            }
            releaseDeferred(release);
        }
    }

    @Override
    public boolean isClosed() {
        return closed;
    }

    @Override
    public String toString() {
        return "PooledMemoryManager[" + device + ", " + upstream.backendName() + "]";
    }
}
