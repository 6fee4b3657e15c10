package io.ferrum.memory.api;

import java.time.Instant;

/**
 * What a manager knows about one live allocation.
 *
 * @param handle      the allocation, not null
 * @param size        bytes requested by the caller, more than zero
 * @param device      the device holding it, not null
 * @param alignment   the alignment its address honours, a power of two
 * @param allocatedAt when it was allocated, not null
 * @param mapped      true while a view from {@link AdvancedMemoryManager#mapMemory} is open
 * @param memoryType  the pool it came from, not null
 */
public record MemoryHandleInfo(MemoryHandle handle, long size, Device device, long alignment,
                               Instant allocatedAt, boolean mapped, MemoryType memoryType) {

    /**
     * @throws InvalidMemoryRequestException on a null field, a size of zero or less, or an
     *                                       alignment that is not a power of two
     */
    public MemoryHandleInfo {
        if (handle == null || device == null || allocatedAt == null || memoryType == null) {
            throw new InvalidMemoryRequestException("Invalid handle info: handle, device, allocatedAt and memoryType are required");
        }
        if (size <= 0) {
            throw new InvalidMemoryRequestException("Invalid handle info for " + handle + ": size " + size
                    + " must be more than zero");
        }
        if (alignment <= 0 || Long.bitCount(alignment) != 1) {
            throw new InvalidMemoryRequestException("Invalid handle info for " + handle + ": alignment " + alignment
                    + " is not a power of two");
        }
    }
}
