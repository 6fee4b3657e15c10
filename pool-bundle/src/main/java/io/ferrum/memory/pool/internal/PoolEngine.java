package io.ferrum.memory.pool.internal;

import java.lang.foreign.MemorySegment;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletionStage;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.LongSupplier;

import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.HandleSpace;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryAccessStats;
import io.ferrum.memory.api.MemoryException;
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
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.pool.BundleClasses;
import io.ferrum.memory.pool.DeviceUpstream;
import io.ferrum.memory.pool.HostStreamManager;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;
import io.ferrum.memory.pool.StreamExecutor;
import io.ferrum.memory.pool.ZeroingPolicy;

/**
 * The pool engine's front: one {@link Pool} per memory type over one {@link DeviceUpstream}. Each
 * call checks its arguments ({@link Checks}) and delegates to the room that owns the concept (see
 * docs/ARCHITECTURE.md, "The pool's rooms"): {@link Allocator} and {@link Reclaimer} (the hot
 * paths), {@link Transfers}, {@link DataPath}, {@link Mappings}, {@link Figures}, {@link Maintenance},
 * {@link PressureNotifier}, {@link Lifecycle}.
 *
 * <p>Concurrency rules: each pool has one lock, held only for bookkeeping (carving, releasing,
 * pinning), never across an upstream call except during defragmentation of that pool. Copies pin
 * their blocks under the lock and run outside it; write, read and withMapped pin without it
 * ({@link Scopes}); a pinned, scoped or mapped block is never moved or reused. Growth books its size as pending under the lock and asks the upstream outside it: limits
 * hold under any concurrency. Handle lookups take no lock. Work outside a pool's lock on its memory
 * counts as in-flight; {@link #close()} releases a pool's chunks only when none runs.
 *
 * <p>Invariant of the front: every field is final and set before the constructor returns; the
 * allocate and free paths add no allocation, lambda or boxing to the rooms' own work.
 */
public final class PoolEngine implements PooledMemoryManager, AliasIssuer {
    static {
        // Every class of the bundle before any engine serves: see BundleClasses (Equinox, uninstall).
        BundleClasses.defineAll(PoolEngine.class);
    }

    private final Device device;
    private final DeviceUpstream upstream;
    private final Checks checks;
    private final HandleTable handles;
    private final Pool[] pools;
    private final Lifecycle lifecycle;
    private final ThreadCaches caches;
    private final Figures figures;
    private final PressureNotifier pressure;
    private final IssuedAliases issuedAliases = new IssuedAliases();
    /**
     * Held through a whole {@link #configurePool} or {@link #configurePools}: one edit is decided at
     * a time, so that what one reserves for its pre-allocations is measured against configurations
     * that stand, not another edit's still being tried.
     */
    private final Object configuring = new Object();
    private final Reclaimer reclaimer;
    private final Growth growth;
    private final Maintenance maintenance;
    private final Allocator allocator;
    private final Transfers transfers;
    private final DataPath dataPath;
    private final Mappings mappings;
    private final StreamExecutor streams;
    private final boolean ownsStreams;
    private final boolean coarseClock;
    /** The backend's running managers by device ({@link PoolSettings#peers()}). */
    private final Function<Device, PooledMemoryManager> peers;

    public PoolEngine(DeviceUpstream upstream, MemoryManagerConfig config, PoolSettings settings,
                      StreamExecutor streams) {
        this(upstream, config, settings, streams, null);
    }

    /** @param handles the handle table (tests: a small one), or null for a full-size one */
    PoolEngine(DeviceUpstream upstream, MemoryManagerConfig config, PoolSettings settings,
               StreamExecutor streams, HandleTable handles) {
        this(upstream, config, settings, streams, handles, Lifecycle.CLOSE_WAIT_NANOS);
    }

