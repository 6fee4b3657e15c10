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
    static final long CLOSE_WAIT_NANOS = TimeUnit.SECONDS.toNanos(CLOSE_WAIT_SECONDS);

    private final Device device;
    private final DeviceUpstream upstream;
    private final DeviceAccount account;
    private final PoolLog log;
    private final Pool[] pools;
    /** How long a close waits for each pool's work ({@link #CLOSE_WAIT_NANOS}; tests set less). */
    private final long closeWaitNanos;
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
        this(upstream, account, log, pools, CLOSE_WAIT_NANOS);
    }

    /** @param closeWaitNanos how long a close waits for each pool's work */
    Lifecycle(DeviceUpstream upstream, DeviceAccount account, PoolLog log, Pool[] pools, long closeWaitNanos) {
        this.device = upstream.device();
        this.upstream = upstream;
        this.account = account;
        this.log = log;
        this.pools = pools;
        this.closeWaitNanos = closeWaitNanos;
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
     * What a close gathers from its pools under their locks and acts on outside them: the blocks
     * still named, the chunks to release, the aliases to end, the work and views it leaves behind.
     */
    static final class Closing {
        final LeakReport leaks;
        final List<DeviceChunk> chunks = new ArrayList<>();
        /** Blocks named by aliases in peers' tables: those aliases die after the pools' locks go. */
        final List<Block> aliased = new ArrayList<>();
        /** Aliases that stay while a view in native use keeps their pool ({@link #keptAliases}). */
        final List<Block> kept = new ArrayList<>();
        int deferred;
        int stuck;
        /** Asked once, only when a scope is inside a block: a close called from a withMapped action. */
        Boolean insideAction;
        /**
         * Asked once, only when work is in flight: a close called where an async operation's work
         * ends (a pressure callback told by the unpin that gave a freed block back).
         */
        Boolean endingAsync;

        Closing(Device device) {
            this.leaks = new LeakReport(device);
        }
    }

    /**
     * The close proper, after the caches and aliases are gone: marks every pool closed, waits for
     * its in-flight work, closes every view, reports what was still allocated, and releases the
     * chunks of each pool that no work holds (the others are released by their last work, or by a
     * later close when a view held them). A pool whose lock a defragmentation holds for longer than
     * the close's limit (a device copy that does not return) is left to that defragmentation, which
     * closes it as it ends ({@link #closeLeftPool}).
     *
     * @param decidedUnused a conditional close found no named block under every pool's lock: a block
     *                      named now was named outside the locks after that look, and its owner is
     *                      refused ({@link #admits}), so it is no allocation to report
     * @throws Error the first an upstream's release threw ({@link #releaseChunks}), once the rest of
     *         this close is done
     */
    void closePools(HandleTable handles, boolean decidedUnused) {
        Closing c = new Closing(device);
        for (Pool pool : pools) {
            if (!acquireForClose(pool, handles, decidedUnused)) {
                continue; // left to the defragmentation that holds it, or closed by it meanwhile
            }
            try {
                closePool(pool, c, handles, decidedUnused, true);
            } finally {
                pool.lock.unlock();
            }
        }
        finish(c);
    }

    /**
     * Takes {@code pool}'s lock for the close, waiting up to the close's limit (an interrupt ends the
     * wait) for a defragmentation that holds it across device copies; past it, leaves the pool to that
     * defragmentation ({@link Pool#closeLeft}), which closes it as it ends, with one warning. The
     * other holders of the lock hold it for bookkeeping only, and are waited for.
     *
     * @return true with the lock held and the pool still to close; false if the pool is left to a
     *         defragmentation, or one closed it meanwhile
     */
    private boolean acquireForClose(Pool pool, HandleTable handles, boolean decidedUnused) {
        if (pool.lock.tryLock()) {
            return true;
        }
        long deadline = System.nanoTime() + closeWaitNanos;
        boolean interrupted = false;
        try {
            while (true) {
                long left = deadline - System.nanoTime();
                if (pool.moving != null && (left <= 0 || interrupted)) {
                    break;
                }
                if (tryLock(pool, left > 0 ? Math.min(left, Pool.LOOK_NANOS) : Pool.LOOK_NANOS)) {
                    return true;
                }
                interrupted |= Thread.interrupted();
            }
            // What the defragmentation's end needs to close the pool, published by closeLeft's write;
            // and the upstream's hold its end gives back.
            leftHandles = handles;
            leftDecidedUnused = decidedUnused;
            closeHolds.incrementAndGet();
            pool.closeLeft = true;
            // A defragmentation still moving reads closeLeft after it clears moving (both volatile):
            // one of the two sees the other's write. Seen moving: its end closes the pool.
            while (!tryLock(pool, Pool.LOOK_NANOS)) {
                interrupted |= Thread.interrupted();
                if (pool.moving != null) {
                    log.warn(device + ": close gave up after " + waited() + " waiting for the " + pool.type + " pool, whose defragmentation holds it for a device copy"
                            + " that has not returned; that pool's memory and the upstream stay until the copy returns,"
                            + " then are released", null);
                    return false;
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
        // The defragmentation ended before it saw closeLeft, or closed the pool itself.
        boolean ours = pool.closeLeft;
        if (ours) {
            // Taken back: the hold for the defragmentation's end goes (the close's own remains: never the last).
            pool.closeLeft = false;
            closeHolds.decrementAndGet();
        } else {
            pool.lock.unlock(); // its end gives back the hold once it has let go of the lock
        }
        return ours;
    }

    /** @return how long a close waits for each pool's work and lock, in nanoseconds */
    long closeWaitNanos() {
        return closeWaitNanos;
    }

    /**
     * A conditional close found {@code moving} held by a defragmentation across device copies: waits
     * for the move's end, holding no lock and deciding nothing, until {@code deadline} (an interrupt
     * ends the wait; the flag stays set).
     *
     * @return true if the move ended (decide again); false past the deadline, with one warning (refuse)
     */
    boolean awaitMoveToDecide(Pool moving, long deadline) {
        if (moving.awaitMoveEnd(deadline - System.nanoTime())) {
            return true;
        }
        log.warn(device + ": closeIfUnused refused after " + waited() + ": the defragmentation of the " + moving.type
                + " pool holds it for a device copy that has not returned; nothing changed", null);
        return false;
    }

    /** @return the close's limit, as a log line says it */
    private String waited() {
        return closeWaitNanos >= TimeUnit.SECONDS.toNanos(1) ? TimeUnit.NANOSECONDS.toSeconds(closeWaitNanos) + " s"
                : TimeUnit.NANOSECONDS.toMillis(closeWaitNanos) + " ms";
    }

    /**
     * @return true if {@code pool}'s lock was taken within {@code nanos}; false if not, or if the
     *         thread was interrupted (its flag then stays set for the caller to take)
     */
    private static boolean tryLock(Pool pool, long nanos) {
        try {
            return pool.lock.tryLock(nanos, TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /** Set by a close that leaves a pool to its defragmentation, before {@link Pool#closeLeft}: for its end. */
    private HandleTable leftHandles;
    private boolean leftDecidedUnused;

    /**
     * Under {@code pool}'s lock, by a defragmentation that a close left the pool to ({@link
     * Pool#closeLeft}) as it ends: closes the pool as the close would have, without waiting for its
     * work (the last work's end releases the chunks then). The caller hands the result to {@link
     * #finishLeftPool} once it has let go of the lock.
     */
    Closing closeLeftPool(Pool pool) {
        pool.closeLeft = false;
        Closing c = new Closing(device);
        closePool(pool, c, leftHandles, leftDecidedUnused, false);
        return c;
    }

    /**
     * Outside the locks, after {@link #closeLeftPool}: releases what it gathered and gives back the
     * upstream's hold the close took for that pool.
     */
    void finishLeftPool(Closing closing) {
        try {
            finish(closing);
        } finally {
            finishClose();
        }
    }

    /**
     * Under {@code pool}'s lock: marks it closed, waits for its work when {@code wait} (and the caller
     * is not that work itself), closes every view, notes what was still allocated, and takes its
     * chunks into {@code c} if no work or view holds them (else their last work releases them).
     */
    private void closePool(Pool pool, Closing c, HandleTable handles, boolean decidedUnused, boolean wait) {
        pool.closed = true;
        pool.grown.signalAll();
        pool.settled.signalAll();
        // Scopes (withMapped, read, write) pin without the lock: each block with one inside
        // is one piece of work, ended by its last scope to leave.
        int scoped = Scopes.closeAll(pool);
        pool.inflight += scoped;
        if (wait) {
            if (scoped > 0 && c.insideAction == null) {
                c.insideAction = DataPath.callerInsideAction();
            }
            if (pool.inflight > 0 && c.endingAsync == null) {
                c.endingAsync = Transfers.callerEndsAsyncWork();
            }
            // The caller's own action, or the async work it is ending (which may still pin a block,
            // and behind which its stream holds the work queued there), is work only its return
            // can end: waiting for it would wait out the whole limit. Its end (or the last other
            // work's) releases the chunks then.
            if (c.insideAction != Boolean.TRUE && c.endingAsync != Boolean.TRUE) {
                awaitIdle(pool);
            }
        }
        int aliasedBefore = c.aliased.size();
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
                c.leaks.add(b);
            }
            handles.unregister(b, b.handleId);
            if (b.issuer != null) {
                c.aliased.add(b);
            }
        }
        if (!pool.stuckViews.isEmpty()) {
            // A view a native operation holds keeps the pool's chunks: the aliases stay, so
            // that the last of their frees may release them (releaseIfDone), as it would
            // for the view of an aliased block, until the pool is released otherwise.
            List<Block> stay = c.aliased.subList(aliasedBefore, c.aliased.size());
            c.kept.addAll(stay);
            stay.clear();
        }
        if (pool.inflight == 0 && pool.stuckViews.isEmpty()) {
            c.chunks.addAll(pool.takeAllChunks());
        } else {
            // Copies still run on this memory: whoever ends the last of them releases it. A
            // view a native operation still uses keeps it until close is called again.
            pool.releaseWhenIdle = true;
            closeHolds.incrementAndGet();
            c.deferred += pool.inflight;
            c.stuck += pool.stuckViews.size();
        }
    }

    /** Outside the locks: acts on what {@link #closePool} gathered. @throws Error as {@link #closePools} */
    private void finish(Closing c) {
        if (!c.kept.isEmpty()) {
            keepAliases(c.kept);
        }
        Error failed = null;
        try {
            releaseChunks(c.chunks);
        } catch (Error e) {
            failed = e; // every chunk went: the close goes on, and its caller hears of it at the end
        }
        endAliases(c.aliased);
        if (c.stuck > 0) {
            log.warn(device + ": closed while native operations still used " + c.stuck + " mapped views;"
                    + " their pools' memory stays reserved until those views can close (the last handle of their blocks"
                    + " freed, or close() called again after those operations end)", null);
        }
        if (c.deferred > 0) {
            log.warn(device + ": closed while " + c.deferred + " copies, upstream calls or withMapped actions still ran on its memory;"
                    + " that memory is released when the last of them ends", null);
        }
        c.leaks.tell(log);
        if (failed != null) {
            throw failed;
        }
    }

    /** Adds to the aliases kept until the last of this manager's memory is released. */
    private synchronized void keepAliases(List<Block> kept) {
        List<Block> all = new ArrayList<>(keptAliases);
        all.addAll(kept);
        keptAliases = all;
    }

    /** Under the pool's lock: waits up to the close's limit for the pool's in-flight work to end. */
    private void awaitIdle(Pool pool) {
        long deadline = System.nanoTime() + closeWaitNanos;
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
     * where those views close (and no copy runs on them any more). A pool a defragmentation holds
     * across a device copy is passed over, not waited for (the first close left it to that move).
     */
    void retryClose() {
        Error failed = null;
        for (Pool pool : pools) {
            List<DeviceChunk> release = null;
            if (pool.acquireUnlessMoving() != null) {
                // Left to the defragmentation that holds it across a device copy (or one a close still
                // waits for): its end closes and releases it. A closed pool is never moved.
                continue;
            }
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
