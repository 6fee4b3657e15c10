package io.ferrum.memory.monitor;

import java.util.Map;

import io.ferrum.memory.api.DeviceMemoryManager;

/**
 * An immutable map from handle prefix (a pooled manager's number, the top 20 bits of its handle ids)
 * to the manager: open addressing over primitive keys, so that routing a free or a copy costs a few
 * loads and no boxing.
 */
final class PrefixTable {
    static final PrefixTable EMPTY = new PrefixTable(Map.of());

    private final long[] keys;
    private final DeviceMemoryManager[] values;
    private final int mask;

    PrefixTable(Map<Long, DeviceMemoryManager> byPrefix) {
        int n = Integer.highestOneBit(Math.max(4, byPrefix.size() * 4 - 1)) << 1;
        keys = new long[n];
        values = new DeviceMemoryManager[n];
        mask = n - 1;
        for (Map.Entry<Long, DeviceMemoryManager> e : byPrefix.entrySet()) {
            int i = index(e.getKey());
            while (values[i] != null) {
                i = (i + 1) & mask;
            }
            keys[i] = e.getKey();
            values[i] = e.getValue();
        }
    }

    private int index(long prefix) {
        return (int) (((prefix >>> 44) * 0x9E3779B97F4A7C15L) >>> 40) & mask;
    }

    /** @return the manager with this prefix, or null */
    DeviceMemoryManager get(long prefix) {
        for (int i = index(prefix); ; i = (i + 1) & mask) {
            DeviceMemoryManager v = values[i];
            if (v == null || keys[i] == prefix) {
                return v;
            }
        }
    }
}
