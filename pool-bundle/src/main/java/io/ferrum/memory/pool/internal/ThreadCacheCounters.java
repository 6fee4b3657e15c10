package io.ferrum.memory.pool.internal;

/**
 * The fields of a {@link ThreadCache} that its owner writes on every allocate and free, between
 * 64 bytes of padding on each side ({@link BlockPadding} before, {@link ThreadCache}'s own padding
 * after): the garbage collector may move two threads' caches next to each other, and two threads
 * writing one cache line halve the speed of both.
 */
abstract class ThreadCacheCounters extends BlockPadding {
    /** Bytes of the cached blocks; written by the owner, read by anyone through {@link ThreadCache#bytes()}. */
    long bytes;
    /** Bytes of the cached blocks of at most {@link ThreadCache#MAX_CLASS}; owner only. */
    long smallBytes;
    /** Number of cached blocks; written by the owner, read by anyone through {@link ThreadCache#count()}. */
    int count;
    /** Spare handle-table slots in {@link ThreadCache#slots}, from {@link ThreadCache#SLOT_BASE}. */
    int slotCount;
    /** The manager's drain epoch this cache has honoured. */
    int epoch;
    /**
     * While positive, this thread caches blocks above {@link ThreadCache#MAX_CLASS}: set when it finds
     * that another thread took a pool lock since its own last visit, counted down on each visit in a row.
     */
    int largeCredit;
}
