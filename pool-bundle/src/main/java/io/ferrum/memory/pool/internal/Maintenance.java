package io.ferrum.memory.pool.internal;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.TimeUnit;

import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.pool.DeviceChunk;
import io.ferrum.memory.pool.PoolLog;

/**
 * Giving memory back and tidying it: trim (empty chunks back to the upstream), defragment
 * (compact every pool, then trim) and auto-GC.
 *
 * <p><b>Auto-GC</b> ({@code enableAutoGc}) runs in two cases: 1. when an allocation takes a pool's
 * utilisation (its used bytes, thread-cached blocks included, over the most it may hold: maxSize, or
 * the device's capacity) above {@code gcThreshold}: trim, then compact that pool; once per crossing,
 * armed again when the pool's used bytes fall back to the line, or when configurePool moves the
 * line to or above them ({@link Pool#crossedGcLine}); a
 * threshold of 1 never crosses, one of 0 crosses when an empty pool gets a block. The allocation
 * is done before this auto-GC runs: a failure of it (a device that fails a copy) is logged, and the
 * allocation returns its handle. 2. as the
 * {@link OutOfMemoryHook}, when a pool cannot grow: the thread caches go back to their pools
 * (always: cached blocks are memory too), then trim and compact the starved pool, and the
 * allocation tries once more, also when the compaction failed (logged): the trim before it may
 * have made the room.
 *
 * <p><b>Invariants.</b> A trim keeps what pre-allocated pools hold ({@code initialSize}); its
 * releases run outside the pool's lock as in-flight work, so a close waits for them and the
 * upstream closes after. Compaction runs under the pool's lock and moves only movable blocks
 * ({@link Compactor}).
 */
final class Maintenance implements OutOfMemoryHook {
    private final Pool[] pools;
    private final ThreadCaches caches;
    private final Reclaimer reclaimer;
    private final Lifecycle lifecycle;
    private final Compactor compactor;
    private final Checks checks;
    private final Figures figures;
    private final boolean autoGc;
    private final Device device;
    private final PoolLog log;

    Maintenance(Pool[] pools, ThreadCaches caches, Reclaimer reclaimer, Lifecycle lifecycle, Compactor compactor,
                Checks checks, Figures figures, boolean autoGc, Device device, PoolLog log) {
        this.pools = pools;
        this.caches = caches;
        this.reclaimer = reclaimer;
        this.lifecycle = lifecycle;
        this.compactor = compactor;
        this.checks = checks;
        this.figures = figures;
        this.autoGc = autoGc;
        this.device = device;
        this.log = log;
    }

    /** @return bytes given back to the upstream */
    long trim() {
        caches.drainAll();
        reclaimer.retryStuckViews(pools);
        long released = 0;
        for (Pool pool : pools) {
            released += trim(pool, -1);
        }
        return released;
    }

    /**
     * Gives back {@code pool}'s empty chunks (beyond the initial size it pre-allocates) if it holds
     * more than {@code above} bytes; the caller drained the caches. A closed pool gives back nothing
     * here: its close gives back every chunk.
     *
     * @return bytes given back to the upstream
     */
    long trim(Pool pool, long above) {
        List<DeviceChunk> empty;
        pool.acquire();
        try {
            if (pool.closed) {
                return 0;
            }
            if (pool.reserved <= above) {
                return 0;
            }
            MemoryPoolConfig cfg = pool.config;
            empty = pool.takeEmptyChunks(cfg.preAllocate() ? cfg.initialSize() : 0);
            if (empty.isEmpty()) {
                return 0;
            }
            pool.inflight++; // a close waits until these are released: the upstream closes after
        } finally {
            pool.lock.unlock();
        }
        long released = 0;
        try {
            lifecycle.releaseChunks(empty);
            for (DeviceChunk c : empty) {
                released += c.size();
            }
        } finally {
            lifecycle.leaveLocking(pool);
        }
        return released;
    }

    CompletionStage<DefragmentationStats> defragment() {
        try {
            long t0 = System.nanoTime();
            double before = figures.memoryInfo().fragmentationRatio();
            caches.drainAll();
            long moved = 0;
            for (Pool pool : pools) {
                moved += compact(pool);
            }
            // What this call gave back: not the drop of the device's reserved bytes, which a pool
            // another thread grows (or trims) meanwhile changes too.
            long freed = trim();
            double after = figures.memoryInfo().fragmentationRatio();
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            return CompletableFuture.completedFuture(new DefragmentationStats(freed, moved, ms, before, after));
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    /**
     * Compacts {@code pool} under its lock, marked {@link Pool#moving} meanwhile; a close that
     * gave up waiting for it ({@link Pool#closeLeft}) is finished here, as it ends.
     */
    private long compact(Pool pool) {
        Lifecycle.Closing leftByClose = null;
        pool.acquire();
        try {
            if (pool.closed) {
                throw checks.closed();
            }
            pool.moving = Pool.BeforeMove.of(pool, caches.enabled());
            try {
                return compactor.compact(pool);
            } finally {
                pool.moving = null;
                // After moving's clearing: a close that still saw it set leaves the pool to us.
                if (pool.closeLeft) {
                    leftByClose = lifecycle.closeLeftPool(pool);
                }
            }
        } finally {
            pool.lock.unlock();
            if (leftByClose != null) {
                lifecycle.finishLeftPool(leftByClose);
            }
        }
    }

    /** Auto-GC: give back empty chunks of every pool, compact the one that asked. */
    private void gc(Pool pool) {
        trim();
        compact(pool);
    }

    /** An allocation took {@code pool} above the auto-GC line ({@link Pool#crossedGcLine}). */
    void crossedGcLine(Pool pool) {
        // The allocation is done and its handle must reach the caller.
        tidy(pool, "after an allocation crossed its gcThreshold",
                "the allocation stands, the pool stays as it was");
    }

    @Override
    public boolean growthFailed(Pool starved) {
        // Blocks cached by threads are memory too: take them back before giving up.
        caches.drainAll();
        if (autoGc) {
            // The trim may have made room to grow even if the compaction after it fails: try again.
            tidy(starved, "for an allocation it could not grow for",
                    "the allocation tries again with what the trim before it gave back");
        }
        return true;
    }

    /**
     * Auto-GC ({@link #gc}) for an allocation: tidying, so a device that fails it (a copy, a release)
     * costs the allocation nothing but the tidying; the failure is logged. A close that raced it is
     * the allocation's to see next (its pool refuses).
     */
    private void tidy(Pool pool, String when, String then) {
        try {
            gc(pool);
        } catch (DeviceUnavailableException closedMeanwhile) {
            // Said by the allocation's own next step, or by the caller's next call.
        } catch (RuntimeException e) {
            log.warn(device + ": auto-GC of the " + pool.type + " pool " + when + " failed (" + e.getMessage()
                    + "); " + then, e);
        }
    }
}
