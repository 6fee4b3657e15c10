package io.ferrum.memory.api;

import java.util.Map;

import org.osgi.annotation.versioning.ConsumerType;

/**
 * A monitor plugin: registered as an OSGi service (the whiteboard pattern), it is told what happens
 * to device memory. Every method does nothing by default, so an observer implements only what it
 * needs. An observer registered with a {@link DeviceMemoryManager#DEVICE_PROPERTY} service property
 * hears only about that device.
 *
 * <p>Calls come from the monitor's threads, outside its locks, one at a time per observer. An
 * observer that throws is logged and keeps receiving calls; it cannot disturb allocation.
 */
@ConsumerType
public interface MemoryObserver {

    /**
     * A device's pressure level changed (edge-triggered: once per crossing).
     *
     * @param device   the device
     * @param previous the level before
     * @param current  the level now
     * @param info     the information that caused the change
     */
    default void pressureChanged(Device device, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
    }

    /**
     * A device became available.
     *
     * @param device the device
     * @param info   its information at that moment
     */
    default void deviceAdded(Device device, MemoryInfo info) {
    }

    /**
     * A device went away (its backend stopped, say); its handles are no longer valid.
     *
     * @param device the device
     */
    default void deviceRemoved(Device device) {
    }

    /**
     * A periodic sample of every device (of the one device, for a device-restricted observer).
     *
     * @param info each device's information
     */
    default void sample(Map<Device, MemoryInfo> info) {
    }
}