    /**
     * @param handles        the handle table (tests: a small one), or null for a full-size one
     * @param closeWaitNanos how long {@link #close} waits for each pool's work and lock (tests: less
     *                       than {@value Lifecycle#CLOSE_WAIT_SECONDS} s)
     */
    PoolEngine(DeviceUpstream upstream, MemoryManagerConfig config, PoolSettings settings,
               StreamExecutor streams, HandleTable handles, long closeWaitNanos) {
        if (upstream == null || config == null || settings == null) {
            throw Checks.missingParts();
        }
        this.handles = handles != null ? handles : new HandleTable();
        this.upstream = upstream;
        this.device = upstream.device();
        this.peers = settings.peers();
        long physical = upstream.physicalCapacity();
        long capacity = settings.capacityBytes() > 0 ? Math.min(settings.capacityBytes(), physical) : physical;
        long chunkAlignment = Math.max(upstream.chunkAlignment(), Pool.MIN_BLOCK);
        this.checks = new Checks(device, capacity, chunkAlignment, this.handles, upstream.backendName());
        checks.chunkAlignment();
        DeviceAccount account = new DeviceAccount(capacity, chunkAlignment);
        this.ownsStreams = streams == null;
        this.coarseClock = settings.nanoClock() == PoolSettings.SYSTEM_NANOS;
        Instant epoch = Instant.now();
        long epochNanos = settings.nanoClock().getAsLong();
        ZeroingPolicy zeroing = settings.zeroing();
        boolean zeroOnFree = zeroing == ZeroingPolicy.ON_FREE;
        double gcThreshold = config.enableAutoGc() ? config.gcThreshold() : Double.NaN;
        MemoryType[] types = MemoryType.values();
        this.pools = new Pool[types.length];
        for (MemoryType type : types) {
            pools[type.ordinal()] = new Pool(type, startConfig(config, type), account, gcThreshold);
        }
        this.lifecycle = new Lifecycle(upstream, account, settings.log(), pools, closeWaitNanos);
        this.caches = new ThreadCaches(pools, this.handles, lifecycle, SharedPoolRule.INSTANCE,
                settings.threadCacheBytes(), settings.threadCacheBytes() > 0 && zeroing == ZeroingPolicy.NONE
                && !config.enableDebug());
        this.figures = new Figures(device, pools, account, caches, this.handles, lifecycle, epoch, epochNanos);
        this.pressure = new PressureNotifier(device, account, caches, figures, lifecycle, settings.log());
        this.reclaimer = new Reclaimer(checks, this.handles, caches, pressure, lifecycle, issuedAliases, upstream,
                settings.log(), zeroOnFree);
        for (Pool pool : pools) {
            pool.reclaimer = reclaimer;
        }
        this.growth = new Growth(upstream, account, checks, lifecycle, caches, zeroOnFree);
        this.maintenance = new Maintenance(pools, caches, reclaimer, lifecycle, new Compactor(upstream, zeroOnFree, settings.log()),
                checks, figures, config.enableAutoGc(), device, settings.log());
        this.allocator = new Allocator(this.handles, caches, reclaimer, growth, maintenance, pressure, checks, account,
                lifecycle, upstream, settings.nanoClock(), coarseClock, config.enableTracking(), config.enableDebug(),
                zeroing == ZeroingPolicy.ON_ALLOCATE);
        LongSupplier accessClock = coarseClock ? CoarseClock::nanos : settings.nanoClock();
        this.dataPath = new DataPath(checks, figures, settings.nanoClock(), accessClock);
        this.mappings = new Mappings(device, pools[MemoryType.MAPPED.ordinal()], allocator, reclaimer, this.handles,
                issuedAliases, lifecycle, checks, accessClock, settings.peers());
        // What only a close gives back is taken last: the stream manager of its own, a use of the coarse
        // clock (whose thread runs while any is counted; taken all or nothing), the pre-allocated
        // chunks. A throw from here (an Error included: an overflow, no thread left to start) gives
        // back what was taken, as no engine is left to close it; before, a throw between the clock and
        // the pre-allocation left the clock's thread running for good (docs/RELIABILITY.md).
        HostStreamManager ownStreams = null;
        boolean built = false;
        try {
            this.streams = streams != null ? streams : (ownStreams = new HostStreamManager(device));
            this.transfers = new Transfers(reclaimer, checks, this.streams, config.maxConcurrentTransfers(), figures,
                    upstream, settings.nanoClock(), accessClock);
            if (coarseClock) {
                CoarseClock.acquire();
            }
            built = true; // no call since the clock: a throw before this line took no use of it
            growth.preAllocate(pools, config);
        } catch (Throwable failed) {
            try {
                if (built) {
                    close(); // the close proper gives back the clock, the stream manager and every chunk
                } else if (ownStreams != null) {
                    ownStreams.close();
                }
            } catch (Throwable alsoFailed) {
                failed.addSuppressed(alsoFailed);
            }
            throw failed;
        }
    }

