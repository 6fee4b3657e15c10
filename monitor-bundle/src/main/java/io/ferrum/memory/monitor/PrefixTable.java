package io.ferrum.memory.monitor;

import java.util.Map;

import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.HandleSpace;

/**
 * An immutable map from handle space to manager, for the bounded spaces of one mask: a handle id is
 * looked up by its bits under that mask. Open addressing over primitive keys, so that routing a free
 * or a copy costs a few loads and no boxing.
 *
 * <p>Invariants: every key has bits only under {@link #spaceMask}; the table is at least twice as
 * large as its entries, so a probe always reaches an empty slot and {@link #get} ends. Two managers
 * never share a prefix ({@link HandleSpace}: bounded spaces of live managers do not overlap); were
 * they to, the later one in the map's order would never be found. Spaces of other masks are other
 * tables (see {@link DeviceRegistry}).
 */
final class PrefixTable {
    private final long spaceMask;
    /** The mask's lowest bit: prefixes differ only from there up, so the hash starts there. */
    private final int shift;
    private final long[] keys;
    private final DeviceMemoryManager[] values;
    private final int slots;
    private final int size;

    /**
     * @param spaceMask the mask every space of this table has
     * @param byPrefix  manager by space prefix (each with bits only under {@code spaceMask})
     */
    PrefixTable(long spaceMask, Map<Long, DeviceMemoryManager> byPrefix) {
        this.spaceMask = spaceMask;
        shift = new HandleSpace(0, spaceMask).shift();
        int n = Integer.highestOneBit(Math.max(4, byPrefix.size() * 4 - 1)) << 1;
        keys = new long[n];
        values = new DeviceMemoryManager[n];
        slots = n - 1;
        size = byPrefix.size();
        for (Map.Entry<Long, DeviceMemoryManager> e : byPrefix.entrySet()) {
            int i = index(e.getKey());
            while (values[i] != null) {
                i = (i + 1) & slots;
            }
            keys[i] = e.getKey();
            values[i] = e.getValue();
        }
    }

    /** @return the number of spaces in the table */
    int size() {
        return size;
    }

    private int index(long prefix) {
        // Fibonacci hashing of the prefix bits: consecutive manager numbers spread over the slots.
        return (int) (((prefix >>> shift) * 0x9E3779B97F4A7C15L) >>> 40) & slots;
    }

    /** @return the manager whose space contains {@code handleId}, or null */
    DeviceMemoryManager get(long handleId) {
        long prefix = handleId & spaceMask;
        for (int i = index(prefix); ; i = (i + 1) & slots) {
            DeviceMemoryManager v = values[i];
            if (v == null || keys[i] == prefix) {
                return v;
            }
        }
    }
}
