package io.ferrum.memory.pool.internal;

import java.lang.invoke.VarHandle;
import java.time.Instant;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.concurrent.atomic.LongAdder;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryAccessStats;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.MemoryUsageHint;

/**
 * What a manager reports: the full figures ({@link #memoryInfo}, every pool lock at once), the
 * cheap ones ({@link #quickInfo}, lock-free from the {@link DeviceAccount}), one handle's
 * ({@link #handleInfo}, {@link #accessStats}, {@link #usageHint}) and the list of live handles
 * (those {@link #handleInfo} answers for: the handles this manager issued).
 *
 * <p><b>Definitions.</b> used = bytes of the pools' non-free blocks less those in thread caches
 * (free for their threads' next allocations); live = those blocks' count, likewise; reserved = the
 * pools' chunks; fragmentation = the share of the free bytes inside the chunks that lie outside the
 * largest free run of their own chunk (0 when there are none), blocks in thread caches counting as
 * free there as they do in used: an empty pool, or one just compacted (each chunk's live blocks
 * together, one free run after them), reads 0, and the figure rises as free space splits into holes
 * between live blocks; bandwidth = bytes copied / nanoseconds spent copying, over the manager's life.
 *
 * <p><b>Invariants.</b> {@link #memoryInfo} is one instant's: it holds every pool lock, always in
 * pool order (no other path holds two), and reads the caches at one moment under them. The cheap
 * figures may mix two instants; their fragmentation is the last full report's (recorded under the
 * locks, so the newest of two reports at once). Per-handle answers
 * are empty (never wrong) when the handle was freed, even if its block was reused meanwhile.
 */
final class Figures {
    private final Device device;
    private final long capacity;
    private final Pool[] pools;
    private final DeviceAccount account;
    private final ThreadCaches caches;
    private final HandleTable handles;
    private final Lifecycle lifecycle;
    private final Instant epoch;
    private final long epochNanos;
    private final LongAdder copiedBytes = new LongAdder();
    private final LongAdder copyNanos = new LongAdder();
    /** The fragmentation ratio of the last full {@link #memoryInfo}, for {@link #quickInfo}. */
    private volatile double lastFragmentation;
    /** Tests only: run by {@link #memoryInfo} once it let the pools' locks go; null otherwise. */
    static volatile Runnable unlockedForTests;

    Figures(Device device, Pool[] pools, DeviceAccount account, ThreadCaches caches, HandleTable handles,
            Lifecycle lifecycle, Instant epoch, long epochNanos) {
        this.device = device;
        this.capacity = account.capacity();
        this.pools = pools;
        this.account = account;
        this.caches = caches;
        this.handles = handles;
        this.lifecycle = lifecycle;
        this.epoch = epoch;
        this.epochNanos = epochNanos;
    }

    /** Counts a copy of {@code bytes} that took {@code nanos} (more than zero) for the bandwidth. */
    void copied(long bytes, long nanos) {
        copiedBytes.add(bytes);
        copyNanos.add(nanos);
    }

    MemoryInfo memoryInfo() {
        return atOneMoment(true);
    }

    /**
     * The used bytes {@link #memoryInfo} reports, of one instant as there, without walking the blocks
     * for the fragmentation: for the pressure level a teller tells.
     */
    long usedAtOneMoment() {
        return atOneMoment(false).usedBytes();
    }

    /** @param walk walk the blocks for the fragmentation; else report the last one's */
    private MemoryInfo atOneMoment(boolean walk) {
        while (true) {
            MemoryInfo info = tryMemoryInfo(walk);
            if (info != null) {
                return info;
            }
        }
    }

    /**
     * The full figures, with every pool's lock but those a defragmentation holds across device copies:
     * those pools' figures are the ones their move found, which stand until it ends.
     *
     * @param walk walk the blocks for the fragmentation; else report the last full report's
     * @return the figures; null when a move whose figures were read ended before the caches were
     *         (the figures read would then be of no one instant): the caller reads again
     */
    private MemoryInfo tryMemoryInfo(boolean walk) {
        long reserved = 0;
        long used = 0;
        long live = 0;
        long freeInReserved = 0;
        long scattered = 0;
        long[] cached;
        double fragmentation;
        // Blocks move between a pool and a cache only under its lock or by a cache's owner, so used
        // and live are those of one instant.
        Pool.BeforeMove[] moves = new Pool.BeforeMove[pools.length];
        int locked = 0;
        try {
            for (Pool pool : pools) {
                // A pool a defragmentation holds (for good, under a device copy that never returns) is
                // read from the figures its move found: a move changes none of them.
                Pool.BeforeMove m = pool.acquireUnlessMoving();
                if (m != null) {
                    moves[locked++] = m;
                    reserved += m.reserved();
                    used += m.used();
                    live += m.live();
                    freeInReserved += m.freeInReserved();
                    scattered += m.scattered();
                    continue;
                }
                locked++;
                reserved += pool.reserved;
                used += pool.used;
                live += pool.live;
                if (walk) {
                    // Blocks in thread caches are free in these figures: a hole they sit in is no hole.
                    long[] fs = pool.freeAndScattered(caches.enabled());
                    freeInReserved += fs[0];
                    scattered += fs[1];
                }
            }
            cached = caches.cachedAtOneMoment();
            // The caches were read while each move read went on: the pools' figures stood meanwhile.
            for (int i = 0; i < locked; i++) {
                if (moves[i] != null && pools[i].moving != moves[i]) {
                    return null;
                }
            }
            fragmentation = lastFragmentation;
            if (walk) {
                // Free bytes split by chunk boundaries are not fragmentation: no compaction joins them.
                fragmentation = freeInReserved == 0 ? 0.0 : (double) scattered / (double) freeInReserved;
                fragmentation = Math.max(0.0, Math.min(1.0, fragmentation));
                // Recorded under the locks: of two readings at once, the later one's ratio is the one kept.
                lastFragmentation = fragmentation;
            }
        } finally {
            for (int i = locked - 1; i >= 0; i--) {
                if (moves[i] == null) {
                    pools[i].lock.unlock();
                }
            }
        }
        Runnable seam = unlockedForTests;
        if (seam != null) {
            seam.run();
        }
        used = Math.max(0, used - cached[0]);
        live = Math.max(0, live - cached[1]);
        return new MemoryInfo(capacity, used, Math.max(0, capacity - used), reserved, live, fragmentation, bandwidth());
    }

