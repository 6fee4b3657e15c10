package io.ferrum.memory.pool.internal;

/**
 * What an allocation tries when its pool cannot carve the block and cannot grow (its limit, the
 * device's capacity, or the upstream refused), before it reports out of memory.
 */
interface OutOfMemoryHook {

    /**
     * Called once per allocation, outside every lock, after a growth of {@code starved} failed.
     *
     * @return true if the allocation should try once more (something may have been freed)
     */
    boolean growthFailed(Pool starved);
}
