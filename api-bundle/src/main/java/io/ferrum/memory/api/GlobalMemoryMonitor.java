package io.ferrum.memory.api;

import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletionStage;
import java.util.function.Consumer;

import org.osgi.annotation.versioning.ProviderType;

/**
 * Sees every device: the managers registered as OSGi services (tracked by their {@link
 * DeviceMemoryManager#DEVICE_PROPERTY}) and those registered here by hand, merged into one view.
 * When two managers claim one device, the one with the higher service ranking serves.
 *
 * <p><b>Thread safety:</b> every method may be called from any thread; the views returned are
 * snapshots.
 */
@ProviderType
public interface GlobalMemoryMonitor {

    /** @return a live snapshot: every device with its current memory information */
    Map<Device, MemoryInfo> globalMemoryInfo();

    /** @return the highest pressure level across all devices, {@link MemoryPressure#LOW} when there are none */
    MemoryPressure globalMemoryPressure();

    /** @return the devices currently served */
    Set<Device> devices();

    /**
     * @param device a device
     * @return the manager serving it, or empty
     */
    Optional<DeviceMemoryManager> manager(Device device);

    /**
     * Adds a manager that is not an OSGi service. It takes precedence over a service for the same
     * device until unregistered. In OSGi it is undone when the registering bundle stops or releases
     * the service (each bundle gets its own service object, which keeps account of its registrations).
     *
     * @param device  the device it serves, not null
     * @param manager the manager, not null
     * @throws InvalidMemoryRequestException for a null argument, a manager of another device, or one
     *                                       whose bounded {@link HandleSpace} overlaps that of a
     *                                       manager present (that one keeps its handles; a manager
     *                                       service with such a space is ignored with a logged error)
     */
    void registerManager(Device device, DeviceMemoryManager manager);

    /**
     * Removes a manager added by {@link #registerManager}; services come and go by themselves.
     *
     * @param device the device
     */
    void unregisterManager(Device device);

    /**
     * Sets the one callback told, on every pressure change of any device, of every device's level.
     * Runs outside locks; a throwing callback is logged. {@code null} removes it. In OSGi it is
     * removed when the bundle that set it stops or releases the service, unless another has been set
     * since.
     *
     * @param callback receives the level of every device
     */
    void setGlobalPressureCallback(Consumer<Map<Device, MemoryPressure>> callback);

    /**
     * Defragments and trims every device concurrently. A device that fails is left out of the
     * result and logged; it does not fail the others.
     *
     * @return a stage with each device's statistics
     */
    CompletionStage<Map<Device, DefragmentationStats>> globalGc();
}
