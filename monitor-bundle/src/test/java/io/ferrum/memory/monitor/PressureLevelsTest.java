package io.ferrum.memory.monitor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Proxy;
import java.util.Map;
import java.util.OptionalDouble;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryObserver;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * Pressure levels: reported by managers that accept an observer, derived from figures for the others,
 * and each change told once.
 */
class PressureLevelsTest {
    static final Device CPU1 = Device.cpu(1);

    /** The changes the notifier delivered, as "device OLD>NEW". */
    private final BlockingQueue<String> told = new LinkedBlockingQueue<>();
    private final ObserverNotifier notifier = new ObserverNotifier(64, Map::of, new MonitorLog(null));
    private final PressureLevels levels = new PressureLevels(notifier);

    @BeforeEach
    void listen() {
        notifier.add(new MemoryObserver() {
            @Override
            public void pressureChanged(Device device, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
                told.add(device + " " + previous + ">" + current);
            }
        }, null);
    }

    @AfterEach
    void stop() {
        notifier.stop();
    }

    static MemoryInfo used(long percent) {
        return new MemoryInfo(100, percent, 100 - percent, 100, 1, 0.0, OptionalDouble.empty());
    }

    /** @return the next change told, waiting for the notifier's lane (the wait bounds a hang, it measures nothing) */
    private String nextTold() throws InterruptedException {
        String s = told.poll(30, TimeUnit.SECONDS);
        assertNotNull(s, "no change was told");
        return s;
    }

    private int markers;

    /** Tells a marker after everything queued before it, so that "nothing more was told" can be asserted. */
    private void assertNothingMoreTold() throws InterruptedException {
        // A device of its own each time: an observer hears no change that leaves the level it heard.
        Device marker = Device.cpu(100 + markers++);
        notifier.pressureChanged(marker, MemoryPressure.LOW, MemoryPressure.MEDIUM, null);
        assertEquals(marker + " LOW>MEDIUM", nextTold(), "a change was told that should not have been");
    }

    @Test
    void aManagerThatDeclinesObserversHasItsLevelDerivedFromFiguresEachChangeToldOnce() throws Exception {
        StubManager m = new StubManager(CPU1, StubManager.poolSpace(1), false, 100, 10);
        levels.subscribe(CPU1, m, m.memoryInfo());
        assertEquals(Map.of(CPU1, MemoryPressure.LOW), levels.snapshot());

        levels.derive(CPU1, m, used(50));
        levels.derive(CPU1, m, used(90));
        levels.derive(CPU1, m, used(92));
        levels.derive(CPU1, m, used(96));
        levels.derive(CPU1, m, used(20));

        assertEquals("cpu:1 LOW>HIGH", nextTold());
        assertEquals("cpu:1 HIGH>CRITICAL", nextTold());
        assertEquals("cpu:1 CRITICAL>LOW", nextTold());
        assertNothingMoreTold();
        assertEquals(Map.of(CPU1, MemoryPressure.LOW), levels.snapshot());
    }

    @Test
    void aReportingManagerTellsItsOwnChangesAndItsFiguresDeriveNothing() throws Exception {
        StubManager m = new StubManager(CPU1, StubManager.poolSpace(1), true, 100, 10);
        levels.subscribe(CPU1, m, m.memoryInfo());
        assertNotNull(m.observer, "the monitor's observer was accepted");

        levels.derive(CPU1, m, used(99));
        assertEquals(Map.of(CPU1, MemoryPressure.LOW), levels.snapshot(), "figures of a reporting manager derive nothing");

        m.observer.pressureChanged(CPU1, MemoryPressure.LOW, MemoryPressure.MEDIUM, used(75));
        assertEquals("cpu:1 LOW>MEDIUM", nextTold());
        assertEquals(Map.of(CPU1, MemoryPressure.MEDIUM), levels.snapshot());
        assertNothingMoreTold();

        levels.unsubscribe(CPU1, m);
        assertNull(m.observer, "unsubscribing removes the observer from the manager");
    }

