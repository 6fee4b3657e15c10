package io.ferrum.memory.monitor.eventadmin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.OptionalDouble;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.osgi.service.event.Event;
import org.osgi.service.event.EventAdmin;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryPressure;

/**
 * What the bridge posts, read back from an Event Admin that records instead of delivering. Each test
 * deactivates the publisher before it reads: deactivation posts everything queued first.
 */
class PressureEventPublisherTest {

    /** Records posted events and the thread that posted each; a sent event fails the test. */
    static final class RecordingEventAdmin implements EventAdmin {
        final List<Event> posted = new CopyOnWriteArrayList<>();
        final List<String> threads = new CopyOnWriteArrayList<>();

        @Override
        public void postEvent(Event event) {
            posted.add(event);
            threads.add(Thread.currentThread().getName());
        }

        @Override
        public void sendEvent(Event event) {
            throw new AssertionError("The bridge must post (asynchronous), not send: " + event);
        }
    }

    private final RecordingEventAdmin events = new RecordingEventAdmin();
    private final PressureEventPublisher publisher = new PressureEventPublisher(events);

    /**
     * Deactivates the publisher and waits (at most 30 s) until {@code n} events are posted:
     * deactivation waits a few seconds at most for its poster, which a loaded machine may exceed.
     */
    private void deactivateAndAwait(int n) throws InterruptedException {
        publisher.deactivate();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (events.posted.size() < n && System.nanoTime() < deadline) {
            Thread.sleep(5);
        }
    }

    @Test
    void pressureChangeIsPostedOnTheNewLevelsTopicWithItsFigures() throws Exception {
        MemoryInfo info = new MemoryInfo(1000, 900, 100, 1000, 3, 0.0, OptionalDouble.empty());

        publisher.pressureChanged(Device.cpu(0), MemoryPressure.MEDIUM, MemoryPressure.HIGH, info);
        deactivateAndAwait(1);

        assertEquals(1, events.posted.size());
        Event e = events.posted.get(0);
        assertEquals("io/ferrum/memory/pressure/HIGH", e.getTopic());
        assertEquals("cpu:0", e.getProperty("device"));
        assertEquals("MEDIUM", e.getProperty("old"));
        assertEquals("HIGH", e.getProperty("new"));
        assertEquals(90.0, (double) e.getProperty("utilization"), 1e-9);
        assertEquals(900L, e.getProperty("usedBytes"));
        assertEquals(1000L, e.getProperty("totalBytes"));
    }

    @Test
    void figuresTheMonitorCouldNotReadArePostedAsZero() throws Exception {
        publisher.pressureChanged(Device.cpu(1), MemoryPressure.HIGH, MemoryPressure.LOW, null);
        deactivateAndAwait(1);

        Event e = events.posted.get(0);
        assertEquals("io/ferrum/memory/pressure/LOW", e.getTopic());
        assertEquals(0.0, (double) e.getProperty("utilization"), 0.0);
        assertEquals(0L, e.getProperty("usedBytes"));
        assertEquals(0L, e.getProperty("totalBytes"));
    }

    @Test
    void deviceArrivalAndDepartureArePostedInOrder() throws Exception {
        publisher.deviceAdded(Device.cpu(2), new MemoryInfo(4096, 0, 4096, 0, 0, 0.0, OptionalDouble.empty()));
        publisher.deviceRemoved(Device.cpu(2));
        deactivateAndAwait(2);

        assertEquals(2, events.posted.size());
        Event added = events.posted.get(0);
        assertEquals(PressureEventPublisher.DEVICE_TOPIC + "ADDED", added.getTopic());
        assertEquals("cpu:2", added.getProperty("device"));
        assertEquals(4096L, added.getProperty("totalBytes"));
        Event removed = events.posted.get(1);
        assertEquals("io/ferrum/memory/device/REMOVED", removed.getTopic());
        assertEquals("cpu:2", removed.getProperty("device"));
        assertNull(removed.getProperty("totalBytes"), "a departure carries no figures");
    }

    /**
     * The monitor calls an observer in order, but from whichever thread of its pool runs the lane;
     * Event Admin keeps the order of posted events only per posting thread.
     */
    @Test
    void changesToldFromSeveralThreadsArePostedInOrderFromOneThread() throws Exception {
        MemoryPressure[] levels = MemoryPressure.values();
        for (int i = 1; i < levels.length; i++) {
            MemoryPressure previous = levels[i - 1];
            MemoryPressure current = levels[i];
            Thread lane = new Thread(() -> publisher.pressureChanged(Device.cpu(0), previous, current, null), "lane-" + i);
            lane.start();
            lane.join();
        }
        deactivateAndAwait(3);

        assertEquals(List.of("io/ferrum/memory/pressure/MEDIUM", "io/ferrum/memory/pressure/HIGH",
                "io/ferrum/memory/pressure/CRITICAL"), events.posted.stream().map(Event::getTopic).toList());
        assertEquals(1, events.threads.stream().distinct().count(), "posted from threads " + events.threads);
    }

    @Test
    void nothingIsPostedAfterDeactivation() throws Exception {
        publisher.deactivate();

        publisher.deviceRemoved(Device.cpu(3));

        assertTrue(events.posted.isEmpty(), "posted after deactivation: " + events.posted);
    }

    @Test
    void samplesAreNotPosted() throws Exception {
        publisher.sample(Map.of(Device.cpu(0), new MemoryInfo(1, 0, 1, 0, 0, 0.0, OptionalDouble.empty())));
        publisher.deactivate();

        assertTrue(events.posted.isEmpty(), "only changes are posted: " + events.posted);
    }
}
