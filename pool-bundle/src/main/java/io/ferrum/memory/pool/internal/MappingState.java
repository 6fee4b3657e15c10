package io.ferrum.memory.pool.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;

/**
 * The open views of one mapped block. Every view is bound to one shared arena; closing it makes
 * every view throw on access, so freed memory can never be read through an old view. When the device
 * memory is not host-addressable, {@code staging} holds a host copy that is written back on unmap.
 * The copy lives in an arena of its own, apart from the views': an unmap closes every view first,
 * then writes the copy back outside the pool's lock ({@link Mappings#unmap}), then frees it.
 */
final class MappingState {
    final Arena arena;
    /** Host copy for devices the CPU cannot address directly; null when views point at the device memory. */
    final MemorySegment staging;
    /** The arena that holds {@link #staging}; null when there is none. */
    final Arena stagingArena;
    boolean writable;
    /**
     * Under the pool lock: an unmap closed the views and writes the staging copy back (the block
     * pinned). The mapping is gone for every caller: a map waits for the write-back's end, an unmap
     * finds nothing mapped, a free or a close drops it; the unmap frees the copy when done.
     */
    boolean writingBack;
    /**
     * Under the pool lock: published before its staging copy is made outside the lock (the block
     * pinned), without views or arenas: a map waits for the copy, an unmap finds nothing mapped, a
     * free or a close drops it. The map replaces it with the filled mapping.
     */
    boolean filling;

    MappingState(Arena arena, MemorySegment staging, Arena stagingArena) {
        this.arena = arena;
        this.staging = staging;
        this.stagingArena = stagingArena;
    }

    /** @return true while a staging copy is made or written back outside the pool's lock: no view of it is handed out */
    boolean inTransit() {
        return filling || writingBack;
    }
}