    /**
     * A reporting manager may tell a change as soon as it has the monitor's observer, before the
     * subscription is done: the level it tells is newer than the figures the device came with. Those
     * figures set the starting level after the observer was added, so they overwrote the change, and
     * the monitor (the global callback's map) kept LOW for a device the manager had reported HIGH,
     * until the manager's next change. Forced: the first moment the real pool manager has the
     * observer, another thread takes it to HIGH (its tell reaches the monitor), and only then does
     * the subscription go on.
     */
    @Test
    void aChangeToldWhileSubscribingIsNotOverwrittenByTheFiguresTheDeviceCameWith() throws Exception {
        long mib = 1 << 20;
        PooledMemoryManager real = PooledMemoryManager.create(new ArenaUpstream(CPU1, 8 * mib, true),
                MemoryManagerConfig.defaults().withAutoGc(false, 0.85), PoolSettings.defaults(), null);
        try {
            MemoryInfo came = real.memoryInfo();
            assertEquals(MemoryPressure.LOW, came.pressureLevel());
            DeviceMemoryManager seen = (DeviceMemoryManager) Proxy.newProxyInstance(getClass().getClassLoader(),
                    new Class<?>[] {DeviceMemoryManager.class}, (proxy, method, args) -> {
                        Object result = method.invoke(real, args);
                        if (method.getName().equals("addPressureObserver")) {
                            Thread other = new Thread(() -> real.allocate(7 * mib, CPU1), "allocates-to-HIGH");
                            other.start();
                            other.join();
                        }
                        return result;
                    });
            levels.subscribe(CPU1, seen, came);

            assertEquals("cpu:1 LOW>HIGH", nextTold());
            assertEquals(MemoryPressure.HIGH, real.memoryInfo().pressureLevel());
            assertEquals(Map.of(CPU1, MemoryPressure.HIGH), levels.snapshot(), "the level the manager reported last");
        } finally {
            real.close();
        }
    }

    /**
     * The other side of that window: a reporting manager that changes level after the monitor read
     * the figures the device came with, but before it has the monitor's observer, tells nobody, and
     * tells nothing more until its next change (edge-triggered). The monitor kept the level of those
     * figures, LOW for a device at HIGH, for as long as the device stayed there. Forced: the real
     * pool manager is taken to HIGH by another thread just before the observer is added.
     */
    @Test
    void aChangeMadeJustBeforeTheObserverIsAddedIsNotMissed() throws Exception {
        long mib = 1 << 20;
        PooledMemoryManager real = PooledMemoryManager.create(new ArenaUpstream(CPU1, 8 * mib, true),
                MemoryManagerConfig.defaults().withAutoGc(false, 0.85), PoolSettings.defaults(), null);
        try {
            MemoryInfo came = real.memoryInfo();
            DeviceMemoryManager seen = (DeviceMemoryManager) Proxy.newProxyInstance(getClass().getClassLoader(),
                    new Class<?>[] {DeviceMemoryManager.class}, (proxy, method, args) -> {
                        if (method.getName().equals("addPressureObserver")) {
                            Thread other = new Thread(() -> real.allocate(7 * mib, CPU1), "allocates-to-HIGH");
                            other.start();
                            other.join();
                        }
                        return method.invoke(real, args);
                    });
            levels.subscribe(CPU1, seen, came);

            assertEquals("cpu:1 LOW>HIGH", nextTold());
            assertEquals(Map.of(CPU1, MemoryPressure.HIGH), levels.snapshot(), "the level the device is at");
            assertNothingMoreTold();
        } finally {
            real.close();
        }
    }

    /**
     * A reporting manager tells each change from its own last level, which the monitor need not
     * have heard: one that went to HIGH just before it had the monitor's observer (told to no one)
     * and back to LOW just after told the monitor HIGH>LOW, and observers heard a change from a level
     * they were never told (the device was LOW for them throughout). The monitor now tells each
     * change from the level it holds, and nothing when it holds the level told already. Forced: the
     * real pool manager is taken to HIGH just before the observer is added and back just after.
     */
    @Test
    void aChangeIsToldFromTheLevelTheMonitorHeldNotFromOneItNeverHeard() throws Exception {
        long mib = 1 << 20;
        PooledMemoryManager real = PooledMemoryManager.create(new ArenaUpstream(CPU1, 8 * mib, true),
                MemoryManagerConfig.defaults().withAutoGc(false, 0.85), PoolSettings.defaults(), null);
        try {
            MemoryInfo came = real.memoryInfo();
            DeviceMemoryManager seen = (DeviceMemoryManager) Proxy.newProxyInstance(getClass().getClassLoader(),
                    new Class<?>[] {DeviceMemoryManager.class}, (proxy, method, args) -> {
                        if (!method.getName().equals("addPressureObserver")) {
                            return method.invoke(real, args);
                        }
                        io.ferrum.memory.api.MemoryHandle[] big = new io.ferrum.memory.api.MemoryHandle[1];
                        Thread up = new Thread(() -> big[0] = real.allocate(7 * mib, CPU1), "allocates-to-HIGH");
                        up.start();
                        up.join();
                        Object result = method.invoke(real, args);
                        Thread down = new Thread(() -> real.deallocate(big[0]), "frees-to-LOW");
                        down.start();
                        down.join();
                        return result;
                    });
            levels.subscribe(CPU1, seen, came);

            assertNothingMoreTold();
            assertEquals(Map.of(CPU1, MemoryPressure.LOW), levels.snapshot(), "the level the device is at");
        } finally {
            real.close();
        }
    }

