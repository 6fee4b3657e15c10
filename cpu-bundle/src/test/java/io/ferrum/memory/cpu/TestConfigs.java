package io.ferrum.memory.cpu;

import java.util.HashMap;
import java.util.Map;

/** Device configurations for tests. */
final class TestConfigs {
    private TestConfigs() {
    }

    /** @return a small device: 64 MiB of capacity in 4 MiB chunks */
    static CpuDeviceConfig small() {
        return small(Map.of());
    }

    /** @return a small device with some values replaced */
    static CpuDeviceConfig small(Map<String, Object> values) {
        Map<String, Object> all = new HashMap<>(Map.of("capacity", 64L << 20, "initialSize", 4L << 20, "growthIncrement", 4L << 20));
        all.putAll(values);
        return CpuDeviceConfigs.of(all);
    }
}
