package io.ferrum.memory.pool;

import org.osgi.annotation.versioning.ProviderType;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.internal.PoolEngine;

/**
 * An {@link AdvancedMemoryManager} over any {@link DeviceUpstream}: the pool engine every backend
 * reuses. See {@code docs/ARCHITECTURE.md} for the accounting definitions and concurrency rules.
 */
@ProviderType
public interface PooledMemoryManager extends AdvancedMemoryManager {

    /**
     * Creates a manager. Pools whose type has an entry in {@code config.poolConfigs()} and
     * {@code preAllocate} set reserve their initial size here.
     *
     * @param upstream the device's raw primitives; the manager owns it and closes it on {@link #close()}
     * @param config   pool configurations, tracking, auto-GC, debug, concurrent transfers
     * @param settings engine settings (capacity limit, zeroing, log, clock)
     * @param streams  the streams {@link #copyAsync} runs on (the CPU's: a {@link HostStreamManager}),
     *                 or {@code null} for a private {@link HostStreamManager} (closed with the manager)
     * @return the manager
     * @throws io.ferrum.memory.api.OutOfDeviceMemoryException if pre-allocation fails
     */
    static PooledMemoryManager create(DeviceUpstream upstream, MemoryManagerConfig config, PoolSettings settings,
                                      StreamExecutor streams) {
        return new PoolEngine(upstream, config, settings, streams);
    }

    /**
     * Checks a pool configuration against this manager and the pool's live blocks as {@link
     * #configurePool(io.ferrum.memory.api.Device, MemoryType, MemoryPoolConfig)} would, without
     * applying it: a caller that configures several pools checks them all first, so that a refusal
     * changes none. A block allocated after the check may still make configurePool refuse.
     *
     * @param type   the pool
     * @param config the configuration it would get
     * @throws io.ferrum.memory.api.InvalidMemoryRequestException as configurePool would (a maxSize
     *                                                            below the pool's live bytes, say)
     * @since 2.2
     */
    void checkPoolConfig(MemoryType type, MemoryPoolConfig config);

    /**
     * Gives every pool its configuration in {@code next}, or none: a backend applying an edited
     * device configuration to a running device. Every pool is checked first ({@link
     * #checkPoolConfig}); the pre-allocations of the new initial sizes are reserved next, outside
     * the pools; then every pool is checked again (a block allocated since the first check refuses)
     * and takes its configuration and pre-allocation at once. A refusal gives back what was
     * reserved for the edit and changes nothing else. A maxSize below what a pool holds gives back
     * its empty chunks only once every pool took its configuration (an edit that needs the room a
     * lower maxSize would free is refused). A pool that
     * {@code next} does not name takes GENERAL's values without pre-allocating, as {@link #create}
     * sets it up.
     *
     * @param next the manager configuration whose pools to apply (its other values are not applied)
     * @throws io.ferrum.memory.api.MemoryException naming the pool that refused; no pool changed
     * @since 2.7
     */
    void configurePools(MemoryManagerConfig next);

    /** @return the backend name of the upstream ({@code ffm}, ...) */
    String backendName();

    /**
     * Gives every empty chunk back to the device, except what pre-allocated pools keep.
     *
     * @return bytes released
     */
    long trim();

    /** @return true once {@link #close()} has run */
    boolean isClosed();

    /**
     * Closes this manager as {@link #close()} does, but only if it holds no live block: no block
     * named by a handle (a block cached for reuse by a thread is not live) and no alias it issued
     * for a peer's block. Otherwise it refuses and changes nothing. The check and the close are one
     * step: an allocation that races it either makes it refuse (its block stays live) or is refused
     * as on a closed manager; no block is handed out and then dropped by this close. A backend that
     * restarts a device only while it holds no block closes its manager with this. A defragmentation
     * that moves blocks is waited for, up to the limit a close waits (30 s); past it (a device copy
     * that does not return) this refuses too, and logs why.
     *
     * @return true if the manager is closed on return (by this call or an earlier close); false if
     *         it held a live block, and then nothing changed
     * @since 2.5
     */
    boolean closeIfUnused();
}
