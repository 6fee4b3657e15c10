package io.ferrum.memory.monitor;

import java.util.ArrayDeque;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;

/**
 * One observer's queue of notifications, run in order on a shared pool: a slow or stuck observer
 * holds up only its own lane, never another observer, the allocating thread or the monitor.
 *
 * <p>Invariants:
 * <ul>
 * <li>order: calls run one at a time, in the order they were offered (at most one pool thread runs a
 * lane at a time: {@code running} is set by the offer that submits the lane and cleared, under the
 * lock, by the run that found the queue empty, or by {@link #close()}, after which nothing is
 * submitted);</li>
 * <li>bound: at most {@code capacity} calls wait; an offer beyond that is dropped and counted, and
 * {@link Drops} hears once when an episode of drops starts and once, with the count, when the lane
 * next runs a call (it caught up), so that a flood makes two log lines, not one per drop; once the
 * calls queued before and after the drops have run, and the queue is empty, {@link Drops#settle}
 * runs in the lane's thread and may queue what the dropped calls would have told (its calls run
 * next, before the lane goes idle);</li>
 * <li>close: after {@link #close()} nothing waiting runs and every offer is refused; a call already
 * running finishes.</li>
 * </ul>
 */
final class ObserverLane implements Runnable {

    /**
     * Hears about drop episodes: {@code started} in the offering thread, with the lane's lock held
     * (so it must not call the lane; holding it keeps "started" before the "ended" of the same
     * episode), {@code ended} in the lane's thread, without it.
     */
    interface Drops {
        /** The lane was full and dropped its first call of an episode. */
        void started(ObserverLane lane);

        /** The lane runs again after dropping {@code count} calls. */
        void ended(ObserverLane lane, int count);

        /**
         * The lane ran every call it held after an episode of drops, in its thread, without its lock:
         * {@link #offer} here queues calls that run next. Must not throw (the lane would stop for
         * good). Does nothing unless overridden.
         */
        default void settle(ObserverLane lane) {
        }
    }

    private final String name;
    private final Executor executor;
    private final int capacity;
    private final Drops drops;
    private final ArrayDeque<Runnable> queue = new ArrayDeque<>();
    private boolean running;
    private int dropped;
    /** Guarded by this: calls were dropped since the lane last settled ({@link Drops#settle}). */
    private boolean owed;
    private boolean closed;

    /**
     * @param name     what log lines call this lane (e.g. "Memory observer X")
     * @param executor runs the lane; a refusal closes it
     * @param capacity calls that may wait, more than zero
     */
    ObserverLane(String name, Executor executor, int capacity, Drops drops) {
        this.name = name;
        this.executor = executor;
        this.capacity = capacity;
        this.drops = drops;
    }

    String name() {
        return name;
    }

    int capacity() {
        return capacity;
    }

    /**
     * Queues {@code call} behind the calls already waiting, and starts the lane if it is idle.
     *
     * @return false if the call was dropped (lane full) or refused (lane closed)
     */
    boolean offer(Runnable call) {
        return offer(call, null);
    }

    /**
     * {@link #offer(Runnable)}; {@code ifDropped}, if not null, runs when the call is dropped, under
     * the lane's lock (so {@link Drops#settle} of the episode sees what it recorded; it must not call
     * the lane).
     */
    boolean offer(Runnable call, Runnable ifDropped) {
        boolean start;
        synchronized (this) {
            if (closed) {
                return false;
            }
            if (queue.size() >= capacity) {
                boolean episodeStarts = dropped++ == 0;
                if (episodeStarts) {
                    drops.started(this);
                }
                if (ifDropped != null) {
                    ifDropped.run();
                }
                return false;
            }
            queue.add(call);
            start = !running;
            running = true;
        }
        if (start) {
            try {
                executor.execute(this);
            } catch (RejectedExecutionException stopped) {
                // The pool is shut down: the monitor is stopping, and nothing offered here would run.
                close();
            }
        }
        return true;
    }

    /** Drops every waiting call and refuses every later one. */
    synchronized void close() {
        closed = true;
        queue.clear();
        running = false;
    }

    /** Runs the waiting calls in order until the queue is empty or the lane closed. */
    @Override
    public void run() {
        while (true) {
            Runnable next;
            int lost;
            boolean settle = false;
            synchronized (this) {
                next = closed ? null : queue.poll();
                if (next == null && (closed || !owed)) {
                    running = false;
                    return;
                }
                if (next == null) {
                    // Caught up after drops (a drop needs a full queue, so none came since the last
                    // call): still running, so that what settle offers queues behind nothing.
                    owed = false;
                    settle = true;
                    lost = 0;
                } else {
                    lost = dropped;
                    dropped = 0;
                    owed |= lost > 0;
                }
            }
            if (settle) {
                drops.settle(this);
                continue;
            }
            if (lost > 0) {
                drops.ended(this, lost);
            }
            next.run();
        }
    }

    @Override
    public String toString() {
        return name;
    }
}
