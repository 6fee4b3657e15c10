package io.ferrum.memory.cuda;

import io.ferrum.memory.api.MemoryType;

/** Where a chunk's memory comes from, by the memory type of the pool it serves. */
enum ChunkKind {
    /** Device memory, {@code cuMemAlloc}: GENERAL, TENSOR, CACHE, TEMPORARY. Not host-addressable. */
    DEVICE,
    /** Page-locked host memory, {@code cuMemHostAlloc} (portable, device-mapped): PINNED. */
    PINNED,
    /** Managed memory, {@code cuMemAllocManaged} (attached globally): MAPPED. Prefetch and advice apply. */
    MANAGED;

    /** @return the kind of chunk a pool of {@code type} is made of */
    static ChunkKind of(MemoryType type) {
        return switch (type) {
            case PINNED -> PINNED;
            case MAPPED -> MANAGED;
            case GENERAL, TENSOR, CACHE, TEMPORARY -> DEVICE;
        };
    }
}