    /**
     * A derived level follows the newest figures read, not the last ones to arrive: the sampler read a
     * device's full figures (HIGH) and, before it derived from them, a routing refresh read its cheap
     * figures (LOW, the device had freed meanwhile) and derived from those. The sampler then derived
     * HIGH from its older figures: observers heard LOW>HIGH and the level stayed HIGH for a device at
     * 20 %, until the next sample (5 s by default; never with sampling off). Forced: the manager's
     * memoryInfo is paused after it read its figures.
     */
    @Test
    void aDerivedLevelIsNeverSetFromFiguresOlderThanTheLastOnesDerived() throws Exception {
        CountDownLatch inside = new CountDownLatch(1);
        CountDownLatch go = new CountDownLatch(1);
        AtomicBoolean pause = new AtomicBoolean();
        StubManager m = new StubManager(CPU1, StubManager.poolSpace(1), false, 100, 10) {
            @Override
            public MemoryInfo memoryInfo(Device d) {
                MemoryInfo read = info; // the figures of this reading
                if (pause.compareAndSet(true, false)) {
                    inside.countDown();
                    try {
                        assertTrue(go.await(30, TimeUnit.SECONDS));
                    } catch (InterruptedException e) {
                        throw new AssertionError(e);
                    }
                }
                return read;
            }
        };
        DeviceRegistry registry = new DeviceRegistry();
        registry.add(new DeviceRegistry.Entry(CPU1, m, m.space, 0, 1, false));
        levels.subscribe(CPU1, m, m.memoryInfo());
        DeviceSampler sampler = new DeviceSampler(registry, levels, notifier, new MonitorLog(null));
        try {
            m.figures(100, 90);
            pause.set(true);
            Thread sampling = new Thread(sampler::sample, "sampler");
            sampling.start();
            assertTrue(inside.await(30, TimeUnit.SECONDS), "the sample read the device");
            m.figures(100, 20); // the device frees; a routing refresh reads its figures and derives
            new RoutingSnapshots(levels).figures(registry.active());
            go.countDown();
            sampling.join(TimeUnit.SECONDS.toMillis(30));
            assertNothingMoreTold();
            assertEquals(Map.of(CPU1, MemoryPressure.LOW), levels.snapshot(), "the level of the newest figures");
        } finally {
            go.countDown();
            sampler.stop();
        }
    }

    /**
     * A derivation that read a device's source just before the device went derived from its figures
     * after the monitor forgot the device: finding no level, it took the figures for the device's
     * first and put its level back, so the global callback's levels kept a departed device (at HIGH,
     * say) for good. Forced: the test holds the source's lock while the device is removed.
     */
    @Test
    void aDerivationUnderWayWhenTheDeviceGoesLeavesNoLevelBehind() throws Exception {
        StubManager m = new StubManager(CPU1, StubManager.poolSpace(1), false, 100, 10);
        levels.subscribe(CPU1, m, m.memoryInfo());
        Object source = ((Map<?, ?>) field("derived").get(levels)).get(CPU1);
        Thread deriving;
        synchronized (source) {
            deriving = new Thread(() -> levels.derive(CPU1, m, used(90)), "derives");
            deriving.start();
            awaitBlocked(deriving);
            levels.unsubscribe(CPU1, m);
            levels.forget(CPU1);
        }
        deriving.join(TimeUnit.SECONDS.toMillis(30));
        assertEquals(Map.of(), levels.snapshot(), "a departed device keeps no level");
        assertNothingMoreTold();
    }

