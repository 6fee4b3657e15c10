package io.ferrum.memory.pool.internal;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.pool.DeviceChunk;
import io.ferrum.memory.pool.DeviceUpstream;
import io.ferrum.memory.pool.PoolLog;

/**
 * A manager's life: open, closed, and the work on its memory that runs outside a pool's lock and
 * that a close must not cut short.
 *
 * <p><b>In-flight work.</b> Work outside a pool's lock on its memory (a pin: a copy, a zeroing
 * fill, a scrub; a growth; a trim's release) counts in {@link Pool#inflight}: it enters under the
 * pool's lock and leaves through {@link #leave}, also under it. A close releases a pool's chunks
 * only when that count is zero: it waits for it up to {@value #CLOSE_WAIT_SECONDS} s, and after its
 * wait (or at once, interrupted) leaves the release to whoever ends the last such work
 * ({@link Pool#releaseWhenIdle}); a freed block whose view a native operation still holds open
 * ({@link Pool#stuckViews}) keeps its pool's chunks until it can close: then the next to look
 * ({@link #releaseIfDone}: a later close, the last work's end, the last name of a block of the pool
 * going) releases them. A close called from inside a
 * {@code withMapped} action does not wait at all: the action's own scope is work that only its
 * return can end, so the last work to end releases the chunks. Nor does one called where an async
 * operation's work ends (a pressure callback told by its unpin, on the stream's thread): that work
 * may still pin its other block, and the work queued behind it on its stream runs only after it.
 *
 * <p><b>Closing only if unused.</b> {@link PoolEngine#closeIfUnused} decides under every pool's
 * lock ({@link #beginDeciding}, {@link #decided}). The pool path names blocks under a pool's lock,
 * so it is decided before or after; a name published outside the locks (a block from a thread's
 * cache, a block named after its zeroing fill, an alias issued for a peer) reads {@link #unsettled}
 * after publishing it and, when set, asks {@link #admits}: the decision sees the name (and refuses)
 * or the name's owner sees the decision (and is refused as on a closed manager), never neither.
 * A close so decided reports no leak: a block named when it looks for them is one whose owner is
 * refused, and withdraws the name outside any lock, perhaps only after the close has looked.
 *
 * <p><b>Holds.</b> The upstream closes after the last chunk is released: {@link #closeHolds}
 * counts the close itself plus each pool whose release was deferred; the last to let go closes the
 * upstream. Invariant: the upstream is closed exactly once, after every chunk went back.
 */
final class Lifecycle {
    static final long CLOSE_WAIT_SECONDS = 30;
    private static final long CLOSE_WAIT_NANOS = TimeUnit.SECONDS.toNanos(CLOSE_WAIT_SECONDS);

    private final Device device;
    private final DeviceUpstream upstream;
    private final DeviceAccount account;
    private final PoolLog log;
    private final Pool[] pools;
    /** Read on every call of the front: set once, by the first close. */
    volatile boolean closed;
    /**
     * Set before a close begins or a conditional close decides; cleared only when the last
     * conditional close still deciding refuses. A name published outside the pools' locks reads it
     * after publishing.
     */
    volatile boolean unsettled;
    /**
     * Under this object's monitor: how many conditional closes are deciding (two may run at once; the
     * first to refuse must not settle the manager while the other has yet to decide).
     */
    private int deciding;
    /** The close itself and each pool whose release waits for its last work; the upstream closes at zero. */
    private final AtomicInteger closeHolds = new AtomicInteger(1);
    /**
     * Blocks of pools that a view in native use kept at close, named by aliases in peers' tables:
     * those aliases stay so that their frees may release the pools, and die once the last of this
     * manager's memory is released ({@link #finishClose}). Set by the close before it lets go of its hold.
     */
    private volatile List<Block> keptAliases = List.of();

    Lifecycle(DeviceUpstream upstream, DeviceAccount account, PoolLog log, Pool[] pools) {
        this.device = upstream.device();
        this.upstream = upstream;
        this.account = account;
        this.log = log;
        this.pools = pools;
    }

    /**
     * Under the pool's lock: one piece of work outside the lock ({@link Pool#inflight}) has ended.
     *
     * @return the chunks to release, when it was the last work on a pool that close left to it; else null
     */
    static List<DeviceChunk> leave(Pool pool) {
        if (--pool.inflight > 0) {
            return null;
        }
        pool.idle.signalAll();
        return releaseIfDone(pool);
    }

    /**
     * Under the pool's lock, on a pool that close left to its last work: closes the views that
     * native operations held open where they can close now, and if none is left and no work runs,
     * hands over the pool's chunks.
     *
     * @return the chunks to release ({@link #releaseDeferred}), or null
     */
    static List<DeviceChunk> releaseIfDone(Pool pool) {
        if (!pool.releaseWhenIdle) {
            return null;
        }
        pool.stuckViews.removeIf(b -> b.mapping == null || Reclaimer.closeArena(b, b.mapping));
        if (!pool.stuckViews.isEmpty() || pool.inflight > 0) {
            return null;
        }
        pool.releaseWhenIdle = false;
        return pool.takeAllChunks();
    }

