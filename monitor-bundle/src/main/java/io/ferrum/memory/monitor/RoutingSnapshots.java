package io.ferrum.memory.monitor;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.MemoryInfo;

/**
 * The devices and figures routed allocations decide on, one snapshot per thread: a routed
 * allocation reads its thread's snapshot instead of asking every manager for figures each time.
 *
 * <p>A snapshot is used for at most {@value #REFRESH} routed calls of its thread; then its figures are
 * read again ({@link DeviceMemoryManager#quickInfo()}, which derives the levels of managers that do not
 * report theirs). It is made anew when the devices change (another {@code active} map), after a failed
 * allocation ({@link #invalidate()}: the figures misled the strategy), and when a device stops
 * answering.
 *
 * <p>Layout: snapshots sit in an array by thread id, {@value #STRIDE} slots (64 bytes or more) apart,
 * so that two threads never write one cache line (docs/PERFORMANCE.md, item 6). Threads whose ids
 * collide share a slot, which is only slower. An array rather than a {@code ThreadLocal}, so that no
 * thread keeps this bundle's classes after it is stopped.
 *
 * <p>Invariant: after {@link #clear(Map)} (every device change) no slot keeps a snapshot of any other
 * device map than the one it was given, so a manager that went away, and with it its bundle's class
 * loader, is not reachable from a thread that routed through it once and never again (before, each
 * such thread kept the old revision alive until its next routed call). That includes a thread that
 * read the old map before the change and stores its snapshot after the slots were emptied: a store
 * is followed by a check of the current map, and both the stores and the emptying are volatile, so
 * either the emptying comes last or the storing thread sees the new map and empties its own slot.
 * Reads on the hot path are plain: a stale read only costs a refresh.
 */
final class RoutingSnapshots {
    /** Routed calls a snapshot's figures serve before they are read again. */
    static final int REFRESH = 64;
    private static final int SLOTS = 64;
    private static final int STRIDE = 16;

    /**
     * One thread's view: the devices offered to the strategy, their figures, and their managers in the
     * same order.
     *
     * @param active the registry's map this was made from; a different map means the devices changed
     * @param epoch  {@link #epoch} when made; a different one means it was invalidated
     */
    record Routing(Map<Device, DeviceMemoryManager> active, List<Device> devices, Map<Device, MemoryInfo> infos,
                   DeviceMemoryManager[] managers, int epoch) {

        /** @return the manager of {@code d} if it is one of the devices offered, else null */
        DeviceMemoryManager managerOf(Device d) {
            // Identity first: strategies hand back one of the Device instances they were given.
            for (int i = 0; i < managers.length; i++) {
                if (devices.get(i) == d) {
                    return managers[i];
                }
            }
            int i = devices.indexOf(d);
            return i < 0 ? null : managers[i];
        }
    }

    private static final VarHandle SLOT = MethodHandles.arrayElementVarHandle(Routing[].class);

    private final Routing[] routing = new Routing[SLOTS * STRIDE];
    /** Per slot of {@link #routing}: routed calls left before its figures are read again. */
    private final int[] calls = new int[SLOTS * STRIDE];
    private final PressureLevels levels;
    private volatile int epoch;
    /** The registry's device map as of the last {@link #clear(Map)}; snapshots of another map are not kept. */
    private volatile Map<Device, DeviceMemoryManager> devices = Map.of();

    RoutingSnapshots(PressureLevels levels) {
        this.levels = levels;
    }

    private static int slot() {
        return (int) (Thread.currentThread().threadId() & (SLOTS - 1)) * STRIDE;
    }

    /** Makes every thread's snapshot stale (after a failed allocation). */
    void invalidate() {
        epoch++;
    }

    /**
     * Empties every slot; on every device change.
     *
     * @param now the registry's device map after the change
     */
    void clear(Map<Device, DeviceMemoryManager> now) {
        devices = now;
        epoch++;
        for (int i = 0; i < routing.length; i += STRIDE) {
            SLOT.setVolatile(routing, i, (Routing) null);
        }
    }

