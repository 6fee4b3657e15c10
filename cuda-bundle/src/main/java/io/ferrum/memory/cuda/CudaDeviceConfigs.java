package io.ferrum.memory.cuda;

import java.lang.reflect.Proxy;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalLong;

import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.ConfigurationCheck;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.ZeroingPolicy;

/**
 * {@link CudaDeviceConfig} into what the engine and the upstream take, and the check that refuses a
 * bad configuration with one message naming every bad value.
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
                    // As DS does: a typed value given for a String attribute (every flag and number) arrives as its text.
                    default -> !copy.containsKey(method.getName()) ? method.getDefaultValue()
                            : method.getReturnType() == String.class ? String.valueOf(copy.get(method.getName()))
                            : copy.get(method.getName());
                });
    }

    /**
     * Checks every attribute before any applies: each on its own first, then the rules across
     * attributes whose attributes are good, so that every bad value is named at once.
     *
     * @param cfg     a configuration
     * @param devices GPUs present
     * @param index   the GPU it is for; null when the configuration's own index is no whole number
     * @return why it cannot apply, naming every bad value, or null when it can
     */
    static String refusal(CudaDeviceConfig cfg, Integer index, int devices) {
        return refusal(cfg, Map.of(), index, devices);
    }

    /** @param properties the raw properties of {@code cfg} (a list is refused: DS would keep its first element) */
    static String refusal(CudaDeviceConfig cfg, Map<String, ?> properties, Integer index, int devices) {
        ConfigurationCheck check = new ConfigurationCheck();
        check.singleValues(properties);
        check.knownAttributes(properties, CudaDeviceConfig.class);
        if (index == null) {
            check.problem("Invalid index " + ConfigurationCheck.quoted(cfg.index()) + ": use the index of a GPU the driver reports: " + choices(devices));
        } else if (index < 0 || index >= devices) {
            check.problem("index=" + index + ", but the driver reports " + devices + " CUDA device"
                    + (devices == 1 ? "" : "s") + ": use " + choices(devices));
        }
        return refusal(check, cfg, index == null ? ConfiguredCudaDevice.FACTORY_PID : "cuda:" + index);
    }

    /**
     * The check of the PID {@value CudaBackend#PID}, which configures every GPU that has no factory
     * configuration of its own: its index means nothing, and a refusal names the PID, not one GPU.
     *
     * @return why it cannot apply, naming every bad value, or null when it can
     */
    static String defaultsRefusal(CudaDeviceConfig cfg, Map<String, ?> properties) {
        ConfigurationCheck check = new ConfigurationCheck();
        check.singleValues(properties);
        check.knownAttributes(properties, CudaDeviceConfig.class);
        return refusal(check, cfg, CudaBackend.PID + " (every GPU)");
    }

    private static String refusal(ConfigurationCheck check, CudaDeviceConfig cfg, String subject) {
        Long capacity = check.longInteger("capacity", cfg.capacity());
        Long initial = check.longInteger("initialSize", cfg.initialSize());
        Long maxSize = check.longInteger("maxSize", cfg.maxSize());
        Long growth = check.longInteger("growthIncrement", cfg.growthIncrement());
        Long alignment = check.longInteger("alignment", cfg.alignment());
        Long threadCache = check.longInteger("threadCacheBytes", cfg.threadCacheBytes());
        check.read(() -> zeroing(cfg.zeroing()));
        Boolean autoExpansion = check.flag("autoExpansion", cfg.autoExpansion());
        check.flag("preAllocate", cfg.preAllocate());
        check.flag("stats", cfg.stats());
        check.flag("autoGc", cfg.autoGc());
        check.flag("debug", cfg.debug());
        Double gcThreshold = check.decimal("gcThreshold", cfg.gcThreshold());
        Integer transfers = check.integer("maxConcurrentTransfers", cfg.maxConcurrentTransfers(), 1);
        Integer slots = check.integer("stagingSlots", cfg.stagingSlots(), CudaSettings.MIN_SLOTS);
        Long slotBytes = check.longInteger("stagingSlotBytes", cfg.stagingSlotBytes());

        check.poolRules(initial, maxSize, growth, autoExpansion, alignment);
        check.managerRules(gcThreshold, transfers);
        if (capacity != null) {
            check.read(() -> PoolSettings.defaults().withCapacity(capacity));
        }
        if (threadCache != null) {
            check.read(() -> PoolSettings.defaults().withThreadCache(threadCache));
        }
        // CudaSettings names its first bad value only: each on its own, with the other at its default.
        if (slots != null) {
            check.read(() -> new CudaSettings(slots, CudaSettings.DEFAULTS.stagingSlotBytes()));
        }
        if (slotBytes != null) {
            check.read(() -> new CudaSettings(CudaSettings.DEFAULTS.stagingSlots(), slotBytes));
        }
        List<String> bad = check.problems();
        return bad.isEmpty() ? null : "Configuration of " + subject + " refused: " + String.join("; ", bad);
    }

    /** @return the indexes of {@code devices} GPUs, as a reader would list them: 0, 0 or 1, 0 to 3 */
    private static String choices(int devices) {
        return devices <= 1 ? "0" : devices == 2 ? "0 or 1" : "0 to " + (devices - 1);
    }

    /** @return the configuration's index, or null when it is no whole number (a bad value {@link #refusal} names) */
    static Integer index(CudaDeviceConfig cfg) {
        try {
            return ConfigurationCheck.toInteger("index", cfg.index());
        } catch (InvalidMemoryRequestException notANumber) {
            return null;
        }
    }

    /** @param cfg a valid configuration (see {@link #refusal}) @return its capacity in bytes; 0: the whole GPU */
    static long capacity(CudaDeviceConfig cfg) {
        return ConfigurationCheck.toLong("capacity", cfg.capacity());
    }

    /** @param cfg a valid configuration @return its thread cache bytes */
    static long threadCacheBytes(CudaDeviceConfig cfg) {
        return ConfigurationCheck.toLong("threadCacheBytes", cfg.threadCacheBytes());
    }

    /** @param cfg a valid configuration @return the backend's own settings */
    static CudaSettings settings(CudaDeviceConfig cfg) {
        return new CudaSettings(ConfigurationCheck.toInteger("stagingSlots", cfg.stagingSlots()),
                ConfigurationCheck.toLong("stagingSlotBytes", cfg.stagingSlotBytes()));
    }

    /** @param cfg a valid configuration @return the manager's configuration */
    static MemoryManagerConfig managerConfig(CudaDeviceConfig cfg) {
        long maxSize = ConfigurationCheck.toLong("maxSize", cfg.maxSize());
        MemoryPoolConfig pool = new MemoryPoolConfig(ConfigurationCheck.toLong("initialSize", cfg.initialSize()),
                maxSize > 0 ? OptionalLong.of(maxSize) : OptionalLong.empty(),
                ConfigurationCheck.toLong("growthIncrement", cfg.growthIncrement()),
                ConfigurationCheck.toFlag("autoExpansion", cfg.autoExpansion()),
                ConfigurationCheck.toLong("alignment", cfg.alignment()),
                ConfigurationCheck.toFlag("preAllocate", cfg.preAllocate()), ConfigurationCheck.toFlag("stats", cfg.stats()));
        return new MemoryManagerConfig(Map.of(MemoryType.GENERAL, pool), true, ConfigurationCheck.toFlag("autoGc", cfg.autoGc()),
                ConfigurationCheck.toDecimal("gcThreshold", cfg.gcThreshold()), ConfigurationCheck.toFlag("debug", cfg.debug()),
                ConfigurationCheck.toInteger("maxConcurrentTransfers", cfg.maxConcurrentTransfers()));
    }

    /**
     * @param a a valid configuration (see {@link #refusal})
     * @param b another
     * @return whether they differ in pool attributes only (initialSize, maxSize, growthIncrement,
     *         autoExpansion, alignment, preAllocate, stats), which a running GPU takes without a restart
     */
    static boolean onlyPoolsDiffer(CudaDeviceConfig a, CudaDeviceConfig b) {
        MemoryManagerConfig x = managerConfig(a);
        MemoryManagerConfig y = managerConfig(b);
        return Objects.equals(index(a), index(b)) && capacity(a) == capacity(b)
                && zeroing(a.zeroing()) == zeroing(b.zeroing()) && threadCacheBytes(a) == threadCacheBytes(b)
                && settings(a).equals(settings(b)) && x.enableTracking() == y.enableTracking()
                && x.enableAutoGc() == y.enableAutoGc() && x.gcThreshold() == y.gcThreshold()
                && x.enableDebug() == y.enableDebug() && x.maxConcurrentTransfers() == y.maxConcurrentTransfers();
    }

    static ZeroingPolicy zeroing(String value) {
        String v = value == null ? "none" : value.strip().toLowerCase(Locale.ROOT).replace('_', '-');
        return switch (v) {
            case "none" -> ZeroingPolicy.NONE;
            case "on-allocate" -> ZeroingPolicy.ON_ALLOCATE;
            case "on-free" -> ZeroingPolicy.ON_FREE;
            default -> throw new InvalidMemoryRequestException("Invalid zeroing " + ConfigurationCheck.quoted(value)
                    + ": use none, on-allocate or on-free");
        };
    }
}