    private void checkOpen() {
        if (lifecycle.closed) {
            throw checks.closed();
        }
    }

    /** @return the live block named by {@code handle}, or an exception that says why there is none */
    private Block resolve(MemoryHandle handle) {
        checkOpen();
        checks.handle(handle);
        Block b = handles.lookup(handle.id());
        if (b == null) {
            checkOpen(); // a close since the first check unregistered it: "closed", not "already freed"
            Device owner = issuedAliases.ownerClosedOf(handle.id());
            if (owner != null) {
                // An alias of a peer's block whose manager closed: that manager is the one gone.
                throw Checks.closed(owner);
            }
            throw checks.invalidHandle(handle);
        }
        return b;
    }

    @Override
    public Device device() {
        return device;
    }

    @Override
    public MemoryHandle allocate(long size, MemoryType type, Device d) {
        checkOpen();
        checks.device(d);
        Checks.type(type);
        Pool pool = pools[type.ordinal()];
        MemoryPoolConfig cfg = pool.config;
        checks.size(size, type, cfg);
        return allocator.allocate(pool, size, cfg);
    }

    @Override
    public MemoryHandle allocateAligned(long size, long alignment, MemoryType type, Device d) {
        checkOpen();
        checks.device(d);
        Checks.type(type);
        Pool pool = pools[type.ordinal()];
        MemoryPoolConfig cfg = pool.config;
        checks.size(size, type, cfg);
        return allocator.allocateIn(pool, size, checks.alignment(alignment, cfg), pool.blockSize(size), null, 1, null);
    }

    @Override
    public void deallocate(MemoryHandle handle) {
        checkOpen();
        checks.handle(handle);
        Block b = handles.lookup(handle.id());
        if (b == null) {
            if (issuedAliases.forgetOrphan(handle.id())) {
                return; // an alias whose block's manager closed: its name is gone, and now forgotten
            }
            b = resolve(handle); // says why there is none
        }
        reclaimer.free(b, handle);
    }

    @Override
    public void copy(MemoryHandle src, MemoryHandle dst, long size, long srcOffset, long dstOffset) {
        copyInto(this, src, dst, size, srcOffset, dstOffset, false);
    }

