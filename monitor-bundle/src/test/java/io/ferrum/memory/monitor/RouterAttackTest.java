package io.ferrum.memory.monitor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.AllocationStrategy;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryObserver;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * An attack on the router, the device registry and the notifications around them (a router review):
 * each test failed before its fix; races are forced with a manager that pauses at a chosen call.
 */
class RouterAttackTest {
    static final long MiB = 1 << 20;
    static final Device CPU1 = Device.cpu(1);
    static final Device CPU2 = Device.cpu(2);

    private final List<AutoCloseable> toClose = new ArrayList<>();
    private long nextServiceId = 100;

    @AfterEach
    void closeAll() throws Exception {
        for (AutoCloseable c : toClose.reversed()) {
            c.close();
        }
    }

    private MemoryMonitor monitor() {
        MemoryMonitor m = new MemoryMonitor(null, MonitorBuilder.config("", 0, 4), null);
        toClose.add(m::deactivate);
        return m;
    }

    private PooledMemoryManager device(Device d, long capacity, MemoryPoolConfig general) {
        PooledMemoryManager m = PooledMemoryManager.create(new ArenaUpstream(d, 256 * MiB, true),
                MemoryManagerConfig.defaults().withAutoGc(false, 0.85).withPoolConfig(MemoryType.GENERAL, general),
                PoolSettings.defaults().withCapacity(capacity), null);
        toClose.add(m);
        return m;
    }

    private Map<String, Object> props(Device d) {
        return Map.of(DeviceMemoryManager.DEVICE_PROPERTY, d.toString(), "service.ranking", 0,
                "service.id", nextServiceId++);
    }

    private Map<String, Object> props(Device d, int ranking, long serviceId) {
        return Map.of(DeviceMemoryManager.DEVICE_PROPERTY, d.toString(), "service.ranking", ranking,
                "service.id", serviceId);
    }

