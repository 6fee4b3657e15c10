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
    /** Bytes of the cached blocks of at most {@link SizeClasses#MAX_CLASS}; owner only. */
    long smallBytes;
    /** Number of cached blocks; written by the owner, read by anyone through {@link ThreadCache#count()}. */
    int count;
    /**
     * Odd while {@link #bytes} and {@link #count} change, bumped before and after each change: a
     * reader that sees the same even value before and after reading them saw one moment (a seqlock).
     */
    int seq;
    /** Spare handle-table slots in {@link ThreadCache#slots}, from {@link ThreadCache#SLOT_BASE}. */
    int slotCount;
    /** The manager's drain epoch this cache has honoured. */
    int epoch;
    /**
     * Calls of the owner on this cache (one per cached-path allocation, hit or miss); written by
     * the owner, read by other threads through {@link ThreadCache#calls()} to tell whether it is busy.
     */
    long calls;
    /** The sum of the other live caches' {@link #calls} at this thread's last check; owner only. */
    long othersCalls;
    /** Pool-lock visits in a row by this thread until it checks whether other threads use the manager; owner only. */
    int untilCheck;
    /** While true, this thread caches blocks above {@link SizeClasses#MAX_CLASS}; owner only. */
    boolean cachesLarge;
    /** A shared cache's lease: 1 while a thread holds it ({@link ThreadCache#tryLease}); changed only atomically. */
    int leased;
}