    /** Takes the pool's lock to {@link #leave} it, then {@link #releaseDeferred} what that handed over. */
    void leaveLocking(Pool pool) {
        List<DeviceChunk> release;
        pool.acquire();
        try {
            release = leave(pool);
        } finally {
            pool.lock.unlock();
        }
        releaseDeferred(release);
    }

    /**
     * Outside the locks: releases what {@link #leave} handed over and ends the close when it was the
     * last, whatever the release throws.
     */
    void releaseDeferred(List<DeviceChunk> chunks) {
        if (chunks == null) {
            return;
        }
        try {
            releaseChunks(chunks);
        } finally {
            finishClose();
        }
    }

    /**
     * Outside the locks: gives chunks back to the upstream and their capacity to the account, every
     * one of them whatever a release throws. A RuntimeException is logged; an Error (a backend whose
     * classes went away under a refresh: a LinkageError) is thrown once all went, the first one, any
     * later ones suppressed by it.
     */
    void releaseChunks(List<DeviceChunk> chunks) {
        Error failed = null;
        for (DeviceChunk c : chunks) {
            try {
                upstream.release(c);
            } catch (RuntimeException e) {
                log.warn(device + ": releasing a chunk of " + c.size() + " bytes failed", e);
            } catch (Error e) {
                failed = firstOf(failed, e);
            } finally {
                account.unbook(c.size());
            }
        }
        if (failed != null) {
            throw failed;
        }
    }

    /** @return {@code first}, suppressing {@code next}; or {@code next} when there was none before */
    private static Error firstOf(Error first, Error next) {
        if (first == null) {
            return next;
        }
        if (first != next) {
            first.addSuppressed(next);
        }
        return first;
    }

    /** @return true if this call closed the manager; false if it was closed already */
    synchronized boolean beginClose() {
        if (closed) {
            return false;
        }
        unsettled = true;
        closed = true;
        return true;
    }

    /** @return false if closed already; else a conditional close decides until {@link #decided} */
    synchronized boolean beginDeciding() {
        if (closed) {
            return false;
        }
        deciding++;
        unsettled = true;
        return true;
    }

    /**
     * Ends a conditional close's decision and wakes the names waiting for it.
     *
     * @param close no live block was found: the manager closes
     * @return true if this call closed the manager (no plain close came meanwhile)
     */
    synchronized boolean decided(boolean close) {
        deciding--;
        notifyAll();
        if (closed) {
            return false;
        }
        if (close) {
            closed = true;
            return true;
        }
        if (deciding == 0) {
            unsettled = false;
        }
        return false;
    }

    /**
     * Tests only: run by a name's owner that {@link #admits} refused, outside the monitor, before the
     * owner withdraws the name; null otherwise (read only on that refusal, never on an open manager).
     */
    static volatile Runnable refusedForTests;

    /**
     * Called by whoever published a name outside the pools' locks and then read {@link #unsettled}
     * set: waits for a conditional close's decision (it holds no lock the caller could).
     *
     * @return true if the manager stays open and the name may be handed out; false if it closed
     */
    boolean admits() {
        if (awaitDecision()) {
            return true;
        }
        Runnable hook = refusedForTests;
        if (hook != null) {
            hook.run();
        }
        return false;
    }

