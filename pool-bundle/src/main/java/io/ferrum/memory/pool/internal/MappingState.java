package io.ferrum.memory.pool.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * The open views of one mapped block. Every view is bound to one shared arena; closing it makes
 * every view throw on access, so freed memory can never be read through an old view. When the device
 * memory is not host-addressable, {@code staging} holds a host copy that is written back on unmap.
 */
final class MappingState {
    final Arena arena;
    /** Host copy for devices the CPU cannot address directly; null when views point at the device memory. */
    final MemorySegment staging;
    boolean writable;

    MappingState(Arena arena, MemorySegment staging) {
        this.arena = arena;
        this.staging = staging;
    }
}
