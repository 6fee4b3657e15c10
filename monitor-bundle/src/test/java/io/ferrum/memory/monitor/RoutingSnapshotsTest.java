package io.ferrum.memory.monitor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.lang.ref.WeakReference;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.MemoryInfo;

/**
 * The per-thread routing snapshots: when they are reused, remade and emptied. Each test announces its
 * device map with {@code clear} first, as the monitor does on every device change.
 */
class RoutingSnapshotsTest {
    static final Device CPU1 = Device.cpu(1);
    static final Device CPU2 = Device.cpu(2);

    private final ObserverNotifier notifier = new ObserverNotifier(16, Map::of, new MonitorLog(null));
    private final PressureLevels levels = new PressureLevels(notifier);
    private final RoutingSnapshots snapshots = new RoutingSnapshots(levels);

    @AfterEach
    void stop() {
        notifier.stop();
    }

    /** A manager whose figures fail once {@code failing} is set. */
    static final class Flaky extends StubManager {
        volatile boolean failing;

        Flaky(Device device) {
            super(device, StubManager.poolSpace(9), true, 1000, 0);
        }

        @Override
        public MemoryInfo quickInfo() {
            if (failing) {
                throw new IllegalStateException("device lost");
            }
            return super.quickInfo();
        }
    }

    static Map<Device, DeviceMemoryManager> active(DeviceMemoryManager... managers) {
        Map<Device, DeviceMemoryManager> m = new TreeMap<>();
        for (DeviceMemoryManager x : managers) {
            m.put(x.device(), x);
        }
        return m;
    }

    @Test
    void aSnapshotServesRefreshCallsThenItsFiguresAreReadAgain() {
        StubManager one = new StubManager(CPU1, StubManager.poolSpace(1), true, 1000, 100);
        Map<Device, DeviceMemoryManager> active = active(one);
        snapshots.clear(active);

        RoutingSnapshots.Routing first = snapshots.current(active);
        assertEquals(List.of(CPU1), first.devices());
        assertEquals(100, first.infos().get(CPU1).usedBytes());
        assertSame(one, first.managerOf(CPU1));

        one.figures(1000, 500);
        for (int i = 1; i < RoutingSnapshots.REFRESH; i++) {
            assertSame(first, snapshots.current(active), "call " + i + " reuses the snapshot");
        }
        RoutingSnapshots.Routing refreshed = snapshots.current(active);
        assertNotSame(first, refreshed, "the call after REFRESH reads the figures again");
        assertEquals(500, refreshed.infos().get(CPU1).usedBytes());
        assertSame(first.devices(), refreshed.devices(), "only the figures were read again: same devices");
    }

    @Test
    void anotherDeviceMapOrAnInvalidationMakesANewSnapshot() {
        StubManager one = new StubManager(CPU1, StubManager.poolSpace(1), true, 1000, 0);
        StubManager two = new StubManager(CPU2, StubManager.poolSpace(2), true, 1000, 0);
        Map<Device, DeviceMemoryManager> before = active(one);
        snapshots.clear(before);
        RoutingSnapshots.Routing r = snapshots.current(before);

        Map<Device, DeviceMemoryManager> after = active(one, two);
        snapshots.clear(after);
        RoutingSnapshots.Routing r2 = snapshots.current(after);
        assertEquals(List.of(CPU1, CPU2), r2.devices());
        assertSame(two, r2.managerOf(CPU2));
        assertNull(r.managerOf(CPU2));

        snapshots.invalidate();
        assertNotSame(r2, snapshots.current(after), "an invalidated snapshot is made anew");
    }

    @Test
    void aDeviceThatStopsAnsweringIsLeftOutOfTheNextSnapshot() {
        StubManager one = new StubManager(CPU1, StubManager.poolSpace(1), true, 1000, 0);
        Flaky two = new Flaky(CPU2);
        Map<Device, DeviceMemoryManager> active = active(one, two);
        snapshots.clear(active);
        assertEquals(List.of(CPU1, CPU2), snapshots.current(active).devices());

        two.failing = true;
        snapshots.invalidate();

        assertEquals(List.of(CPU1), snapshots.current(active).devices());
    }

    @Test
    void aRemovedDevicesManagerIsNotReachableFromAnyThreadsSnapshotAfterTheChange() throws Exception {
        StubManager stays = new StubManager(CPU1, StubManager.poolSpace(1), true, 1000, 0);
        WeakReference<DeviceMemoryManager> gone = routeOnceThroughAnotherManager(stays, false);

        // The device change: cpu:2 went away, and nobody routes again.
        snapshots.clear(active(stays));

        assertCollected(gone, "a snapshot made before the change still holds the removed device's manager"
                + " (and, in a framework, its bundle's class loader)");
    }

    /**
     * The interleaving the emptying alone misses: a thread read the registry's map before the change
     * and stores its snapshot of that map after the slots were emptied.
     */
    @Test
    void aSnapshotOfTheOldDevicesStoredAfterTheChangeIsNotKept() throws Exception {
        StubManager stays = new StubManager(CPU1, StubManager.poolSpace(1), true, 1000, 0);
        WeakReference<DeviceMemoryManager> gone = routeOnceThroughAnotherManager(stays, true);

        assertCollected(gone, "a snapshot of the old devices, stored after the change, holds the removed"
                + " device's manager");
    }

    private static void assertCollected(WeakReference<?> ref, String message) throws InterruptedException {
        for (int i = 0; i < 50 && ref.get() != null; i++) {
            System.gc();
            Thread.sleep(10);
        }
        assertNull(ref.get(), message);
    }

    /**
     * Routes through cpu:2 once from this thread and once from a thread that then ends, as a thread that
     * routes once and never again does; returns a weak reference to cpu:2's manager, which nothing else
     * holds.
     *
     * @param changedFirst whether cpu:2 went away before the routing (which then stores its snapshot
     *                     of the map it read before the change) rather than after it
     */
    private WeakReference<DeviceMemoryManager> routeOnceThroughAnotherManager(StubManager stays, boolean changedFirst)
            throws Exception {
        StubManager leaving = new StubManager(CPU2, StubManager.poolSpace(2), true, 1000, 0);
        Map<Device, DeviceMemoryManager> active = active(stays, leaving);
        snapshots.clear(changedFirst ? active(stays) : active);
        assertSame(leaving, snapshots.current(active).managerOf(CPU2));
        Thread other = new Thread(() -> snapshots.install(active, snapshots.figures(active)));
        other.start();
        other.join();
        return new WeakReference<>(leaving);
    }
}
