package io.ferrum.memory.pool;

/**
 * Whether the engine clears memory so that one owner never sees what a previous owner wrote.
 *
 * <p>Zeroing costs a pass over every byte (docs/PERFORMANCE.md item 15), which dominates the
 * allocation cost of large blocks, so the default is {@link #NONE}: like malloc, Netty, Arrow and
 * RMM, a new block holds whatever its memory held before, and fresh chunks hold whatever the device
 * gave. Choose {@link #ON_ALLOCATE} or {@link #ON_FREE} where owners do not trust each other (a
 * device shared by tenants).
 */
public enum ZeroingPolicy {
    /** Never clear: fastest; a new block may show bytes of a freed one. */
    NONE,
    /** Clear each block when it is allocated: every new block reads as zeros (calloc semantics). */
    ON_ALLOCATE,
    /** Clear each block when it is freed: freed data does not linger in the pool. */
    ON_FREE
}
