package io.ferrum.memory.api;

/**
 * How a block will be used, so that the backend can advise the device (for example {@code madvise}
 * on the host, {@code cudaMemAdvise} on a GPU). Hints never change results, only speed.
 */
public enum MemoryUsageHint {
    /** Accessed front to back. */
    SEQUENTIAL,
    /** Accessed at random offsets. */
    RANDOM,
    /** Mostly read. */
    READ_MOSTLY,
    /** Mostly written. */
    WRITE_MOSTLY,
    /** Short-lived; may be reclaimed aggressively. */
    TEMPORARY,
    /** Should stay resident (not paged out or evicted). */
    RESIDENT
}
