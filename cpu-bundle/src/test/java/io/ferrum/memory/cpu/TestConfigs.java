package io.ferrum.memory.cpu;

import java.lang.reflect.Proxy;
import java.util.Map;

/** Device configurations for tests: the Metatype defaults of {@link CpuDeviceConfig}, with some values replaced. */
final class TestConfigs {
    private TestConfigs() {
    }

    /**
     * @param values attribute name to value, for the attributes that differ from their defaults
     * @return the configuration DS would hand a component for those properties
     */
    static CpuDeviceConfig of(Map<String, Object> values) {
        return (CpuDeviceConfig) Proxy.newProxyInstance(CpuDeviceConfig.class.getClassLoader(),
                new Class<?>[] {CpuDeviceConfig.class}, (proxy, method, args) -> switch (method.getName()) {
                    case "annotationType" -> CpuDeviceConfig.class;
                    case "toString" -> "CpuDeviceConfig" + values;
                    case "hashCode" -> values.hashCode();
                    case "equals" -> proxy == args[0];
                    default -> values.containsKey(method.getName()) ? values.get(method.getName()) : method.getDefaultValue();
                });
    }

    /** @return a small device: 64 MiB of capacity in 4 MiB chunks */
    static CpuDeviceConfig small() {
        return of(Map.of("capacity", 64L << 20, "initialSize", 4L << 20, "growthIncrement", 4L << 20));
    }
}
