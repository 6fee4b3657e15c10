package io.ferrum.memory.cpu;

import java.lang.reflect.Proxy;
import java.util.Map;

/** Instances of {@link CpuDeviceConfig} outside DS: its Metatype defaults, with some values replaced. */
final class CpuDeviceConfigs {
    /** The configuration of a device that has none: every attribute at its default. */
    static final CpuDeviceConfig DEFAULTS = of(Map.of());

    private CpuDeviceConfigs() {
    }

    /**
     * @param values attribute name to value, for the attributes that differ from their defaults
     * @return the configuration DS would hand a component for those properties
     */
    static CpuDeviceConfig of(Map<String, Object> values) {
        Map<String, Object> copy = Map.copyOf(values);
        return (CpuDeviceConfig) Proxy.newProxyInstance(CpuDeviceConfig.class.getClassLoader(),
                new Class<?>[] {CpuDeviceConfig.class}, (proxy, method, args) -> switch (method.getName()) {
                    case "annotationType" -> CpuDeviceConfig.class;
                    case "toString" -> "CpuDeviceConfig" + copy;
                    case "hashCode" -> copy.hashCode();
                    case "equals" -> proxy == args[0];
                    // As DS does: a number given for a String attribute (a size) arrives as its text.
                    default -> !copy.containsKey(method.getName()) ? method.getDefaultValue()
                            : method.getReturnType() == String.class ? String.valueOf(copy.get(method.getName()))
                            : copy.get(method.getName());
                });
    }
}
