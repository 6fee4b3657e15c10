package io.ferrum.memory.pool;

import java.util.function.Function;
import java.util.function.LongSupplier;

import io.ferrum.memory.api.Device;

import io.ferrum.memory.api.InvalidMemoryRequestException;

/**
 * Engine settings that the API's {@link io.ferrum.memory.api.MemoryManagerConfig} does not cover.
 *
 * @param capacityBytes the device capacity this manager may use (its {@code totalBytes}); 0 means the
 *                      upstream's {@link DeviceUpstream#physicalCapacity()}
 * @param zeroing       when memory is cleared between owners
 * @param log           where leaks and callback failures are reported, not null
 * @param nanoClock     monotonic nanoseconds (System::nanoTime); replaceable so tests of time-based
 *                      statistics are deterministic; not null
 * @param peers         the backend's other running managers by device (answering null for an unknown
 *                      device), for {@link io.ferrum.memory.api.AdvancedMemoryManager#createMapping}
 *                      across devices and {@link io.ferrum.memory.api.DeviceMemoryManager#copyToPeer};
 *                      each answered for its own device (a manager answered for another device is
 *                      refused). A peer of the same kind must be of the same backend (its upstream
 *                      copies this one's chunks: a peer copy); one of another backend (the host's
 *                      managers, answered by a GPU's backend) may only name this manager's mapped
 *                      blocks, and copies between its chunks and this one's go through the host
 *                      memory of whichever side the CPU can address; not null
 * @param threadCacheBytes how many bytes of freed blocks each platform thread may keep for its own
 *                      next allocations (a quarter of it for blocks up to 256 KiB, whose requests are
 *                      rounded up to one of 16 size classes per power of two; blocks up to 4 MiB only
 *                      while other threads use the manager too); 0 turns thread caches off.
 *                      Caches are also off with a zeroing policy or debug tracking
 */
public record PoolSettings(long capacityBytes, ZeroingPolicy zeroing, PoolLog log, LongSupplier nanoClock,
                           Function<Device, PooledMemoryManager> peers, long threadCacheBytes) {

    /**
     * The system clock ({@code System::nanoTime}) of {@link #defaults()}. With it, a manager takes
     * allocation times from a clock refreshed every millisecond instead of reading the system clock
     * on each allocation (which costs tens of nanoseconds on virtual machines); any other clock is
     * read exactly.
     */
    public static final LongSupplier SYSTEM_NANOS = System::nanoTime;

    /** Default {@link #threadCacheBytes}: 32 MiB per thread and manager. */
    public static final long DEFAULT_THREAD_CACHE_BYTES = 32L << 20;

    /**
     * @throws InvalidMemoryRequestException on a negative capacity or a null field
     */
    public PoolSettings {
        if (capacityBytes < 0) {
            throw new InvalidMemoryRequestException("Invalid capacity " + capacityBytes
                    + " bytes: use 0 for the device's physical capacity or a positive limit");
        }
        if (threadCacheBytes < 0) {
            throw new InvalidMemoryRequestException("Invalid thread cache size " + threadCacheBytes
                    + " bytes: use 0 to turn thread caches off or a positive size");
        }
        if (zeroing == null || log == null || nanoClock == null || peers == null) {
            throw new InvalidMemoryRequestException("Invalid pool settings: zeroing, log, nanoClock and peers are required");
        }
    }

    /** @return the device's physical capacity, no zeroing, no log, the system clock, no peers */
    public static PoolSettings defaults() {
        return new PoolSettings(0, ZeroingPolicy.NONE, PoolLog.NONE, SYSTEM_NANOS, d -> null,
                DEFAULT_THREAD_CACHE_BYTES);
    }

    /** @param bytes capacity, 0 for physical @return a copy with that capacity */
    public PoolSettings withCapacity(long bytes) {
        return new PoolSettings(bytes, zeroing, log, nanoClock, peers, threadCacheBytes);
    }

    /** @param policy zeroing policy @return a copy with that policy */
    public PoolSettings withZeroing(ZeroingPolicy policy) {
        return new PoolSettings(capacityBytes, policy, log, nanoClock, peers, threadCacheBytes);
    }

    /** @param target log @return a copy logging there */
    public PoolSettings withLog(PoolLog target) {
        return new PoolSettings(capacityBytes, zeroing, target, nanoClock, peers, threadCacheBytes);
    }

    /** @param clock monotonic nanoseconds @return a copy using that clock */
    public PoolSettings withNanoClock(LongSupplier clock) {
        return new PoolSettings(capacityBytes, zeroing, log, clock, peers, threadCacheBytes);
    }

    /** @param lookup the backend's managers by device @return a copy using that lookup */
    public PoolSettings withPeers(Function<Device, PooledMemoryManager> lookup) {
        return new PoolSettings(capacityBytes, zeroing, log, nanoClock, lookup, threadCacheBytes);
    }

    /** @param bytes per-thread cache size, 0 for none @return a copy with that thread cache size */
    public PoolSettings withThreadCache(long bytes) {
        return new PoolSettings(capacityBytes, zeroing, log, nanoClock, peers, bytes);
    }
}
