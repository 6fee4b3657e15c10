package io.ferrum.memory.api;

/** How a mapped view may be used ({@link AdvancedMemoryManager#mapMemory}). */
public enum MemoryAccess {
    /** The view is read-only: writes through it throw. */
    READ_ONLY,
    /** The caller only writes (the view itself cannot forbid reads). */
    WRITE_ONLY,
    /** The caller reads and writes. */
    READ_WRITE
}
