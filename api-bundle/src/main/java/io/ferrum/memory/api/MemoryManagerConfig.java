package io.ferrum.memory.api;

import java.util.EnumMap;
import java.util.Map;

/**
 * How a {@link MemoryManagerFactory} sets up a manager.
 *
 * @param poolConfigs            pool configuration per memory type; a type without an entry uses
 *                               the {@link MemoryType#GENERAL} entry, or {@link
 *                               MemoryPoolConfig#defaults()} if there is none; copied, not null
 * @param enableTracking         keep per-handle information and statistics
 * @param enableAutoGc           trim and compact automatically when growth fails (then retry once),
 *                               and once each time an allocation takes a pool above {@code gcThreshold}
 * @param gcThreshold            utilisation in {@code [0, 1]} (a pool's used bytes over its
 *                               {@code maxSize}, or over the device's capacity) above which auto-GC
 *                               runs, once per crossing; 1 never crosses
 * @param enableDebug            record allocation sites (reported for leaks at close)
 * @param maxConcurrentTransfers asynchronous copies in flight at once, one or more
 */
public record MemoryManagerConfig(Map<MemoryType, MemoryPoolConfig> poolConfigs, boolean enableTracking,
                                  boolean enableAutoGc, double gcThreshold, boolean enableDebug,
                                  int maxConcurrentTransfers) {

    /** 0.85, the seed's default auto-GC threshold. */
    public static final double DEFAULT_GC_THRESHOLD = 0.85;
    /** 4, the seed's default number of concurrent transfers. */
    public static final int DEFAULT_MAX_CONCURRENT_TRANSFERS = 4;

    /**
     * @throws InvalidMemoryRequestException on a null map or entry, a threshold outside [0, 1], or
     *                                       fewer than one concurrent transfer
     */
    public MemoryManagerConfig {
        if (poolConfigs == null || poolConfigs.entrySet().stream().anyMatch(e -> e.getKey() == null || e.getValue() == null)) {
            throw new InvalidMemoryRequestException("Invalid manager configuration: poolConfigs must be a map without null keys or values");
        }
        if (!(gcThreshold >= 0.0 && gcThreshold <= 1.0)) {
            throw new InvalidMemoryRequestException("Invalid manager configuration: gcThreshold " + gcThreshold
                    + " must lie in [0, 1] (a fraction of capacity, 0.85 = 85 %)");
        }
        if (maxConcurrentTransfers < 1) {
            throw new InvalidMemoryRequestException("Invalid manager configuration: maxConcurrentTransfers "
                    + maxConcurrentTransfers + " must be one or more");
        }
        poolConfigs = poolConfigs.isEmpty() ? Map.of() : Map.copyOf(new EnumMap<>(poolConfigs));
    }

    /**
     * The seed's defaults: {GENERAL: pool defaults}, tracking on, auto-GC on at 0.85, debug off, 4
     * concurrent transfers.
     *
     * @return the default configuration
     */
    public static MemoryManagerConfig defaults() {
        return new MemoryManagerConfig(Map.of(MemoryType.GENERAL, MemoryPoolConfig.defaults()), true, true,
                DEFAULT_GC_THRESHOLD, false, DEFAULT_MAX_CONCURRENT_TRANSFERS);
    }

    /**
     * @param type a memory type, not null
     * @return the configuration of that type's pool: its own entry, else GENERAL's, else the defaults
     */
    public MemoryPoolConfig poolConfig(MemoryType type) {
        MemoryPoolConfig own = poolConfigs.get(type);
        if (own != null) {
            return own;
        }
        return poolConfigs.getOrDefault(MemoryType.GENERAL, MemoryPoolConfig.defaults());
    }

    /**
     * @param type   the memory type
     * @param config its pool configuration
     * @return a copy of this configuration with that pool entry set
     */
    public MemoryManagerConfig withPoolConfig(MemoryType type, MemoryPoolConfig config) {
        EnumMap<MemoryType, MemoryPoolConfig> copy = new EnumMap<>(MemoryType.class);
        copy.putAll(poolConfigs);
        copy.put(type, config);
        return new MemoryManagerConfig(copy, enableTracking, enableAutoGc, gcThreshold, enableDebug,
                maxConcurrentTransfers);
    }

    /**
     * @param enabled auto-GC on or off
     * @param threshold utilisation in [0, 1] at which it runs
     * @return a copy with those auto-GC settings
     */
    public MemoryManagerConfig withAutoGc(boolean enabled, double threshold) {
        return new MemoryManagerConfig(poolConfigs, enableTracking, enabled, threshold, enableDebug,
                maxConcurrentTransfers);
    }

    /**
     * @param tracking per-handle tracking on or off
     * @param debug    allocation-site recording on or off
     * @return a copy with those settings
     */
    public MemoryManagerConfig withTracking(boolean tracking, boolean debug) {
        return new MemoryManagerConfig(poolConfigs, tracking, enableAutoGc, gcThreshold, debug,
                maxConcurrentTransfers);
    }

    /**
     * @param transfers asynchronous copies in flight at once, one or more
     * @return a copy with that limit
     */
    public MemoryManagerConfig withMaxConcurrentTransfers(int transfers) {
        return new MemoryManagerConfig(poolConfigs, enableTracking, enableAutoGc, gcThreshold, enableDebug, transfers);
    }
}
