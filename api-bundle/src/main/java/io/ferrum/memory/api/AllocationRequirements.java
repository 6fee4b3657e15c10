package io.ferrum.memory.api;

import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * What a caller of the {@link MemoryRouter} asks of an allocation, beyond its size. Strategies read
 * it to choose a device.
 *
 * @param preferredDevices devices in order of preference (earlier is better); may be empty; copied
 * @param memoryType       the pool to allocate from, not null
 * @param alignment        required alignment, a power of two, or empty for the pool's default
 * @param critical         time-critical: strategies may favour a device that needs no growth
 * @param expectedLifetime how long the block is expected to live, if known; not null
 */
public record AllocationRequirements(List<Device> preferredDevices, MemoryType memoryType, OptionalLong alignment,
                                     boolean critical, Optional<Duration> expectedLifetime) {

    /**
     * @throws InvalidMemoryRequestException on a null field or element, a bad alignment, or a
     *                                       negative lifetime
     */
    public AllocationRequirements {
        if (preferredDevices == null || preferredDevices.stream().anyMatch(Objects::isNull) || memoryType == null
                || alignment == null || expectedLifetime == null) {
            throw new InvalidMemoryRequestException("Invalid allocation requirements: preferredDevices (without null"
                    + " elements), memoryType, alignment and expectedLifetime are required (use empty optionals)");
        }
        if (alignment.isPresent() && (alignment.getAsLong() <= 0 || Long.bitCount(alignment.getAsLong()) != 1)) {
            throw new InvalidMemoryRequestException("Invalid allocation requirements: alignment " + alignment.getAsLong()
                    + " is not a power of two");
        }
        if (expectedLifetime.isPresent() && expectedLifetime.get().isNegative()) {
            throw new InvalidMemoryRequestException("Invalid allocation requirements: expected lifetime "
                    + expectedLifetime.get() + " is negative");
        }
        preferredDevices = List.copyOf(preferredDevices);
    }

    /**
     * @return no preference, {@link MemoryType#GENERAL}, the pool's alignment, not critical, lifetime
     *         unknown
     */
    public static AllocationRequirements defaults() {
        return new AllocationRequirements(List.of(), MemoryType.GENERAL, OptionalLong.empty(), false, Optional.empty());
    }

    /**
     * @param devices preferred devices, best first
     * @return a copy preferring those devices
     */
    public AllocationRequirements preferring(Device... devices) {
        return new AllocationRequirements(Arrays.asList(devices), memoryType, alignment, critical, expectedLifetime);
    }

    /**
     * @param type the pool to allocate from
     * @return a copy with that memory type
     */
    public AllocationRequirements withMemoryType(MemoryType type) {
        return new AllocationRequirements(preferredDevices, type, alignment, critical, expectedLifetime);
    }

    /**
     * @param bytes required alignment, a power of two
     * @return a copy with that alignment
     */
    public AllocationRequirements withAlignment(long bytes) {
        return new AllocationRequirements(preferredDevices, memoryType, OptionalLong.of(bytes), critical, expectedLifetime);
    }

    /**
     * @param isCritical whether the allocation is time-critical
     * @return a copy with that flag
     */
    public AllocationRequirements withCritical(boolean isCritical) {
        return new AllocationRequirements(preferredDevices, memoryType, alignment, isCritical, expectedLifetime);
    }

    /**
     * @param lifetime expected lifetime, zero or more
     * @return a copy with that lifetime
     */
    public AllocationRequirements withExpectedLifetime(Duration lifetime) {
        return new AllocationRequirements(preferredDevices, memoryType, alignment, critical, Optional.of(lifetime));
    }

    /**
     * @param device a device
     * @return its position in {@link #preferredDevices()}, or -1 if it is not preferred
     */
    public int preferenceOf(Device device) {
        return preferredDevices.indexOf(device);
    }
}