    /**
     * A reporting manager's tell under way when the device went: it had found its follower on, the
     * device was then removed (follower off, level forgotten), and the tell put the departed device's
     * level back and told observers a change of a device gone. Forced: the tell is held just after it
     * found the follower on ({@code PressureLevels.tellingForTests}).
     */
    @Test
    void aReportedTellUnderWayWhenTheDeviceGoesLeavesNoLevelBehind() throws Exception {
        StubManager m = new StubManager(CPU1, StubManager.poolSpace(1), true, 100, 10);
        levels.subscribe(CPU1, m, m.memoryInfo());
        MemoryObserver follower = m.observer;
        CountDownLatch inside = new CountDownLatch(1);
        CountDownLatch go = new CountDownLatch(1);
        PressureLevels.tellingForTests = () -> {
            inside.countDown();
            try {
                assertTrue(go.await(30, TimeUnit.SECONDS));
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        };
        Thread removing = new Thread(() -> {
            levels.unsubscribe(CPU1, m);
            levels.forget(CPU1);
        }, "removes");
        try {
            Thread telling = new Thread(() -> follower.pressureChanged(CPU1, MemoryPressure.LOW, MemoryPressure.HIGH, used(90)),
                    "tells");
            telling.start();
            assertTrue(inside.await(30, TimeUnit.SECONDS), "the tell found its follower on");
            removing.start();
            awaitBlockedOrDone(removing);
            go.countDown();
            telling.join(TimeUnit.SECONDS.toMillis(30));
            removing.join(TimeUnit.SECONDS.toMillis(30));
        } finally {
            PressureLevels.tellingForTests = null;
            go.countDown();
        }
        assertEquals(Map.of(), levels.snapshot(), "a departed device keeps no level");
    }

    private static java.lang.reflect.Field field(String name) throws NoSuchFieldException {
        java.lang.reflect.Field f = PressureLevels.class.getDeclaredField(name);
        f.setAccessible(true);
        return f;
    }

    /** Waits (at most 30 s) until {@code t} is blocked on a monitor. */
    private static void awaitBlocked(Thread t) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (t.getState() != Thread.State.BLOCKED) {
            assertTrue(System.nanoTime() < end, t.getName() + " never blocked: " + t.getState());
            Thread.sleep(1);
        }
    }

    /** Waits (at most 30 s) until {@code t} is blocked on a monitor or has ended. */
    private static void awaitBlockedOrDone(Thread t) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (t.getState() != Thread.State.BLOCKED && t.getState() != Thread.State.TERMINATED) {
            assertTrue(System.nanoTime() < end, t.getName() + " neither blocked nor ended: " + t.getState());
            Thread.sleep(1);
        }
    }

    @Test
    void figuresOfAnotherManagerOfTheDeviceDeriveNothing() throws Exception {
        StubManager serving = new StubManager(CPU1, StubManager.poolSpace(1), false, 100, 10);
        StubManager other = new StubManager(CPU1, StubManager.poolSpace(2), false, 100, 10);
        levels.subscribe(CPU1, serving, serving.memoryInfo());

        levels.derive(CPU1, other, used(99));

        assertEquals(Map.of(CPU1, MemoryPressure.LOW), levels.snapshot());
        assertNothingMoreTold();
    }

    @Test
    void aManagerThatFailsToTakeAnObserverIsDerived() throws Exception {
        StubManager failing = new StubManager(CPU1, StubManager.poolSpace(1), true, 100, 10) {
            @Override
            public boolean addPressureObserver(MemoryObserver o) {
                throw new IllegalStateException("broken plugin");
            }
        };
        levels.subscribe(CPU1, failing, failing.memoryInfo());

        levels.derive(CPU1, failing, used(90));

        assertEquals("cpu:1 LOW>HIGH", nextTold());
    }

    @Test
    void aForgottenDeviceHasNoLevelAndItsFiguresDeriveNothing() throws Exception {
        StubManager m = new StubManager(CPU1, StubManager.poolSpace(1), false, 100, 10);
        levels.subscribe(CPU1, m, m.memoryInfo());
        levels.unsubscribe(CPU1, m);
        levels.forget(CPU1);

        levels.derive(CPU1, m, used(90));

        assertTrue(levels.snapshot().isEmpty());
        assertNothingMoreTold();
    }

    @Test
    void theFirstLevelOfADeviceWithoutFiguresIsSetWithoutAChange() throws Exception {
        StubManager m = new StubManager(CPU1, StubManager.poolSpace(1), false, 100, 10);
        levels.subscribe(CPU1, m, null);
        assertTrue(levels.snapshot().isEmpty(), "no figures when it came: no level yet");

        levels.derive(CPU1, m, used(90));

        assertEquals(Map.of(CPU1, MemoryPressure.HIGH), levels.snapshot());
        assertNothingMoreTold();
    }
}
