package io.ferrum.memory.api;

/** The access pattern a manager detected on one block ({@link MemoryAccessStats#patternType()}). */
public enum AccessPatternType {
    /** Each access starts where the previous one ended. */
    SEQUENTIAL,
    /** Accesses jump around the block. */
    RANDOM,
    /** Many accesses in a short window, then quiet. */
    BURST,
    /** No single pattern dominates. */
    MIXED,
    /** Too few accesses to tell. */
    UNKNOWN
}
