package io.ferrum.memory.launcher;

import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * Runs a check of the watched folders again and again, on a thread of its own: first at once, then at
 * FileInstall's poll interval, or, after a check that took longer than a ninth of it, {@link #SPACING} times
 * as long as that check took, a minute at most ({@link #MAX_SPACING_NANOS}). A check lists a watched folder and looks at each entry: at the
 * distribution's poll interval, 50 ms, a folder of some ten thousand entries would keep a core half busy for
 * as long as it is there, one of a few hundred thousand a whole core; spaced, the checks take a tenth of a
 * core at most, and a small folder is still checked at every poll.
 *
 * <p>The next check is scheduled when one ends, however it ends: a check that throws is followed all the
 * same (a periodic task of a {@link ScheduledExecutorService} that throws once never runs again). What it
 * threw is told once, and again only when a check throws something else, or again after one that did not.
 */
final class PacedChecks {
    /** How many times a check's duration passes before the next check: at most a tenth of a core for the checks. */
    static final long SPACING = 9;
    /**
     * The longest wait after a check, unless the poll interval is longer: one check that stalled (a network file
     * system that hung for ten minutes) would otherwise delay the next by nine times as long, though the checks
     * after it are quick again, and an entry dropped meanwhile is named that much later. The price: checks that
     * each take more than a ninth of this (a folder of millions of entries) take more than a tenth of a core.
     */
    static final long MAX_SPACING_NANOS = TimeUnit.MINUTES.toNanos(1);

    /** Where and when the next check runs, and the clock it is timed by; tests replace it. */
    interface Timer {
        /** Runs {@code task} once, {@code delayNanos} from now; nothing once stopped. */
        void schedule(Runnable task, long delayNanos);

        /** @return the time in nanoseconds, as {@link System#nanoTime} gives it */
        long nanoTime();

        /** Runs nothing more; a check under way goes on. */
        void stop();

        /** @return a timer of one daemon thread named {@code threadName}, timed by {@link System#nanoTime} */
        static Timer ofThread(String threadName) {
            ScheduledExecutorService executor = Executors.newSingleThreadScheduledExecutor(r -> {
                Thread t = new Thread(r, threadName);
                t.setDaemon(true);
                return t;
            });
            return new Timer() {
                @Override
                public void schedule(Runnable task, long delayNanos) {
                    try {
                        executor.schedule(task, delayNanos, TimeUnit.NANOSECONDS);
                    } catch (RejectedExecutionException stopped) {
                        // Stopped while a check ran: it was the last.
                    }
                }

                @Override
                public long nanoTime() {
                    return System.nanoTime();
                }

                @Override
                public void stop() {
                    executor.shutdownNow();
                }
            };
        }
    }

    private final Runnable check;
    private final Consumer<RuntimeException> failed;
    private final Timer timer;
    /** The poll interval; set before the first check is scheduled, which publishes it to the timer's thread. */
    private long pollNanos;
    /** What the last check threw, as told; null after one that threw nothing. Used by the timer's thread only. */
    private String lastFailure;

    /**
     * @param check  the check
     * @param failed told of an exception a check throws
     * @param timer  where and when the checks run
     */
    PacedChecks(Runnable check, Consumer<RuntimeException> failed, Timer timer) {
        this.check = check;
        this.failed = failed;
        this.timer = timer;
    }

    /** Runs the first check at once, and each next one {@code pollMillis} after the last. */
    void start(long pollMillis) {
        pollNanos = TimeUnit.MILLISECONDS.toNanos(pollMillis);
        timer.schedule(this::checkOnce, 0);
    }

    void stop() {
        timer.stop();
    }

    private void checkOnce() {
        long began = timer.nanoTime();
        try {
            check.run();
            lastFailure = null;
        } catch (RuntimeException e) {
            String failure = e.toString();
            if (!failure.equals(lastFailure)) {
                lastFailure = failure;
                failed.accept(e);
            }
        } finally {
            timer.schedule(this::checkOnce, delayAfter(pollNanos, timer.nanoTime() - began));
        }
    }

    /**
     * @return how long after a check that took {@code tookNanos} the next one runs: {@code pollNanos}, or
     *         {@link #SPACING} times {@code tookNanos} when that is longer, but not over {@link #MAX_SPACING_NANOS}
     */
    static long delayAfter(long pollNanos, long tookNanos) {
        long spaced = tookNanos > MAX_SPACING_NANOS / SPACING ? MAX_SPACING_NANOS : SPACING * tookNanos;
        return Math.max(pollNanos, spaced);
    }
}
