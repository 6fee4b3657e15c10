package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayDeque;
import java.util.Deque;

/**
 * A {@link PacedChecks.Timer} the test drives: it runs a task only when told, and its clock moves only when a
 * task is run (by the task's delay), when a check says how long it takes ({@link #take}), or, when the test
 * says so, at each read ({@link #everyReadTakes}).
 */
final class ManualTimer implements PacedChecks.Timer {
    private record Scheduled(Runnable task, long delayNanos) {
    }

    private final Deque<Scheduled> pending = new ArrayDeque<>();
    private long now = 1_000_000_000_000L;
    private boolean stopped;
    /** How far the clock moves at each read: how long a check takes that does not say ({@link #take}). */
    private long eachRead;

    @Override
    public void schedule(Runnable task, long delayNanos) {
        if (!stopped) {
            pending.add(new Scheduled(task, delayNanos));
        }
    }

    @Override
    public long nanoTime() {
        now += eachRead;
        return now;
    }

    @Override
    public void stop() {
        stopped = true;
        pending.clear();
    }

    /** Makes each read of the clock move it on by {@code nanos}: a check between two reads takes that long. */
    void everyReadTakes(long nanos) {
        eachRead = nanos;
    }

    /** Makes the check under way take {@code nanos}. */
    void take(long nanos) {
        now += nanos;
    }

    /** @return whether a task is scheduled */
    boolean hasNext() {
        return !pending.isEmpty();
    }

    /** @return the delay of the one task scheduled; fails when none or more are */
    long nextDelay() {
        assertEquals(1, pending.size(), "tasks scheduled");
        return pending.peek().delayNanos();
    }

    /**
     * Runs the one task scheduled once its delay passed; an exception it throws ends it, as a
     * {@link java.util.concurrent.ScheduledExecutorService} keeps it in the task's future.
     */
    void runNext() {
        nextDelay();
        Scheduled next = pending.remove();
        now += next.delayNanos();
        try {
            next.task().run();
        } catch (RuntimeException keptInTheFuture) {
            // As the executor does.
        }
    }
}
