package io.ferrum.memory.pool.internal;

/**
 * The rule that decides whether a thread caches blocks above {@link SizeClasses#MAX_CLASS} (up to
 * {@link SizeClasses#MAX_BLOCK}): such blocks cost memory (a reused block may be larger than asked,
 * and one block may be 4 MiB), worth paying only where it saves something. The rule sets
 * {@link ThreadCache#cachesLarge}, which the free path reads.
 *
 * <p>Called by a cache's owner thread only, holding the pool's lock, on an allocate or free its
 * cache could not serve (never on the cached path, which stays free of this call).
 */
interface LargeBlockPolicy {

    /** A new cache starts: sets its initial state for this rule. */
    void started(ThreadCache tc);

    /**
     * The owner of {@code tc} holds {@code pool}'s lock on an allocate or free the cache could not
     * serve.
     *
     * @param caches every cache of the manager, {@code tc} included
     */
    void sawPoolLock(ThreadCache tc, Pool pool, Iterable<ThreadCache> caches);
}
