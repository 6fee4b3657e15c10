package io.ferrum.memory.monitor;

import java.util.Map;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.event.Event;
import org.osgi.service.event.EventAdmin;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryObserver;
import io.ferrum.memory.api.MemoryPressure;

/**
 * Posts pressure changes to Event Admin on {@code io/ferrum/memory/pressure/<LEVEL>} (the new
 * level), and device arrivals and departures on {@code io/ferrum/memory/device/ADDED|REMOVED}. It is
 * itself a {@link MemoryObserver} on the monitor's whiteboard; without Event Admin it stays
 * unsatisfied and the monitor works as before.
 */
@Component(service = MemoryObserver.class)
public final class PressureEventPublisher implements MemoryObserver {
    /** Topic prefix; the level name follows. */
    public static final String PRESSURE_TOPIC = "io/ferrum/memory/pressure/";
    /** Topic prefix; ADDED or REMOVED follows. */
    public static final String DEVICE_TOPIC = "io/ferrum/memory/device/";

    private final EventAdmin events;

    @Activate
    public PressureEventPublisher(@Reference EventAdmin events) {
        this.events = events;
    }

    @Override
    public void pressureChanged(Device device, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
        events.postEvent(new Event(PRESSURE_TOPIC + current.name(), Map.of(
                "device", device.toString(),
                "old", previous.name(),
                "new", current.name(),
                "utilization", info == null ? 0.0 : info.utilizationPercent(),
                "usedBytes", info == null ? 0L : info.usedBytes(),
                "totalBytes", info == null ? 0L : info.totalBytes())));
    }

    @Override
    public void deviceAdded(Device device, MemoryInfo info) {
        events.postEvent(new Event(DEVICE_TOPIC + "ADDED", Map.of("device", device.toString(),
                "totalBytes", info == null ? 0L : info.totalBytes())));
    }

    @Override
    public void deviceRemoved(Device device) {
        events.postEvent(new Event(DEVICE_TOPIC + "REMOVED", Map.of("device", device.toString())));
    }
}