    /**
     * Copies from a block of this manager into one of {@code owner} (this manager, or a peer): each
     * handle resolved and its range checked by its own manager, both blocks held by scopes.
     *
     * @param declineStaged answer false, copying nothing, when an action of the calling thread holds
     *                      either block as a staging copy ({@link #copyToPeer})
     * @return false only when {@code declineStaged} declined
     */
    private boolean copyInto(PoolEngine owner, MemoryHandle src, MemoryHandle dst, long size, long srcOffset,
                             long dstOffset, boolean declineStaged) {
        Block s = resolve(src);
        Block d = owner.resolve(dst);
        checks.range(src, s, srcOffset, size, "source");
        owner.checks.range(dst, d, dstOffset, size, "destination");
        if (declineStaged && (DataPath.stagedByCaller(s) || DataPath.stagedByCaller(d))) {
            // Inside a withMapped action on memory the CPU cannot address, the action's staging copy is
            // the block for this thread: its source bytes may be newer than the device's, and its
            // write-back would erase what a device copy put into the destination. Read and write honour
            // it, so the caller stages the bytes (the router reads, then writes, as before issue 16).
            return false;
        }
        try {
            transfers.copy(s, src.id(), srcOffset, d, dst.id(), dstOffset, size);
        } catch (Scopes.StaleName e) {
            throw s.isNamedBy(src.id()) ? owner.checks.invalidHandle(dst) : checks.invalidHandle(src);
        } catch (Mappings.Staged e) {
            // Inside the caller's own action on the refused block: words about that action, not another's.
            if (DataPath.stagedByCaller(e.destination ? d : s)) {
                throw e.destination ? owner.checks.copyInCallersAction(dst) : checks.copyInCallersAction(src);
            }
            throw e.destination ? e.refusal(owner.checks, dst) : e.refusal(checks, src);
        }
        return true;
    }

    /**
     * A peer is the manager the backend's lookup answers for {@code target}'s device, that same
     * object, an engine of this class and open; its block is resolved and checked by its own table,
     * and the copy runs as a {@link #copy} between two managers' blocks does ({@link Transfers}: the
     * source's upstream moves the bytes; scopes hold both blocks, so neither a free nor either
     * manager's close releases them meanwhile); with itself as target, as {@link #copy}. Whatever the
     * target, a block an action of the calling thread holds a staging copy of ({@link DataPath},
     * "Nested calls on staged memory") answers false: a device copy would neither read nor keep that
     * copy's bytes.
     */
    @Override
    public boolean copyToPeer(MemoryTransfer transfer, DeviceMemoryManager target) {
        checks.transfer(transfer);
        if (target == null) {
            throw checks.noTarget();
        }
        // Before the peer is looked for: a closed manager is refused as closed, not answered "cannot
        // reach" (false), which would send its caller to stage the bytes through host memory.
        checkOpen();
        // Itself as target: copied as copy does, but a block staged by the caller answers false too.
        PoolEngine peer = target == this ? this : peer(target);
        if (peer == null) {
            return false;
        }
        return copyInto(peer, transfer.src(), transfer.dst(), transfer.size(), transfer.srcOffset(),
                transfer.dstOffset(), true);
    }

    /** @return {@code target} when it is an open peer of this manager's backend, else null */
    private PoolEngine peer(DeviceMemoryManager target) {
        Device other = target.device();
        if (other == null || other.equals(device) || !other.kind().equals(device.kind())) {
            return null;
        }
        return peers.apply(other) == target && target instanceof PoolEngine p && !p.isClosed() ? p : null;
    }

    @Override
    public CompletionStage<Void> copyAsync(MemoryTransfer transfer, StreamHandle stream) {
        checks.transfer(transfer);
        Block s = resolve(transfer.src());
        Block d = resolve(transfer.dst());
        checks.range(transfer.src(), s, transfer.srcOffset(), transfer.size(), "source");
        checks.range(transfer.dst(), d, transfer.dstOffset(), transfer.size(), "destination");
        return transfers.copyAsync(transfer, s, d, stream);
    }

    @Override
    public void write(MemoryHandle dst, long dstOffset, MemorySegment src) {
        try {
            dataPath.write(resolve(dst), dst, dstOffset, src);
        } catch (Scopes.StaleName e) {
            throw checks.invalidHandle(dst);
        } catch (Mappings.Staged e) {
            throw e.refusal(checks, dst);
        }
    }

    @Override
    public void read(MemoryHandle src, long srcOffset, MemorySegment dst) {
        try {
            dataPath.read(resolve(src), src, srcOffset, dst);
        } catch (Scopes.StaleName e) {
            throw checks.invalidHandle(src);
        } catch (Mappings.Staged e) {
            throw e.refusal(checks, src);
        }
    }

