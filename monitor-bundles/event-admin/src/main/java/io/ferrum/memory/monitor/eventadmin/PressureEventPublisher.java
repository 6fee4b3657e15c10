package io.ferrum.memory.monitor.eventadmin;

import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.event.Event;
import org.osgi.service.event.EventAdmin;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryObserver;
import io.ferrum.memory.api.MemoryPressure;

/**
 * The Event Admin bridge: a {@link MemoryObserver} on the monitor's whiteboard that posts what it
 * hears to OSGi Event Admin, for listeners that know Event Admin and not our API.
 *
 * <ul>
 * <li>{@code io/ferrum/memory/pressure/<LEVEL>} (the new level): properties {@code device}, {@code old},
 * {@code new}, {@code utilization} (percent, a double), {@code usedBytes}, {@code totalBytes};</li>
 * <li>{@code io/ferrum/memory/device/ADDED}: {@code device}, {@code totalBytes};</li>
 * <li>{@code io/ferrum/memory/device/REMOVED}: {@code device}.</li>
 * </ul>
 * Figures the monitor could not read ({@code info == null}) are posted as zero.
 *
 * <p>Invariants: events are posted (asynchronous), never sent, so a slow Event Admin handler never
 * holds up the monitor; and they reach handlers in the order the monitor told them. Event Admin
 * orders posted events per posting thread only, and the monitor calls an observer in order but not
 * always from the same thread (its lanes run on a pool), so every event is posted from this
 * component's one thread. After deactivation nothing more is posted. The bundle imports only the API
 * and Event Admin: without Event Admin the component stays unsatisfied, and stopping this bundle
 * changes nothing else.
 */
@Component(service = MemoryObserver.class)
public final class PressureEventPublisher implements MemoryObserver {
    /** Topic prefix; the new level's name follows. */
    public static final String PRESSURE_TOPIC = "io/ferrum/memory/pressure/";
    /** Topic prefix; {@code ADDED} or {@code REMOVED} follows. */
    public static final String DEVICE_TOPIC = "io/ferrum/memory/device/";

    private final EventAdmin events;
    private final ExecutorService poster = Executors.newSingleThreadExecutor(r -> {
        Thread t = new Thread(r, "ferrum-eventadmin-bridge");
        t.setDaemon(true);
        return t;
    });

    @Activate
    public PressureEventPublisher(@Reference EventAdmin events) {
        this.events = events;
    }

    /** Posts what is queued, then stops; waits a few seconds at most. */
    @Deactivate
    void deactivate() throws InterruptedException {
        poster.shutdown();
        poster.awaitTermination(5, TimeUnit.SECONDS);
    }

    @Override
    public void pressureChanged(Device device, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
        post(new Event(PRESSURE_TOPIC + current.name(), Map.of(
                "device", device.toString(),
                "old", previous.name(),
                "new", current.name(),
                "utilization", info == null ? 0.0 : info.utilizationPercent(),
                "usedBytes", info == null ? 0L : info.usedBytes(),
                "totalBytes", info == null ? 0L : info.totalBytes())));
    }

    @Override
    public void deviceAdded(Device device, MemoryInfo info) {
        post(new Event(DEVICE_TOPIC + "ADDED", Map.of(
                "device", device.toString(),
                "totalBytes", info == null ? 0L : info.totalBytes())));
    }

    @Override
    public void deviceRemoved(Device device) {
        post(new Event(DEVICE_TOPIC + "REMOVED", Map.of("device", device.toString())));
    }

    private void post(Event event) {
        try {
            poster.execute(() -> events.postEvent(event));
        } catch (RejectedExecutionException deactivated) {
            // Told after deactivation (the monitor unbinds observers after the event): nobody listens.
        }
    }
}