    /** @return true if the manager stays open once no conditional close is deciding */
    private synchronized boolean awaitDecision() {
        boolean interrupted = false;
        while (deciding > 0) {
            try {
                wait();
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
        return !closed;
    }

    /**
     * The close proper, after the caches and aliases are gone: marks every pool closed, waits for
     * its in-flight work, closes every view, reports what was still allocated, and releases the
     * chunks of each pool that no work holds (the others are released by their last work, or by a
     * later close when a view held them).
     *
     * @param decidedUnused a conditional close found no named block under every pool's lock: a block
     *                      named now was named outside the locks after that look, and its owner is
     *                      refused ({@link #admits}), so it is no allocation to report
     * @throws Error the first an upstream's release threw ({@link #releaseChunks}), once the rest of
     *         this close is done
     */
    void closePools(HandleTable handles, boolean decidedUnused) {
        LeakReport leaks = new LeakReport(device);
        int deferred = 0;
        int stuck = 0;
        List<DeviceChunk> chunks = new ArrayList<>();
        // Blocks named by aliases in peers' tables: those aliases die after the pools' locks go.
        List<Block> aliased = new ArrayList<>();
        List<Block> kept = new ArrayList<>();
        // Asked once, only when a scope is inside a block: a close called from a withMapped action.
        Boolean insideAction = null;
        // Asked once, only when work is in flight: a close called where an async operation's work ends
        // (a pressure callback told by the unpin that gave a freed block back).
        Boolean endingAsync = null;
        for (Pool pool : pools) {
            pool.acquire();
            try {
                pool.closed = true;
                pool.grown.signalAll();
                pool.settled.signalAll();
                // Scopes (withMapped, read, write) pin without the lock: each block with one inside
                // is one piece of work, ended by its last scope to leave.
                int scoped = Scopes.closeAll(pool);
                pool.inflight += scoped;
                if (scoped > 0 && insideAction == null) {
                    insideAction = DataPath.callerInsideAction();
                }
                if (pool.inflight > 0 && endingAsync == null) {
                    endingAsync = Transfers.callerEndsAsyncWork();
                }
                // The caller's own action, or the async work it is ending (which may still pin a block,
                // and behind which its stream holds the work queued there), is work only its return
                // can end: waiting for it would wait out the whole limit. Its end (or the last other
                // work's) releases the chunks then.
                if (insideAction != Boolean.TRUE && endingAsync != Boolean.TRUE) {
                    awaitIdle(pool);
                }
                int aliasedBefore = aliased.size();
                for (Block b : pool.allocatedBlocks()) {
                    // Every view goes, of blocks still named and of blocks a racing free has claimed alike.
                    MappingState m = b.mapping;
                    if (m != null && !Reclaimer.closeArena(b, m) && !pool.stuckViews.contains(b)) {
                        pool.stuckViews.add(b);
                    }
                    if (!b.isNamed()) {
                        continue;
                    }
                    if (!decidedUnused) {
                        leaks.add(b);
                    }
                    handles.unregister(b, b.handleId);
                    if (b.issuer != null) {
                        aliased.add(b);
                    }
                }
                if (!pool.stuckViews.isEmpty()) {
                    // A view a native operation holds keeps the pool's chunks: the aliases stay, so
                    // that the last of their frees may release them (releaseIfDone), as it would
                    // for the view of an aliased block, until the pool is released otherwise.
                    List<Block> stay = aliased.subList(aliasedBefore, aliased.size());
                    kept.addAll(stay);
                    stay.clear();
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
        if (!kept.isEmpty()) {
            keptAliases = kept;
        }
        Error failed = null;
        try {
            releaseChunks(chunks);
        } catch (Error e) {
            failed = e; // every chunk went: the close goes on, and its caller hears of it at the end
        }
        endAliases(aliased);
        if (stuck > 0) {
            log.warn(device + ": closed while native operations still used " + stuck + " mapped views;"
                    + " their pools' memory stays reserved until those views can close (the last handle of their blocks"
                    + " freed, or close() called again after those operations end)", null);
        }
        if (deferred > 0) {
            log.warn(device + ": closed while " + deferred + " copies, upstream calls or withMapped actions still ran on its memory;"
                    + " that memory is released when the last of them ends", null);
        }
        leaks.tell(log);
        if (failed != null) {
            throw failed;
        }
    }

    /** Under the pool's lock: waits up to the close's limit for the pool's in-flight work to end. */
    private static void awaitIdle(Pool pool) {
        long deadline = System.nanoTime() + CLOSE_WAIT_NANOS;
        while (pool.inflight > 0) {
            long left = deadline - System.nanoTime();
            if (left <= 0) {
                return;
            }
            try {
                pool.idle.awaitNanos(left);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /**
     * A second close: pools that views in use by native operations kept open are released now,
     * where those views close (and no copy runs on them any more).
     */
    void retryClose() {
        Error failed = null;
        for (Pool pool : pools) {
            List<DeviceChunk> release = null;
            pool.acquire();
            try {
                release = releaseIfDone(pool);
            } finally {
                pool.lock.unlock();
            }
            try {
                releaseDeferred(release);
            } catch (Error e) {
                failed = firstOf(failed, e); // the other pools are released all the same
            }
        }
        if (failed != null) {
            throw failed;
        }
    }

    /**
     * Outside the locks: each alias in a peer's table of {@code blocks} dies (the peer then answers
     * that this manager is closed), so that the peer keeps nothing of this manager: on another
     * backend, another bundle's classes.
     */
    private void endAliases(List<Block> blocks) {
        for (Block b : blocks) {
            AliasIssuer issuer = b.issuer;
            if (issuer != null) {
                issuer.ownerClosed(b, device);
            }
        }
    }

    /**
     * Drops one hold on the upstream (the close's own, or a pool's deferred release); the last closes
     * it, and ends the aliases kept for views in native use: no pool is left for their frees to release.
     */
    void finishClose() {
        if (closeHolds.decrementAndGet() == 0) {
            try {
                upstream.close();
            } catch (RuntimeException e) {
                log.warn(device + ": closing the upstream failed", e);
            }
            List<Block> kept = keptAliases;
            keptAliases = List.of();
            endAliases(kept);
        }
    }
}
