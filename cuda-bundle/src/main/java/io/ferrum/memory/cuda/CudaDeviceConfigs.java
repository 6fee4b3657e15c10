package io.ferrum.memory.cuda;

import java.lang.reflect.Proxy;
import java.util.Locale;
import java.util.Map;
import java.util.OptionalLong;

import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.ZeroingPolicy;

/**
 * {@link CudaDeviceConfig} into what the engine and the upstream take, and the check that refuses a
 * bad configuration with one message naming the value.
 */
final class CudaDeviceConfigs {
    /** The configuration of a GPU that has none: every attribute at its default. */
    static final CudaDeviceConfig DEFAULTS = of(Map.of());

    private CudaDeviceConfigs() {
    }

    /** @return the configuration DS would hand a component for these properties (tests, defaults) */
    static CudaDeviceConfig of(Map<String, Object> values) {
        Map<String, Object> copy = Map.copyOf(values);
        return (CudaDeviceConfig) Proxy.newProxyInstance(CudaDeviceConfig.class.getClassLoader(),
                new Class<?>[] {CudaDeviceConfig.class}, (proxy, method, args) -> switch (method.getName()) {
                    case "annotationType" -> CudaDeviceConfig.class;
                    case "toString" -> "CudaDeviceConfig" + copy;
                    case "hashCode" -> copy.hashCode();
                    case "equals" -> proxy == args[0];
                    default -> copy.containsKey(method.getName()) ? copy.get(method.getName()) : method.getDefaultValue();
                });
    }

    /**
     * @param cfg     a configuration
     * @param devices GPUs present
     * @param index   the GPU it is for
     * @return why it cannot apply, naming the bad value, or null when it can
     */
    static String refusal(CudaDeviceConfig cfg, int index, int devices) {
        if (index < 0 || index >= devices) {
            return "Configuration of cuda:" + index + " refused: index=" + index + ", but the driver reports "
                    + devices + " CUDA device" + (devices == 1 ? "" : "s") + " (use 0"
                    + (devices > 1 ? " to " + (devices - 1) : "") + ")";
        }
        try {
            managerConfig(cfg);
            zeroing(cfg.zeroing());
            settings(cfg);
            PoolSettings.defaults().withCapacity(cfg.capacity()).withThreadCache(cfg.threadCacheBytes());
            return null;
        } catch (InvalidMemoryRequestException e) {
            return "Configuration of cuda:" + index + " refused: " + e.getMessage();
        }
    }

    static CudaSettings settings(CudaDeviceConfig cfg) {
        return new CudaSettings(cfg.stagingSlots(), cfg.stagingSlotBytes());
    }

    static MemoryManagerConfig managerConfig(CudaDeviceConfig cfg) {
        MemoryPoolConfig pool = new MemoryPoolConfig(cfg.initialSize(),
                cfg.maxSize() > 0 ? OptionalLong.of(cfg.maxSize()) : OptionalLong.empty(),
                cfg.growthIncrement(), cfg.autoExpansion(), cfg.alignment(), cfg.preAllocate(), cfg.stats());
        return new MemoryManagerConfig(Map.of(MemoryType.GENERAL, pool), true, cfg.autoGc(), cfg.gcThreshold(),
                cfg.debug(), cfg.maxConcurrentTransfers());
    }

    static ZeroingPolicy zeroing(String value) {
        String v = value == null ? "none" : value.strip().toLowerCase(Locale.ROOT).replace('_', '-');
        return switch (v) {
            case "none" -> ZeroingPolicy.NONE;
            case "on-allocate" -> ZeroingPolicy.ON_ALLOCATE;
            case "on-free" -> ZeroingPolicy.ON_FREE;
            default -> throw new InvalidMemoryRequestException("Invalid zeroing '" + value
                    + "': use none, on-allocate or on-free");
        };
    }
}