    /** Stores the calling thread's snapshot, unless its devices are no longer the registry's (see the class Javadoc). */
    private void store(int slot, Routing r) {
        SLOT.setVolatile(routing, slot, r);
        if (r.active() != devices) {
            SLOT.setVolatile(routing, slot, (Routing) null);
        }
    }

    /** @return the calling thread's snapshot for {@code active}, made anew when stale and every {@value #REFRESH} calls */
    Routing current(Map<Device, DeviceMemoryManager> active) {
        int slot = slot();
        Routing r = routing[slot];
        int left = calls[slot] - 1;
        if (r == null || r.active() != active || r.epoch() != epoch || left < 0) {
            return refresh(slot, active);
        }
        calls[slot] = left;
        return r;
    }

    /**
     * Makes the snapshot of {@code slot} anew (a method of its own, so that {@link #current} inlines):
     * when only its count ran out, with the same devices and new figures of each (item 13).
     */
    private Routing refresh(int slot, Map<Device, DeviceMemoryManager> active) {
        Routing old = routing[slot];
        int e = epoch;
        Routing r = old != null && old.active() == active && old.epoch() == e ? withNewFigures(old) : null;
        if (r == null) {
            r = of(active, figures(active), e);
        }
        store(slot, r);
        calls[slot] = REFRESH - 1;
        return r;
    }

    /** Installs the fresh figures a full routing pass read, as the calling thread's snapshot. */
    void install(Map<Device, DeviceMemoryManager> active, Map<Device, MemoryInfo> infos) {
        int slot = slot();
        store(slot, of(active, new LinkedHashMap<>(infos), epoch));
        calls[slot] = REFRESH;
    }

    private static Routing of(Map<Device, DeviceMemoryManager> active, Map<Device, MemoryInfo> infos, int epoch) {
        return new Routing(active, List.copyOf(infos.keySet()), Map.copyOf(infos),
                infos.keySet().stream().map(active::get).toArray(DeviceMemoryManager[]::new), epoch);
    }

    /**
     * @return the same devices with their figures read again; null if a device no longer answers (then
     *         the snapshot is made anew, without it)
     */
    private Routing withNewFigures(Routing r) {
        DeviceMemoryManager[] managers = r.managers();
        List<Device> devices = r.devices();
        if (managers.length == 1) {
            // One device: Map.of, whose get is one equals; a hashed map would hash the Device record on
            // every strategy call (item 16).
            MemoryInfo info = quickInfo(devices.get(0), managers[0]);
            return info == null ? null : new Routing(r.active(), devices, Map.of(devices.get(0), info), managers, r.epoch());
        }
        Map<Device, MemoryInfo> fresh = new HashMap<>(managers.length * 2);
        for (int i = 0; i < managers.length; i++) {
            MemoryInfo info = quickInfo(devices.get(i), managers[i]);
            if (info == null) {
                return null;
            }
            fresh.put(devices.get(i), info);
        }
        return new Routing(r.active(), devices, Collections.unmodifiableMap(fresh), managers, r.epoch());
    }

    /** @return the cheap figures of every device that answers, in device order */
    Map<Device, MemoryInfo> figures(Map<Device, DeviceMemoryManager> active) {
        Map<Device, MemoryInfo> infos = new LinkedHashMap<>();
        for (Map.Entry<Device, DeviceMemoryManager> e : active.entrySet()) {
            MemoryInfo info = quickInfo(e.getKey(), e.getValue());
            if (info != null) {
                infos.put(e.getKey(), info);
            }
        }
        return infos;
    }

    /** @return the manager's cheap figures, or null if it fails to answer; derives its level on the way */
    private MemoryInfo quickInfo(Device d, DeviceMemoryManager m) {
        MemoryInfo info;
        long reading = levels.readingFor(d, m); // before the figures: a sample read earlier and derived later loses
        try {
            info = m.quickInfo();
        } catch (VirtualMachineError fatal) {
            throw fatal;
        } catch (Throwable e) {
            return null;
        }
        if (info != null) {
            levels.derive(d, m, info, reading);
        }
        return info;
    }
}
