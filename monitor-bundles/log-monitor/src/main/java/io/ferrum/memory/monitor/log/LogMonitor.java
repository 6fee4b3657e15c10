package io.ferrum.memory.monitor.log;

import java.util.Locale;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.log.Logger;
import org.osgi.service.log.LoggerFactory;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryObserver;
import io.ferrum.memory.api.MemoryPressure;

/**
 * The model monitor plugin: a {@link MemoryObserver} on the monitor's whiteboard that writes
 * pressure changes (WARN from HIGH up, INFO otherwise) and device arrivals and departures to the
 * OSGi log. Stop or uninstall the bundle and the messages stop; nothing else changes.
 */
@Component(service = MemoryObserver.class)
public final class LogMonitor implements MemoryObserver {
    private final Logger log;

    @Activate
    public LogMonitor(@Reference(service = LoggerFactory.class) Logger log) {
        this.log = log;
    }

    @Override
    public void pressureChanged(Device device, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
        String message = String.format(Locale.ROOT, "Memory pressure on %s: %s -> %s (%.1f %% used, %d of %d bytes, %d allocations)",
                // Rounded down: 84.97 % (MEDIUM) must not read as 85.0 %, the threshold of HIGH (the
                // nudge keeps 1.1 %, computed as 1.0999999999999999, from reading 1.0 %).
                device, previous, current, info == null ? 0.0 : Math.floor(info.utilizationPercent() * 10 + 1e-9) / 10,
                info == null ? 0 : info.usedBytes(), info == null ? 0 : info.totalBytes(),
                info == null ? 0 : info.activeAllocations());
        if (current.isAtLeast(MemoryPressure.HIGH)) {
            log.warn(message);
        } else {
            log.info(message);
        }
    }

    @Override
    public void deviceAdded(Device device, MemoryInfo info) {
        log.info(info == null ? "Memory device " + device + " added"
                : String.format(Locale.ROOT, "Memory device %s added: %d bytes, %d used", device, info.totalBytes(), info.usedBytes()));
    }

    @Override
    public void deviceRemoved(Device device) {
        log.info("Memory device " + device + " removed; its handles are no longer valid");
    }
}
