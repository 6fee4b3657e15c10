package io.ferrum.memory.pool;

import org.osgi.annotation.versioning.ProviderType;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryObserver;
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
     * @param streams  the stream manager whose streams {@link #copyAsync} runs on, or {@code null}
     *                 for a private one (closed with the manager)
     * @return the manager
     * @throws io.ferrum.memory.api.OutOfDeviceMemoryException if pre-allocation fails
     */
    static PooledMemoryManager create(DeviceUpstream upstream, MemoryManagerConfig config, PoolSettings settings,
                                      HostStreamManager streams) {
        return new PoolEngine(upstream, config, settings, streams);
    }

    /**
     * A snapshot taken without locks, for decisions made on every allocation (the router's
     * strategies): used, free, reserved and allocations come from the engine's atomic counters (each
     * exact; reserved may include a chunk being reserved at that moment), the fragmentation ratio is
     * the one computed by the last {@link #memoryInfo()}.
     *
     * @return the snapshot
     * @throws io.ferrum.memory.api.DeviceUnavailableException once closed
     */
    io.ferrum.memory.api.MemoryInfo quickInfo();

    /** @return the backend name of the upstream ({@code ffm}, ...) */
    String backendName();

    /**
     * Gives every empty chunk back to the device, except what pre-allocated pools keep.
     *
     * @return bytes released
     */
    long trim();

    /**
     * Adds an observer told of this device's pressure changes (edge-triggered, outside the
     * allocation locks, after the pressure callback). Used by the global monitor.
     *
     * @param observer the observer; its other methods are not called by the manager
     */
    void addObserver(MemoryObserver observer);

    /** @param observer an observer added before; unknown ones are ignored */
    void removeObserver(MemoryObserver observer);

    /** @return true once {@link #close()} has run */
    boolean isClosed();

    /** @return the {@link io.ferrum.memory.api.MemoryHandle#id()} bits common to every handle of this manager */
    long handlePrefix();
}
