package io.ferrum.memory.monitor;

import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Consumer;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.api.MemoryRouter;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * Each bundle's view of the monitor, as {@link MonitorViews} hands it out: what a bundle registered
 * through its view is undone when the framework takes the view back ({@code ungetService}, on the
 * bundle stopping at the latest), and nothing of another bundle's.
 */
class MonitorViewTest {
    static final long MiB = 1 << 20;
    static final Device CPU1 = Device.cpu(1);
    static final Device CPU2 = Device.cpu(2);

    private final List<AutoCloseable> toClose = new ArrayList<>();
    private final MemoryMonitor mon = new MemoryMonitor(null, MonitorBuilder.config("", 0, 4), null);
    private final MonitorViews views = new MonitorViews(mon);

    @AfterEach
    void closeAll() throws Exception {
        mon.deactivate();
        for (AutoCloseable c : toClose) {
            c.close();
        }
    }

    PooledMemoryManager device(Device d) {
        MemoryPoolConfig pool = MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).build();
        PooledMemoryManager m = PooledMemoryManager.create(new ArenaUpstream(d, 256 * MiB, true),
                MemoryManagerConfig.defaults().withAutoGc(false, 0.85).withPoolConfig(MemoryType.GENERAL, pool),
                PoolSettings.defaults().withCapacity(8 * MiB), null);
        toClose.add(m);
        return m;
    }

    /** cpu:1's manager as a service, and a strategy that places everything on cpu:1. */
    PooledMemoryManager serviceOnCpu1() {
        PooledMemoryManager service = device(CPU1);
        mon.addManager(service, Map.of(DeviceMemoryManager.DEVICE_PROPERTY, "cpu:1", "service.id", 100L));
        mon.addStrategy(new MemoryMonitorTest.Fixed(CPU1), Map.of("service.id", 101L));
        return service;
    }

    @Test
    void releasingABundlesViewUndoesItsManagerByHandAndItsCallbackAndNothingOfAnothers() throws Exception {
        PooledMemoryManager service = serviceOnCpu1();
        MonitorView a = views.getService(null, null);
        MonitorView b = views.getService(null, null);
        PooledMemoryManager aByHand = device(CPU1);
        PooledMemoryManager bByHand = device(CPU2);
        a.registerManager(CPU1, aByHand);
        b.registerManager(CPU2, bByHand);
        Consumer<Map<Device, MemoryPressure>> aCallback = levels -> { };
        a.setGlobalPressureCallback(aCallback);
        assertSame(aByHand, b.manager(CPU1).orElseThrow(), "a manager by hand comes first");
        aByHand.close(); // its bundle stops: it closes its manager, then the framework takes the view back

        views.ungetService(null, null, a);

        assertSame(service, b.manager(CPU1).orElseThrow(), "cpu:1's service manager serves again");
        MemoryHandle h = b.allocate(1024, AllocationRequirements.defaults());
        assertTrue(service.handleInfo(h).isPresent(), "the block is the service manager's");
        b.deallocate(h);
        assertSame(bByHand, b.manager(CPU2).orElseThrow(), "the other bundle's manager by hand stays");
        assertNull(mon.globalPressureCallback(), "the released bundle's callback is gone");
    }

    @Test
    void releaseLeavesWhatAnotherBundleRegisteredSince() throws Exception {
        PooledMemoryManager service = serviceOnCpu1();
        MonitorView a = views.getService(null, null);
        MonitorView b = views.getService(null, null);
        a.registerManager(CPU1, device(CPU1));
        a.setGlobalPressureCallback(levels -> { });
        b.unregisterManager(CPU1);
        PooledMemoryManager bByHand = device(CPU1);
        b.registerManager(CPU1, bByHand);
        List<Map<Device, MemoryPressure>> heard = new CopyOnWriteArrayList<>();
        Consumer<Map<Device, MemoryPressure>> bCallback = heard::add;
        b.setGlobalPressureCallback(bCallback);

        views.ungetService(null, null, a);

        assertSame(bByHand, b.manager(CPU1).orElseThrow(), "b's manager by hand for the same device stays");
        assertSame(bCallback, mon.globalPressureCallback(), "b's callback, set after a's, stays");
        views.ungetService(null, null, b);
        assertSame(service, a.manager(CPU1).orElseThrow());
        assertNull(mon.globalPressureCallback());
    }

    @Test
    void aReleasedViewRefusesNewRegistrationsSoNoneOutlivesItsBundle() {
        serviceOnCpu1();
        MonitorView a = views.getService(null, null);
        views.ungetService(null, null, a);
        PooledMemoryManager late = device(CPU1);
        DeviceUnavailableException refused = assertThrows(DeviceUnavailableException.class,
                () -> a.registerManager(CPU1, late));
        assertTrue(refused.getMessage().contains("released its GlobalMemoryMonitor service"), refused.getMessage());
        assertThrows(DeviceUnavailableException.class, () -> a.setGlobalPressureCallback(levels -> { }));
        assertTrue(a.manager(CPU1).orElseThrow() != late, "the late manager was not registered");
        assertNull(mon.globalPressureCallback());
    }

    /** Every method of both services, default methods included, is the view's own: none is skipped. */
    @Test
    void theViewAnswersEveryMethodOfBothServicesItself() {
        for (Class<?> api : List.of(GlobalMemoryMonitor.class, MemoryRouter.class)) {
            for (Method m : api.getMethods()) {
                if (Modifier.isStatic(m.getModifiers())) {
                    continue;
                }
                try {
                    Method own = MonitorView.class.getDeclaredMethod(m.getName(), m.getParameterTypes());
                    assertTrue(Modifier.isPublic(own.getModifiers()), own.toString());
                } catch (NoSuchMethodException missing) {
                    fail("MonitorView does not override " + api.getSimpleName() + "." + m.getName()
                            + ": a bundle's view would skip the monitor (or answer the interface's default)");
                }
            }
        }
    }

    /** Every method reaches the one monitor: once it is stopped, each refuses as the monitor does. */
    @Test
    void everyMethodOfTheViewReachesTheMonitor() throws Exception {
        MonitorView a = views.getService(null, null);
        mon.deactivate();
        for (Class<?> api : List.of(GlobalMemoryMonitor.class, MemoryRouter.class)) {
            for (Method m : api.getMethods()) {
                if (Modifier.isStatic(m.getModifiers())) {
                    continue;
                }
                Object[] args = new Object[m.getParameterCount()];
                for (int i = 0; i < args.length; i++) {
                    Class<?> t = m.getParameterTypes()[i];
                    args[i] = t == long.class ? 1L : t == int.class ? 1 : t == boolean.class ? false : null;
                }
                try {
                    m.invoke(a, args);
                    fail(m.getName() + " answered although the monitor is stopped");
                } catch (InvocationTargetException e) {
                    DeviceUnavailableException refused = assertInstanceOf(DeviceUnavailableException.class,
                            e.getCause(), m.getName());
                    assertTrue(refused.getMessage().contains("is stopped"), m.getName() + ": " + refused.getMessage());
                }
            }
        }
    }
}