    @Override
    public CompletionStage<Void> writeAsync(MemoryHandle dst, long dstOffset, MemorySegment src, StreamHandle stream) {
        return transfers.hostCopyAsync(resolve(dst), dst, dstOffset, src, true, stream);
    }

    @Override
    public CompletionStage<Void> readAsync(MemoryHandle src, long srcOffset, MemorySegment dst, StreamHandle stream) {
        return transfers.hostCopyAsync(resolve(src), src, srcOffset, dst, false, stream);
    }

    @Override
    public Map<MemoryType, Long> reservedByType() {
        checkOpen();
        return figures.reservedByType();
    }

    @Override
    public MemoryInfo memoryInfo(Device d) {
        checkOpen();
        checks.device(d);
        return figures.memoryInfo();
    }

    @Override
    public MemoryInfo quickInfo() {
        checkOpen();
        return figures.quickInfo();
    }

    @Override
    public Optional<MemoryHandleInfo> handleInfo(MemoryHandle handle) {
        return figures.handleInfo(handle);
    }

    @Override
    public boolean owns(MemoryHandle handle) {
        return figures.liveOrNull(handle) != null;
    }

    @Override
    public List<MemoryHandleInfo> handles() {
        checkOpen();
        return figures.handles(issuedAliases);
    }

    @Override
    public HandleSpace handleSpace() {
        return handles.space();
    }

    /**
     * @return {@code type}'s pool configuration at the start: one that only inherits GENERAL's values
     *         does not pre-allocate ({@link Growth#preAllocate} reserves only for the pools the
     *         configuration names), so it says so, and trim gives back what it grew into
     */
    private static MemoryPoolConfig startConfig(MemoryManagerConfig config, MemoryType type) {
        MemoryPoolConfig cfg = config.poolConfig(type);
        return cfg.preAllocate() && !config.poolConfigs().containsKey(type) ? cfg.toBuilder().preAllocate(false).build() : cfg;
    }

    @Override
    public String backendName() {
        return upstream.backendName();
    }

    @Override
    public void configurePool(Device d, MemoryType type, MemoryPoolConfig cfg) {
        checkOpen();
        checks.device(d);
        // Validated before anything changes: a refused call leaves the caches, and so every figure, as they were.
        checkPoolConfig(type, cfg);
        synchronized (configuring) {
            edit(new MemoryType[] {type}, new MemoryPoolConfig[] {cfg});
        }
    }

    @Override
    public void configurePools(MemoryManagerConfig next) {
        MemoryType[] types = MemoryType.values();
        MemoryPoolConfig[] cfgs = new MemoryPoolConfig[types.length];
        for (MemoryType type : types) {
            cfgs[type.ordinal()] = startConfig(next, type);
            checkPoolConfig(type, cfgs[type.ordinal()]);
        }
        synchronized (configuring) {
            edit(types, cfgs);
        }
    }