    /**
     * @return each pool's reserved bytes, for the pools that hold any; each read under its pool's
     *         lock, or from the figures the move found where a defragmentation holds that lock
     */
    Map<MemoryType, Long> reservedByType() {
        Map<MemoryType, Long> out = new EnumMap<>(MemoryType.class);
        for (Pool pool : pools) {
            Pool.BeforeMove m = pool.acquireUnlessMoving();
            if (m != null) {
                if (m.reserved() > 0) {
                    out.put(pool.type, m.reserved());
                }
                continue;
            }
            try {
                if (pool.reserved > 0) {
                    out.put(pool.type, pool.reserved);
                }
            } finally {
                pool.lock.unlock();
            }
        }
        return out;
    }

    private OptionalDouble bandwidth() {
        long nanos = copyNanos.sum();
        return nanos == 0 ? OptionalDouble.empty() : OptionalDouble.of((double) copiedBytes.sum() / (double) nanos);
    }

    MemoryInfo quickInfo() {
        long used = account.used();
        // The pools' chunks, as memoryInfo reports them: not those still being asked for.
        long reserved = Math.max(account.held(), used);
        long[] cached = caches.cached();
        used = Math.max(0, used - cached[0]);
        return new MemoryInfo(capacity, used, Math.max(0, capacity - used), reserved,
                Math.max(0, account.live() - cached[1]), lastFragmentation, bandwidth());
    }

    /** @return bytes of the pool's live blocks: its used bytes less its blocks in thread caches */
    long liveBytes(Pool pool) {
        pool.acquire();
        try {
            return pool.used - caches.cachedBytesOf(pool);
        } finally {
            pool.lock.unlock();
        }
    }

    /** @return the live block named by {@code handle}, or null; never throws */
    Block liveOrNull(MemoryHandle handle) {
        return lifecycle.closed || handle == null || !handle.isValid() ? null : handles.lookup(handle.id());
    }

    private MemoryHandleInfo info(Block b, long id) {
        MemoryHandleInfo i = new MemoryHandleInfo(new MemoryHandle(id), b.requested, device, b.alignment,
                epoch.plusNanos(b.allocatedAtNanos - epochNanos), b.mapping != null, b.pool.type);
        return b.isNamedBy(id) ? i : null;
    }

    Optional<MemoryHandleInfo> handleInfo(MemoryHandle handle) {
        Block b = liveOrNull(handle);
        return b == null ? Optional.empty() : Optional.ofNullable(info(b, handle.id()));
    }

    /**
     * @param issuedAliases the aliases this manager issued for peers' blocks
     * @return one entry per live block for each handle of this manager that names it, as {@link
     *         #handleInfo} answers them: a block of the pools under its first handle, or under its
     *         alias once that is freed if this manager issued the alias; a peer's block under the
     *         alias issued here. A block of the pools named by a peer's alias alone is the peer's to list.
     */
    List<MemoryHandleInfo> handles(IssuedAliases issuedAliases) {
        List<MemoryHandleInfo> out = new ArrayList<>();
        for (Pool pool : pools) {
            pool.acquire();
            try {
                for (Block b : pool.liveBlocks()) {
                    // A mapping's block may be named by its alias alone (its first handle was freed).
                    long id = b.handleId != 0 ? b.handleId : b.aliasId;
                    MemoryHandleInfo i = id != 0 && handles.isOwn(id) ? info(b, id) : null;
                    if (i != null) {
                        out.add(i);
                    }
                }
            } finally {
                pool.lock.unlock();
            }
        }
        for (long alias : issuedAliases.ids()) {
            // A peer's block, read as handleInfo reads one: the answer stands only if the alias still names it.
            Block b = handles.lookup(alias);
            MemoryHandleInfo i = b == null ? null : info(b, alias);
            if (i != null) {
                out.add(i);
            }
        }
        return out;
    }

    Optional<MemoryAccessStats> accessStats(MemoryHandle handle) {
        Block b = liveOrNull(handle);
        AccessTracker t = b == null ? null : b.access;
        if (t == null) {
            return Optional.empty();
        }
        MemoryAccessStats stats = t.snapshot(epoch, epochNanos, b.allocatedAtNanos);
        // A block freed and reused meanwhile keeps its tracker: its figures are not this handle's.
        return b.isNamedBy(handle.id()) ? Optional.of(stats) : Optional.empty();
    }

    Optional<MemoryUsageHint> usageHint(MemoryHandle handle) {
        return hintOf(liveOrNull(handle), handle);
    }

    /** @return the hint of {@code b}, the block {@code handle} named when it was looked up (or null), if it still does */
    Optional<MemoryUsageHint> hintOf(Block b, MemoryHandle handle) {
        if (b == null) {
            return Optional.empty();
        }
        MemoryUsageHint hint = b.hint;
        // A block freed and reused meanwhile may carry its new owner's hint: not this handle's. The
        // name is read after the hint (the fence keeps the two reads in that order).
        VarHandle.loadLoadFence();
        return b.isNamedBy(handle.id()) ? Optional.ofNullable(hint) : Optional.empty();
    }
}
