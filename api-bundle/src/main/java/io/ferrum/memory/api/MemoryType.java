package io.ferrum.memory.api;

/**
 * What an allocation is for. A manager keeps one pool per type, each with its own {@link
 * MemoryPoolConfig}, so that short-lived scratch memory does not fragment long-lived tensors.
 */
public enum MemoryType {
    /** General purpose memory; the type of every allocation that names none. */
    GENERAL,
    /** Memory for tensor operations. */
    TENSOR,
    /** Memory for a KV cache (many equal blocks, long-lived). */
    CACHE,
    /** Scratch memory, freed soon after use. */
    TEMPORARY,
    /** Page-locked host memory for fast transfers to and from a device. */
    PINNED,
    /** Memory shared between devices. */
    MAPPED
}