    static void await(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for " + what);
            }
            Thread.sleep(5);
        }
    }

    /** Waits until {@code t} has ended or is parked (on a lock or a latch). */
    static void awaitParkedOrDone(Thread t) throws InterruptedException {
        await(() -> t.getState() == Thread.State.TERMINATED || t.getState() == Thread.State.BLOCKED
                || t.getState() == Thread.State.WAITING, t.getName() + " parked or done");
    }

    /** A stub whose next {@code memoryInfo()} (the monitor asks it as the manager starts serving) pauses. */
    static final class PausingManager extends StubManager {
        final CountDownLatch entered = new CountDownLatch(1);
        final CountDownLatch release = new CountDownLatch(1);
        volatile boolean pauseNext;

        PausingManager(Device device, long number) {
            this(device, number, true, 0);
        }

        PausingManager(Device device, long number, boolean reports, long used) {
            super(device, poolSpace(number), reports, 8 * MiB, used);
        }

        @Override
        public MemoryInfo memoryInfo(Device d) {
            if (pauseNext) {
                pauseNext = false;
                entered.countDown();
                try {
                    release.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            return super.memoryInfo(d);
        }
    }

    /** Records what it hears, as "added cpu:1", "removed cpu:1", "pressure cpu:1 HIGH". */
    static final class Recorder implements MemoryObserver {
        final List<String> heard = new CopyOnWriteArrayList<>();

        @Override
        public void deviceAdded(Device device, MemoryInfo info) {
            heard.add("added " + device);
        }

        @Override
        public void deviceRemoved(Device device) {
            heard.add("removed " + device);
        }

        @Override
        public void pressureChanged(Device device, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
            heard.add("pressure " + device + " " + current);
        }
    }

    /** Picks the first device offered that has the room, in device order: cpu:1 before cpu:2. */
    static final class FirstFitting implements AllocationStrategy {
        @Override
        public Optional<Device> selectDevice(long size, AllocationRequirements r, List<Device> available,
                                             Map<Device, MemoryInfo> info) {
            return available.stream().filter(d -> info.get(d) != null && info.get(d).freeBytes() >= size).findFirst();
        }

        @Override
        public String name() {
            return "first-fitting";
        }
    }

    /**
     * A device whose pool refuses a request by its own limits (its maxSize, its chunk size for an
     * alignment) cannot take that allocation, exactly as a full one cannot: the router leaves it out
     * and asks again. Before, the pool's InvalidMemoryRequestException ended the routed allocation,
     * and cpu:2, which had the room, was never tried.
     */
    @Test
    void aDeviceWhosePoolRefusesTheRequestIsLeftOutAndTheNextOneTried() {
        MemoryMonitor mon = monitor();
        PooledMemoryManager capped = device(CPU1, 64 * MiB,
                MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).maxSize(MiB).build());
        PooledMemoryManager open = device(CPU2, 16 * MiB,
                MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).build());
        mon.addManager(capped, props(CPU1));
        mon.addManager(open, props(CPU2));
        mon.addStrategy(new FirstFitting(), Map.of(AllocationStrategy.NAME_PROPERTY, "first-fitting"));

        MemoryHandle h = mon.allocate(2 * MiB, AllocationRequirements.defaults());
        assertEquals(Optional.of(CPU2), mon.owner(h), "cpu:1's GENERAL pool may hold 1 MiB at most; cpu:2 has the room");
        MemoryHandle again = mon.allocate(2 * MiB, AllocationRequirements.defaults());
        assertEquals(Optional.of(CPU2), mon.owner(again), "on fresh figures too (the second call's fast path)");

        // Refused by every device: the request's own error, naming each device's reason.
        InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class,
                () -> mon.allocate(64, AllocationRequirements.defaults().withAlignment(1L << 40)));
        assertTrue(e.getMessage().contains(CPU1.toString()) && e.getMessage().contains(CPU2.toString())
                && e.getMessage().contains("1099511627776"), e.getMessage());
    }
    /**
     * Two changes of one device whose follow-ups interleave: cpu:1's higher-ranking manager B arrives
     * (the monitor stops following A and asks B for its figures, which pauses), and B leaves again
     * meanwhile (A serves again and is followed). Before, B's arrival then finished after its
     * departure: the monitor followed B, gone, and kept its listener registered on it (B's later
     * levels counted as cpu:1's, and B kept the monitor reachable). Now changes of one device apply
     * one at a time, in the registry's order.
     */
    @Test
    void aManagerLeavingWhileItsArrivalIsFollowedUpIsNotFollowedAfterwards() throws Exception {
        MemoryMonitor mon = monitor();
        PausingManager a = new PausingManager(CPU1, 1);
        mon.addManager(a, props(CPU1, 0, 1));
        PausingManager b = new PausingManager(CPU1, 2);
        b.pauseNext = true;
        Map<String, Object> bProps = props(CPU1, 10, 2);
        Thread arrives = new Thread(() -> mon.addManager(b, bProps), "B arrives");
        arrives.start();
        assertTrue(b.entered.await(30, TimeUnit.SECONDS), "B's arrival asks B for its figures");
        Thread leaves = new Thread(() -> mon.removeManager(b, bProps), "B leaves");
        leaves.start();
        awaitParkedOrDone(leaves);
        b.release.countDown();
        arrives.join(30_000);
        leaves.join(30_000);

        assertSame(a, mon.manager(CPU1).orElseThrow(), "A serves cpu:1 again");
        assertNotNull(a.observer, "A, serving, reports cpu:1's levels to the monitor");
        assertNull(b.observer, "B, gone, keeps no listener of the monitor");
    }

    /**
     * The same by hand: a device registered while another thread unregisters it. Before, the observer
     * heard "removed cpu:1" and then "added cpu:1" (and the monitor followed the manager's levels)
     * although the device was gone.
     */
    @Test
    void aDeviceUnregisteredWhileItsRegistrationIsFollowedUpIsHeardAddedThenRemoved() throws Exception {
        MemoryMonitor mon = monitor();
        Recorder observer = new Recorder();
        mon.addObserver(observer, Map.of());
        PausingManager m = new PausingManager(CPU1, 1);
        m.pauseNext = true;
        Thread registers = new Thread(() -> mon.registerManager(CPU1, m), "registers");
        registers.start();
        assertTrue(m.entered.await(30, TimeUnit.SECONDS), "the registration asks the manager for its figures");
        Thread unregisters = new Thread(() -> mon.unregisterManager(CPU1), "unregisters");
        unregisters.start();
        awaitParkedOrDone(unregisters);
        m.release.countDown();
        registers.join(30_000);
        unregisters.join(30_000);

        assertEquals(Set.of(), mon.devices());
        await(() -> observer.heard.size() >= 2, "two notifications");
        assertEquals(List.of("added cpu:1", "removed cpu:1"), observer.heard);
        assertNull(m.observer, "the monitor follows no manager of a device that is gone");
    }

    /**
     * A manager tells a level change it began before it was removed (a pooled manager's tell runs over
     * a copy of its observers, so removing one does not wait for a tell in progress). Before, the
     * late tell put the departed device back among the levels: the global callback and the observers
     * heard of cpu:1 after it was removed.
     */
    @Test
    void aLevelToldByAManagerAfterItWasRemovedReachesNobody() throws Exception {
        MemoryMonitor mon = monitor();
        Recorder observer = new Recorder();
        mon.addObserver(observer, Map.of());
        List<Map<Device, MemoryPressure>> global = new CopyOnWriteArrayList<>();
        mon.setGlobalPressureCallback(global::add);
        StubManager gone = new StubManager(CPU1, StubManager.poolSpace(1), true, 8 * MiB, 0);
        StubManager stays = new StubManager(CPU2, StubManager.poolSpace(2), true, 8 * MiB, 0);
        mon.addManager(gone, props(CPU1, 0, 1));
        mon.addManager(stays, props(CPU2, 0, 2));
        MemoryObserver lateTeller = gone.observer;
        mon.removeManager(gone, props(CPU1, 0, 1));

        lateTeller.pressureChanged(CPU1, MemoryPressure.LOW, MemoryPressure.HIGH, gone.info);
        stays.observer.pressureChanged(CPU2, MemoryPressure.LOW, MemoryPressure.MEDIUM, stays.info);
        await(() -> observer.heard.contains("pressure cpu:2 MEDIUM") && !global.isEmpty(), "cpu:2's change told");

        assertEquals(List.of("added cpu:1", "added cpu:2", "removed cpu:1", "pressure cpu:2 MEDIUM"), observer.heard);
        assertEquals(List.of(Map.of(CPU2, MemoryPressure.MEDIUM)), global, "the levels of the devices present");
    }
    /**
     * An observer registered while a device leaves: its catch-up (each existing device told as added)
     * asks the device's manager for its figures, which pauses, and the device leaves meanwhile.
     * Before, the observer heard "removed cpu:1" (it was already on the list) and then the catch-up's
     * "added cpu:1": it believed in a device that was gone. Now the catch-up tells a device under that
     * device's lock, only if it is still there and the observer was not told of it yet.
     */
    @Test
    void anObserverRegisteredWhileADeviceLeavesNeverHearsItAddedAfterItsRemoval() throws Exception {
        MemoryMonitor mon = monitor();
        PausingManager m = new PausingManager(CPU1, 1);
        Map<String, Object> mProps = props(CPU1, 0, 1);
        mon.addManager(m, mProps);
        m.pauseNext = true;
        Recorder observer = new Recorder();
        Thread registers = new Thread(() -> mon.addObserver(observer, Map.of()), "observer arrives");
        registers.start();
        assertTrue(m.entered.await(30, TimeUnit.SECONDS), "the catch-up asks cpu:1 for its figures");
        Thread leaves = new Thread(() -> mon.removeManager(m, mProps), "cpu:1 leaves");
        leaves.start();
        awaitParkedOrDone(leaves);
        m.release.countDown();
        registers.join(30_000);
        leaves.join(30_000);

        // Then a device that stays, so that everything queued for the observer before it has run.
        StubManager stays = new StubManager(CPU2, StubManager.poolSpace(2), true, 8 * MiB, 0);
        mon.addManager(stays, props(CPU2, 0, 2));
        await(() -> observer.heard.contains("added cpu:2"), "cpu:2 told");
        List<String> aboutCpu1 = observer.heard.stream().filter(e -> e.endsWith("cpu:1")).toList();
        assertTrue(aboutCpu1.isEmpty() || aboutCpu1.equals(List.of("added cpu:1", "removed cpu:1")),
                "heard of cpu:1: " + aboutCpu1);
    }
    /**
     * A periodic sample read cpu:1's figures from A (paused in A's memoryInfo); B replaced A before the
     * sample went on. The sample then read the registry again and derived B's level from A's figures:
     * the observer heard "pressure cpu:1 CRITICAL" for B, which is empty. One sample now reads each
     * manager once, with the managers of one reading of the registry.
     */
    @Test
    void aSampleNeverDerivesAManagersLevelFromAnotherManagersFigures() throws Exception {
        MemoryMonitor mon = new MemoryMonitor(null, MonitorBuilder.config("", 10, 4), null);
        toClose.add(mon::deactivate);
        List<String> heard = new CopyOnWriteArrayList<>();
        PausingManager a = new PausingManager(CPU1, 1, false, 8 * MiB - MiB / 8);
        Map<String, Object> aProps = props(CPU1, 0, 1);
        mon.addManager(a, aProps);
        mon.addObserver(new MemoryObserver() {
            @Override
            public void pressureChanged(Device device, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
                heard.add("pressure " + device + " " + current);
            }

            @Override
            public void sample(Map<Device, MemoryInfo> info) {
                MemoryInfo cpu1 = info.get(CPU1);
                heard.add(cpu1 != null && cpu1.usedBytes() == 0 ? "sample of B" : "sample");
            }
        }, Map.of());
        a.pauseNext = true;
        assertTrue(a.entered.await(30, TimeUnit.SECONDS), "a sample asks A for its figures");
        mon.removeManager(a, aProps);
        StubManager b = new StubManager(CPU1, StubManager.poolSpace(2), false, 8 * MiB, 0);
        mon.addManager(b, props(CPU1, 0, 2));
        a.release.countDown();
        // A sample of B's figures: the sampler is one thread and an observer hears in order, so the
        // paused sample, and any level it derived, came before. (A "sample" could be an earlier one,
        // still on its way to the observer, and the check would run before the paused sample ended.)
        await(() -> heard.contains("sample of B"), "a sample after the paused one reaches the observer");
        assertEquals(List.of(), heard.stream().filter(h -> h.startsWith("pressure")).toList(),
                "B, empty, stays LOW: no level is derived for it from A's figures");
    }

    /**
     * A buggy manager declares the handle space of the manager already serving cpu:1. Before, the
     * registry put both in one prefix table, the later entry overwrote the first, and the first
     * owner's handles were routed to the impostor: a free of a live block failed. Now the impostor's
     * registration is refused with one logged error and the first owner keeps its handles.
     */
    @Test
    void aManagerWhoseHandleSpaceOverlapsAnotherOwnersIsRefusedAndTheFirstKeepsItsHandles() {
        List<String> errors = new CopyOnWriteArrayList<>();
        org.osgi.service.log.Logger logger = (org.osgi.service.log.Logger) java.lang.reflect.Proxy.newProxyInstance(
                org.osgi.service.log.Logger.class.getClassLoader(), new Class<?>[] {org.osgi.service.log.Logger.class},
                (proxy, method, args) -> {
                    if (method.getName().equals("error") && args != null) {
                        errors.add(String.valueOf(args[0]));
                    }
                    return method.getReturnType() == boolean.class ? false : null;
                });
        MemoryMonitor mon = new MemoryMonitor(null, MonitorBuilder.config("", 0, 4), logger);
        toClose.add(mon::deactivate);
        PooledMemoryManager first = device(CPU1, 64 * MiB,
                MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).build());
        mon.addManager(first, props(CPU1, 10, 1));
        MemoryHandle h = first.allocate(4096, CPU1);

        StubManager impostor = new StubManager(CPU1, first.handleSpace(), false, 8 * MiB, 0);
        mon.addManager(impostor, props(CPU1, 0, 2));
        assertSame(first, mon.manager(CPU1).orElseThrow());
        mon.deallocate(h);
        assertEquals(0, first.memoryInfo().usedBytes(), "the first owner freed its block");
        assertEquals(1, errors.size(), "one error logged: " + errors);
        assertTrue(errors.get(0).contains("overlaps") && errors.get(0).contains(Long.toHexString(first.handleSpace().prefix())),
                errors.get(0));
        mon.removeManager(impostor, props(CPU1, 0, 2));
        assertSame(first, mon.manager(CPU1).orElseThrow(), "removing the refused manager changes nothing");
        MemoryHandle h2 = first.allocate(4096, CPU1);
        mon.deallocate(h2);

        StubManager byHand = new StubManager(CPU2, first.handleSpace(), false, 8 * MiB, 0);
        InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class,
                () -> mon.registerManager(CPU2, byHand));
        assertTrue(e.getMessage().contains("overlaps"), e.getMessage());
        assertEquals(Set.of(CPU1), mon.devices());
    }
}