    /**
     * Under {@link #configuring}: gives each pool of {@code types} its configuration in {@code cfgs},
     * or none. The edit is decided before anything shows, so a refusal has nothing to put back:
     * <ol>
     *   <li>the chunks the pre-allocating pools lack are reserved outside the pools ({@link
     *       Growth#reserveFor}): no allocation carves from them, nor grows under the new limits,
     *       while the device is asked (a refused edit would leave what it admitted meanwhile);</li>
     *   <li>under every pool's lock at once, each pool is checked again (closed; a limit below the
     *       live blocks, one allocated since the caller's check included) and, none refusing, takes
     *       its configuration and its chunk ({@link #take}); a pre-allocating pool that would then
     *       hold less than its new initial size (a growth since left its chunk above the new limit, a
     *       trim gave back what it held) gets its chunk reserved again for what it lacks now, and the
     *       check runs again;</li>
     *   <li>only then do lower limits give back their empty chunks: an earlier pool's chunk given
     *       back could not be taken back as it was had a later pool refused.</li>
     * </ol>
     * A refusal gives back the chunks reserved for the edit and changes nothing else. An edit that
     * needs the room a lower limit would free is refused. A close that lands once the pools took the
     * edit refuses nothing: the edit applied, and the close gives back every chunk, those a lower
     * limit would have given back too.
     */
    private void edit(MemoryType[] types, MemoryPoolConfig[] cfgs) {
        Growth.Reserved[] reservedFor = new Growth.Reserved[types.length];
        try {
            for (int i = 0; i < types.length; i++) {
                if (preAllocates(cfgs[i])) {
                    reservedFor[i] = growth.reserveFor(pools[types[i].ordinal()], cfgs[i]);
                }
            }
            // A new alignment changes class sizes: cached blocks go back to their pools first.
            caches.drainAll();
            for (int i; (i = take(types, cfgs, reservedFor)) >= 0; ) {
                // The pool changed since its chunk was reserved (a growth left the chunk above the new
                // limit, a trim gave back what the pool held): reserved again for what it lacks now.
                Pool pool = pools[types[i].ordinal()];
                Growth.Reserved stale = reservedFor[i];
                reservedFor[i] = null;
                if (stale != null) {
                    growth.releaseReserved(pool, stale);
                }
                reservedFor[i] = growth.reserveFor(pool, cfgs[i]);
            }
        } finally {
            // What no pool took: a refusal's, or a chunk a growth since made needless.
            for (int i = 0; i < types.length; i++) {
                if (reservedFor[i] != null) {
                    growth.releaseReserved(pools[types[i].ordinal()], reservedFor[i]);
                }
            }
        }
        for (int i = 0; i < types.length; i++) {
            trimToLimit(pools[types[i].ordinal()], cfgs[i]);
        }
    }

    /**
     * Under every pool's lock, taken in pool order as {@link Figures#memoryInfo} takes them: checks
     * each pool of the edit, then, none refusing, sets its configuration and adds its chunk (each
     * chunk taken is cleared from {@code chunks}).
     *
     * @return -1 once taken; else, nothing changed, the index of a pre-allocating pool that would hold
     *         less than its initial size (its chunk no longer fits the new limit, or no longer suffices)
     * @throws MemoryException closed, or a limit below the pool's live blocks; nothing changed
     */
    private int take(MemoryType[] types, MemoryPoolConfig[] cfgs, Growth.Reserved[] chunks) {
        // A defragmentation's device copy is waited for holding no pool: the figures, the close and
        // the other pools' allocations go on meanwhile.
        for (Pool moving; (moving = Pool.acquireAllUnlessMoving(pools)) != null; ) {
            moving.awaitMoveEnd(Long.MAX_VALUE);
        }
        int locked = pools.length;
        try {
            for (int i = 0; i < types.length; i++) {
                Pool pool = pools[types[i].ordinal()];
                // Closed while this call waited for another on configuring; the manager is closed
                // before the close proper marks each pool, so both are asked.
                if (pool.closed || lifecycle.closed) {
                    throw checks.closed();
                }
                if (Checks.limits(cfgs[i])) {
                    // The caller's check ran before it waited for its turn: a block allocated since
                    // counts here, where no carve runs (the caches were drained just before).
                    checks.limitCoversUse(pool.type, cfgs[i], figures.liveBytes(pool));
                }
                if (preAllocates(cfgs[i]) && holdsOnceTaken(pool, cfgs[i], chunks[i]) < cfgs[i].initialSize()) {
                    return i;
                }
            }
            for (int i = 0; i < types.length; i++) {
                Pool pool = pools[types[i].ordinal()];
                pool.configure(cfgs[i]);
                if (chunks[i] != null && growth.addReserved(pool, chunks[i])) {
                    chunks[i] = null;
                }
            }
            return -1;
        } finally {
            for (int i = locked - 1; i >= 0; i--) {
                pools[i].lock.unlock();
            }
        }
    }

