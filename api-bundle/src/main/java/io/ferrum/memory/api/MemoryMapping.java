package io.ferrum.memory.api;

/**
 * Two handles on two devices that alias the same memory: a write through one is visible through the
 * other (after the device's usual synchronisation). Created by {@link
 * AdvancedMemoryManager#createMapping}; each handle is freed on its own, and the memory goes back
 * when both are.
 *
 * @param source       the handle on {@code sourceDevice}
 * @param target       the handle on {@code targetDevice}
 * @param sourceDevice the first device
 * @param targetDevice the second device
 * @param size         bytes shared, more than zero
 */
public record MemoryMapping(MemoryHandle source, MemoryHandle target, Device sourceDevice, Device targetDevice,
                            long size) {

    /**
     * @throws InvalidMemoryRequestException on a null field or a size of zero or less
     */
    public MemoryMapping {
        if (source == null || target == null || sourceDevice == null || targetDevice == null) {
            throw new InvalidMemoryRequestException("Invalid mapping: both handles and both devices are required");
        }
        if (size <= 0) {
            throw new InvalidMemoryRequestException("Invalid mapping size " + size + " bytes: must be more than zero");
        }
    }
}
