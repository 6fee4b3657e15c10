package io.ferrum.memory.monitor;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * Which manager serves which device. Several managers may claim one device: a manager registered by
 * hand ({@code registerManager}) comes first, then the higher service ranking, then the older service
 * (lower service id). Readers see immutable snapshots; writers are serialised.
 */
final class DeviceRegistry {
    /** Handle ids carry their manager in the top 20 bits (see the pool engine's HandleTable). */
    static final long PREFIX_MASK = ~((1L << 44) - 1);
    private static final int DEPARTED_MEMORY = 1024;

    record Entry(Device device, DeviceMemoryManager manager, int ranking, long serviceId, boolean byHand) {
    }

    /** What an add or remove did to the device's active manager. */
    record Change(Device device, DeviceMemoryManager before, DeviceMemoryManager after) {
        boolean added() {
            return before == null && after != null;
        }

        boolean removed() {
            return before != null && after == null;
        }

        boolean replaced() {
            return before != null && after != null && before != after;
        }
    }

    private static final Comparator<Entry> PRECEDENCE = Comparator.<Entry>comparingInt(e -> e.byHand ? 0 : 1)
            .thenComparing(Comparator.comparingInt(Entry::ranking).reversed())
            .thenComparingLong(Entry::serviceId);

    private final Map<Device, List<Entry>> entries = new HashMap<>();
    private final Map<Long, Device> departed = new LinkedHashMap<>(16, 0.75f, false) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<Long, Device> eldest) {
            return size() > DEPARTED_MEMORY;
        }
    };
    private volatile Map<Device, DeviceMemoryManager> active = Map.of();
    private volatile PrefixTable byPrefix = PrefixTable.EMPTY;
    private volatile List<DeviceMemoryManager> unprefixed = List.of();

    synchronized Change add(Entry e) {
        DeviceMemoryManager before = active.get(e.device);
        List<Entry> list = entries.computeIfAbsent(e.device, d -> new ArrayList<>());
        list.add(e);
        list.sort(PRECEDENCE);
        if (e.manager instanceof PooledMemoryManager p) {
            departed.remove(p.handleSpace().prefix());
        }
        publish();
        return new Change(e.device, before, active.get(e.device));
    }

    /** Removes the entry of {@code manager} for {@code device} (a by-hand entry if {@code byHand}). */
    synchronized Change remove(Device device, DeviceMemoryManager manager, boolean byHand) {
        DeviceMemoryManager before = active.get(device);
        List<Entry> list = entries.get(device);
        if (list != null) {
            list.removeIf(e -> e.byHand == byHand && (manager == null || e.manager == manager));
            if (list.isEmpty()) {
                entries.remove(device);
            }
        }
        if (manager instanceof PooledMemoryManager p) {
            departed.put(p.handleSpace().prefix(), device);
        }
        publish();
        return new Change(device, before, active.get(device));
    }

    private void publish() {
        Map<Device, DeviceMemoryManager> a = new TreeMap<>();
        Map<Long, DeviceMemoryManager> prefixes = new HashMap<>();
        List<DeviceMemoryManager> others = new ArrayList<>();
        for (Map.Entry<Device, List<Entry>> e : entries.entrySet()) {
            a.put(e.getKey(), e.getValue().get(0).manager);
            for (Entry x : e.getValue()) {
                if (x.manager instanceof PooledMemoryManager p) {
                    prefixes.put(p.handleSpace().prefix(), p);
                } else {
                    others.add(x.manager);
                }
            }
        }
        active = java.util.Collections.unmodifiableMap(a);
        byPrefix = new PrefixTable(prefixes);
        unprefixed = List.copyOf(others);
    }

    /** @return the serving manager of every device, in device order */
    Map<Device, DeviceMemoryManager> active() {
        return active;
    }

    /** @return the manager that issued {@code handleId}, or null */
    DeviceMemoryManager ownerOf(long handleId, io.ferrum.memory.api.MemoryHandle handle) {
        DeviceMemoryManager m = byPrefix.get(handleId & PREFIX_MASK);
        return m != null ? m : askUnprefixed(handle);
    }

    /** @return the manager without a handle prefix that owns {@code handle}, or null (kept out of the hot lookup) */
    private DeviceMemoryManager askUnprefixed(io.ferrum.memory.api.MemoryHandle handle) {
        for (DeviceMemoryManager o : unprefixed) {
            if (o.owns(handle)) {
                return o;
            }
        }
        return null;
    }

    /** @return the device whose manager issued {@code handleId} and went away, or null */
    synchronized Device departedDevice(long handleId) {
        return departed.get(handleId & PREFIX_MASK);
    }

    /** @return the device a manager serves here, or null */
    Device deviceOf(DeviceMemoryManager manager) {
        for (Map.Entry<Device, DeviceMemoryManager> e : active.entrySet()) {
            if (e.getValue() == manager) {
                return e.getKey();
            }
        }
        return null;
    }
}