    private static boolean preAllocates(MemoryPoolConfig cfg) {
        return cfg.preAllocate() && cfg.initialSize() > 0;
    }

    /**
     * Under {@code pool}'s lock: @return what it would hold under {@code cfg} once it took {@code
     * chunk} (or null), as {@link Growth#addReserved} takes it: only where the limit admits it
     */
    private static long holdsOnceTaken(Pool pool, MemoryPoolConfig cfg, Growth.Reserved chunk) {
        long size = chunk == null ? 0 : chunk.chunk().size();
        return chunk != null && pool.reserved + size <= Pool.limitOf(cfg) ? pool.reserved + size : pool.reserved;
    }

    /**
     * A limit below what the pool holds (a maxSize, a fixed pool's initialSize): its empty chunks go
     * back now, as trim would give them, so that reserved does not stand above the limit just set (a
     * chunk with live blocks stays: the check made sure they fit).
     */
    private void trimToLimit(Pool pool, MemoryPoolConfig cfg) {
        if (Checks.limits(cfg)) {
            maintenance.trim(pool, cfg.enableAutoExpansion() ? cfg.maxSize().getAsLong() : cfg.initialSize());
        }
    }

    @Override
    public void checkPoolConfig(MemoryType type, MemoryPoolConfig cfg) {
        checkOpen();
        Checks.type(type);
        checks.poolConfig(type, cfg);
        if (Checks.limits(cfg)) {
            checks.limitCoversUse(type, cfg, figures.liveBytes(pools[type.ordinal()]));
        }
    }

    @Override
    public MemoryPoolConfig poolConfig(MemoryType type) {
        checkOpen();
        Checks.type(type);
        return pools[type.ordinal()].config;
    }

    @Override
    public long trim() {
        checkOpen();
        return maintenance.trim();
    }

    @Override
    public CompletionStage<DefragmentationStats> defragment(Device d) {
        checkOpen();
        checks.device(d);
        try {
            return maintenance.defragment();
        } finally {
            // A move changes no used bytes, but a place the device failed to clear stays out of use,
            // counted as used: the level may have changed, and nothing else would tell it.
            pressure.check();
        }
    }

    @Override
    public void setPressureCallback(Consumer<MemoryPressure> callback) {
        pressure.setCallback(callback);
    }

    @Override
    public boolean addPressureObserver(MemoryObserver observer) {
        return pressure.addObserver(observer);
    }

    @Override
    public void removePressureObserver(MemoryObserver observer) {
        pressure.removeObserver(observer);
    }

    @Override
    public MemorySegment mapMemory(MemoryHandle handle, MemoryAccess access) {
        Checks.access(access);
        return mappings.map(resolve(handle), handle, access);
    }

    @Override
    public <R> R withMapped(MemoryHandle handle, MemoryAccess access, Function<? super MemorySegment, ? extends R> action) {
        Checks.access(access);
        Checks.action(action);
        try {
            return dataPath.withMapped(resolve(handle), handle, access, action);
        } catch (Scopes.StaleName e) {
            throw checks.invalidHandle(handle);
        } catch (Mappings.Staged e) {
            throw e.refusal(checks, handle);
        }
    }

    @Override
    public void unmapMemory(MemoryHandle handle) {
        mappings.unmap(resolve(handle), handle);
    }

    @Override
    public MemoryMapping createMapping(Device sourceDevice, Device targetDevice, long size) {
        checkOpen();
        checks.mappingDevices(sourceDevice, targetDevice);
        return mappings.createMapping(sourceDevice, targetDevice, size);
    }

    @Override
    public long issueAlias(Block b) {
        return mappings.issueForPeer(b);
    }

    @Override
    public void ownerClosed(Block b, Device owner) {
        mappings.ownerClosed(b, owner);
    }

    @Override
    public void withdrawAlias(Block b, long alias) {
        mappings.withdraw(b, alias);
    }

