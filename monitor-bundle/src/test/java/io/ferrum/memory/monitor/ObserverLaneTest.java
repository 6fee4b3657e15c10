package io.ferrum.memory.monitor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executor;
import java.util.concurrent.RejectedExecutionException;

import org.junit.jupiter.api.Test;

/**
 * The lane's order, bound, drop counting and close, driven step by step: its executor only collects
 * the lane's runs, and the test decides when they run (no threads, no timing).
 */
class ObserverLaneTest {

    /** Collects what the lane submits; {@link #runAll()} runs it in the test's thread. */
    static final class StepExecutor implements Executor {
        final ArrayDeque<Runnable> submitted = new ArrayDeque<>();
        boolean refuse;

        @Override
        public void execute(Runnable r) {
            if (refuse) {
                throw new RejectedExecutionException("shut down");
            }
            submitted.add(r);
        }

        void runAll() {
            while (!submitted.isEmpty()) {
                submitted.poll().run();
            }
        }
    }

    /** Records drop episodes as text. */
    static final class RecordingDrops implements ObserverLane.Drops {
        final List<String> episodes = new ArrayList<>();

        @Override
        public void started(ObserverLane lane) {
            episodes.add("started " + lane.name());
        }

        @Override
        public void ended(ObserverLane lane, int count) {
            episodes.add("ended " + lane.name() + " after " + count);
        }
    }

    private final StepExecutor executor = new StepExecutor();
    private final RecordingDrops drops = new RecordingDrops();
    private final List<Integer> ran = new ArrayList<>();

    private Runnable call(int i) {
        return () -> ran.add(i);
    }

    @Test
    void callsRunInTheOrderOfferedAndTheLaneIsSubmittedOncePerBurst() {
        ObserverLane lane = new ObserverLane("lane", executor, 8, drops);

        for (int i = 0; i < 5; i++) {
            assertTrue(lane.offer(call(i)));
        }

        assertEquals(1, executor.submitted.size(), "one run drains the whole burst");
        executor.runAll();
        assertEquals(List.of(0, 1, 2, 3, 4), ran);

        assertTrue(lane.offer(call(5)));
        assertEquals(1, executor.submitted.size(), "an idle lane is submitted again by the next offer");
        executor.runAll();
        assertEquals(List.of(0, 1, 2, 3, 4, 5), ran);
    }

    @Test
    void aCallOfferedWhileTheLaneRunsRunsInTheSameRunAfterTheOthers() {
        ObserverLane lane = new ObserverLane("lane", executor, 8, drops);
        lane.offer(() -> {
            ran.add(0);
            lane.offer(call(2));
        });
        lane.offer(call(1));

        executor.runAll();

        assertEquals(List.of(0, 1, 2), ran);
        assertTrue(executor.submitted.isEmpty(), "the running lane was not submitted twice");
    }

    @Test
    void aFullLaneDropsAndCountsAndReportsOnceAnEpisodeWhenItCatchesUp() {
        ObserverLane lane = new ObserverLane("slow", executor, 3, drops);
        for (int i = 0; i < 3; i++) {
            assertTrue(lane.offer(call(i)));
        }

        assertFalse(lane.offer(call(3)), "the fourth call exceeds the capacity of 3");
        assertFalse(lane.offer(call(4)));
        assertFalse(lane.offer(call(5)));
        assertEquals(List.of("started slow"), drops.episodes, "one report when the episode starts, not one per drop");

        executor.runAll();
        assertEquals(List.of(0, 1, 2), ran, "the calls that fitted run; the dropped ones never do");
        assertEquals(List.of("started slow", "ended slow after 3"), drops.episodes);

        // A new episode after catching up is reported again, with its own count.
        for (int i = 10; i < 13; i++) {
            lane.offer(call(i));
        }
        assertFalse(lane.offer(call(13)));
        executor.runAll();
        assertEquals(List.of("started slow", "ended slow after 3", "started slow", "ended slow after 1"), drops.episodes);
        assertEquals(List.of(0, 1, 2, 10, 11, 12), ran);
    }

    @Test
    void closeDropsWhatWaitsAndRefusesWhatComes() {
        ObserverLane lane = new ObserverLane("lane", executor, 8, drops);
        lane.offer(call(0));
        lane.offer(call(1));

        lane.close();
        executor.runAll();

        assertEquals(List.of(), ran, "nothing waiting runs after close");
        assertFalse(lane.offer(call(2)), "a closed lane refuses");
        assertTrue(executor.submitted.isEmpty());
        assertEquals(List.of(), drops.episodes, "a refusal after close is not a drop");
    }

    @Test
    void closeDuringACallLetsThatCallFinishAndStopsTheRest() {
        ObserverLane lane = new ObserverLane("lane", executor, 8, drops);
        lane.offer(() -> {
            ran.add(0);
            lane.close();
            ran.add(1);
        });
        lane.offer(call(2));

        executor.runAll();

        assertEquals(List.of(0, 1), ran);
    }

    @Test
    void aRefusingExecutorClosesTheLane() {
        ObserverLane lane = new ObserverLane("lane", executor, 8, drops);
        executor.refuse = true;

        lane.offer(call(0));
        executor.refuse = false;

        assertFalse(lane.offer(call(1)), "the pool was shut down: the lane is closed for good");
        executor.runAll();
        assertEquals(List.of(), ran);
    }
}
