package io.ferrum.memory.api;

import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.osgi.annotation.versioning.ConsumerType;

/**
 * Picks the device for an allocation. Implemented by strategy bundles and registered as OSGi
 * services with the service property {@value #NAME_PROPERTY}; the {@link MemoryRouter} asks the
 * active one.
 *
 * <p>Implementations must be thread-safe and fast (they run on every routed allocation), must not
 * allocate memory themselves, and must return only devices from {@code available}.
 */
@ConsumerType
public interface AllocationStrategy {

    /** Service property: the strategy's name, as returned by {@link #name()}. */
    String NAME_PROPERTY = "memory.strategy.name";

    /**
     * @param size         bytes requested, more than zero
     * @param requirements what the caller asked for
     * @param available    the devices that may be chosen
     * @param memoryInfo   current information of each available device (a device missing here is
     *                     unknown and should not be chosen)
     * @return the chosen device, or empty when none is suitable
     */
    Optional<Device> selectDevice(long size, AllocationRequirements requirements, List<Device> available,
                                  Map<Device, MemoryInfo> memoryInfo);

    /** @return the strategy's name, for example {@code best-fit} */
    String name();
}
