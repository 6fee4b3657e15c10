package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

/**
 * The checks of the watched folders at the poll interval: a slow check is followed only after nine times its
 * duration, and one that throws is followed all the same; the clock and the scheduling are the test's.
 */
class PacedChecksTest {
    private static final long POLL_MS = 50;
    private static final long POLL_NS = TimeUnit.MILLISECONDS.toNanos(POLL_MS);

    private final ManualTimer timer = new ManualTimer();
    private final List<String> failures = new ArrayList<>();

    @Test
    void aSlowCheckIsFollowedOnlyAfterNineTimesItsDurationAQuickOneAtThePollInterval() {
        long[] takes = {TimeUnit.MILLISECONDS.toNanos(1_500), TimeUnit.MICROSECONDS.toNanos(200), POLL_NS / 9 + 1,
                TimeUnit.DAYS.toNanos(365L * 200)};
        int[] check = {0};
        PacedChecks checks = new PacedChecks(() -> timer.take(takes[check[0]++]), e -> failures.add(e.toString()), timer);
        checks.start(POLL_MS);
        assertEquals(0, timer.nextDelay(), "the first check runs at once");

        timer.runNext();
        assertTrue(timer.nextDelay() >= PacedChecks.SPACING * takes[0],
                "a check of 1.5 s followed after " + timer.nextDelay() + " ns");
        assertEquals(9, PacedChecks.SPACING, "the checks take at most a tenth of a core");

        timer.runNext();
        assertEquals(POLL_NS, timer.nextDelay(), "a check of 200 us is followed at the poll interval");

        timer.runNext();
        assertEquals(PacedChecks.SPACING * takes[2], timer.nextDelay(), "a check just over a ninth of the poll interval");

        timer.runNext();
        assertEquals(PacedChecks.MAX_SPACING_NANOS, timer.nextDelay(), "a check of 200 years: the delay does not overflow");
        assertEquals(List.of(), failures);
    }

    /**
     * One look that stalled (a network file system that hung for ten minutes) delayed the next by nine times as
     * long, an hour and a half, though the looks after it would be quick again: an entry dropped meanwhile was
     * named that much later. The wait after a look is a minute at most; a poll interval set longer still holds.
     */
    @Test
    void aLookThatStalledOnceDelaysTheNextByAMinuteAtMost() {
        long[] takes = {TimeUnit.MINUTES.toNanos(10), TimeUnit.MICROSECONDS.toNanos(200), TimeUnit.SECONDS.toNanos(7)};
        int[] check = {0};
        PacedChecks checks = new PacedChecks(() -> timer.take(takes[check[0]++ % takes.length]), e -> failures.add(e.toString()), timer);
        checks.start(POLL_MS);

        timer.runNext();
        assertEquals(TimeUnit.MINUTES.toNanos(1), timer.nextDelay(), "a look of 10 minutes followed after " + timer.nextDelay() + " ns");
        timer.runNext();
        assertEquals(POLL_NS, timer.nextDelay(), "the look after it was quick: the poll interval again");
        timer.runNext();
        assertEquals(TimeUnit.MINUTES.toNanos(1), timer.nextDelay(), "a look of 7 s: a minute, not 63 s");

        long twoMinutes = TimeUnit.MINUTES.toNanos(2);
        assertEquals(twoMinutes, PacedChecks.delayAfter(twoMinutes, TimeUnit.MINUTES.toNanos(10)), "a longer poll interval holds");
        assertEquals(List.of(), failures);
    }

    @Test
    void aCheckThatThrowsIsFollowedByTheNextAndToldOnceUntilItChanges() {
        List<RuntimeException> throwsAt = new ArrayList<>();
        IllegalStateException broken = new IllegalStateException("broken");
        throwsAt.add(broken);
        throwsAt.add(new IllegalStateException("broken"));
        throwsAt.add(null);
        throwsAt.add(new IllegalStateException("broken"));
        throwsAt.add(new IllegalArgumentException("other"));
        int[] ran = {0};
        PacedChecks checks = new PacedChecks(() -> {
            RuntimeException e = throwsAt.get(ran[0]++);
            timer.take(TimeUnit.SECONDS.toNanos(1));
            if (e != null) {
                throw e;
            }
        }, e -> failures.add(e.toString()), timer);
        checks.start(POLL_MS);

        for (int i = 0; i < throwsAt.size(); i++) {
            timer.runNext();
            assertEquals(i + 1, ran[0], "checks run");
            assertTrue(timer.nextDelay() >= PacedChecks.SPACING * TimeUnit.SECONDS.toNanos(1),
                    "a check of 1 s that threw followed after " + timer.nextDelay() + " ns");
        }
        assertEquals(List.of("java.lang.IllegalStateException: broken", "java.lang.IllegalStateException: broken",
                "java.lang.IllegalArgumentException: other"), failures);
    }

    @Test
    void anErrorEndsNoCheckEither() {
        int[] ran = {0};
        PacedChecks checks = new PacedChecks(() -> {
            if (ran[0]++ == 0) {
                throw new StackOverflowError();
            }
        }, e -> failures.add(e.toString()), timer);
        checks.start(POLL_MS);
        try {
            timer.runNext();
        } catch (StackOverflowError keptInTheFuture) {
            // As the executor does.
        }
        timer.runNext();
        assertEquals(2, ran[0], "checks run");
        assertEquals(POLL_NS, timer.nextDelay());
    }

    @Test
    void stoppedNoCheckRunsAgainEvenOneUnderWay() {
        int[] ran = {0};
        PacedChecks[] checks = new PacedChecks[1];
        checks[0] = new PacedChecks(() -> {
            ran[0]++;
            checks[0].stop();
        }, e -> failures.add(e.toString()), timer);
        checks[0].start(POLL_MS);
        timer.runNext();
        assertEquals(1, ran[0]);
        assertFalse(timer.hasNext(), "a check scheduled after stop");
    }

    @Test
    void theRealTimerRunsTheChecksAgainOnItsOwnThreadUntilStopped() throws InterruptedException {
        CountDownLatch three = new CountDownLatch(3);
        List<String> threads = new ArrayList<>();
        PacedChecks checks = new PacedChecks(() -> {
            synchronized (threads) {
                threads.add(Thread.currentThread().getName() + (Thread.currentThread().isDaemon() ? " (daemon)" : ""));
            }
            three.countDown();
            if (three.getCount() == 1) {
                throw new IllegalStateException("once");
            }
        }, e -> failures.add(e.toString()), PacedChecks.Timer.ofThread("ferrum test checks"));
        checks.start(1);
        try {
            assertTrue(three.await(60, TimeUnit.SECONDS), "three checks ran");
        } finally {
            checks.stop();
        }
        synchronized (threads) {
            assertEquals(List.of("ferrum test checks (daemon)"), threads.stream().distinct().toList());
        }
    }
}