    @Override
    public void prefetch(MemoryHandle handle, Device target) {
        Checks.prefetchTarget(target);
        transfers.prefetch(resolve(handle), handle, target);
    }

    @Override
    public Optional<MemoryAccessStats> accessStats(MemoryHandle handle) {
        return figures.accessStats(handle);
    }

    @Override
    public void setUsageHint(MemoryHandle handle, MemoryUsageHint hint) {
        Checks.usageHint(hint);
        transfers.advise(resolve(handle), handle, hint);
    }

    @Override
    public Optional<MemoryUsageHint> usageHint(MemoryHandle handle) {
        return figures.usageHint(handle);
    }

    @Override
    public void close() {
        if (!lifecycle.beginClose()) {
            lifecycle.retryClose();
            return;
        }
        closeBegun(false);
    }

    /**
     * Decides under every pool's lock (see {@link Lifecycle}, "Closing only if unused"): the pool path
     * names no block meanwhile, and a name published outside the locks waits for the decision. A pool
     * a defragmentation holds across device copies is waited for holding no lock and deciding nothing
     * ({@link Pool#acquireAllUnlessMoving}), up to the close's limit; past it the call refuses.
     */
    @Override
    public boolean closeIfUnused() {
        long deadline = System.nanoTime() + lifecycle.closeWaitNanos();
        while (true) {
            if (!lifecycle.beginDeciding()) {
                return true;
            }
            boolean closes;
            boolean unused = false;
            Pool moving = null;
            boolean locked = false;
            try {
                // Never waits for a defragmentation's device copy while holding a pool, nor deciding:
                // the figures, the close and the allocations (the cached path waits for a decision)
                // would wait for that copy too.
                moving = Pool.acquireAllUnlessMoving(pools);
                locked = moving == null;
                unused = locked && issuedAliases.isEmpty() && !anyNamed();
            } finally {
                // Exactly once, a throw refusing: Lifecycle counts the calls still deciding.
                closes = lifecycle.decided(unused);
                if (closes) {
                    for (Pool pool : pools) {
                        pool.closed = true; // the pool path refuses from now on, as after the close proper
                    }
                }
                if (locked) {
                    for (int i = pools.length - 1; i >= 0; i--) {
                        pools[i].lock.unlock();
                    }
                }
            }
            if (moving == null) {
                if (!closes) {
                    return lifecycle.closed;
                }
                closeBegun(true);
                return true;
            }
            // A defragmentation moves blocks: decided again once it ends; refused if it holds the pool
            // past the close's limit (a device copy that does not return), as a close would leave it.
            if (!lifecycle.awaitMoveToDecide(moving, deadline)) {
                return lifecycle.closed;
            }
        }
    }

    /** Under every pool's lock: @return true if any block is named by a handle (a live block) */
    private boolean anyNamed() {
        for (Pool pool : pools) {
            for (Block b : pool.allocatedBlocks()) {
                if (b.isNamed()) {
                    return true;
                }
            }
        }
        return false;
    }

    /**
     * The close proper, once {@link Lifecycle#closed} is set by this call.
     *
     * @param decidedUnused {@link #closeIfUnused} closes: no block was named when it looked
     */
    private void closeBegun(boolean decidedUnused) {
        if (coarseClock) {
            CoarseClock.release();
        }
        caches.close();
        // Aliases this manager issued for peers' blocks die with it: their memory is not named forever.
        issuedAliases.dropAll();
        try {
            // Throws an Error of the upstream's releases only once every chunk went: the close finishes.
            lifecycle.closePools(handles, decidedUnused);
        } finally {
            if (ownsStreams) {
                streams.close();
            }
            pressure.reset();
            lifecycle.finishClose();
        }
    }

    @Override
    public boolean isClosed() {
        return lifecycle.closed;
    }

    @Override
    public String toString() {
        return "PooledMemoryManager[" + device + ", " + upstream.backendName() + "]";
    }
}
