package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Dictionary;
import java.util.List;
import java.util.Set;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.osgi.framework.BundleContext;
import org.osgi.framework.ServiceRegistration;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryManagerFactory;
import io.ferrum.memory.api.StreamManager;

/**
 * The registration helper against a recording {@link BundleContext}: which services it registers
 * under which names and properties, in which order, and how it withdraws them. (Surefire has no
 * framework; the container tests {@code CpuBackendIT} and {@code LifecycleUnderTrafficIT} run it in
 * Felix and Equinox.)
 */
class DeviceRegistrationTest {
    private static final Device CPU3 = Device.cpu(3);

    private final PooledMemoryManager manager = PooledMemoryManager.create(new ArenaUpstream(CPU3, 16 << 20, true),
            MemoryManagerConfig.defaults(), PoolSettings.defaults(), null);
    private final HostStreamManager streams = new HostStreamManager(CPU3);
    private final Recorder recorder = new Recorder();

    @AfterEach
    void close() {
        manager.close();
        streams.close();
    }

    /** What the fake framework saw, in order. */
    static final class Recorder {
        final List<String> events = Collections.synchronizedList(new ArrayList<>());
        final List<Dictionary<String, ?>> properties = new ArrayList<>();
        /** Registration number (1-based) whose registerService fails; 0 for none. */
        int failAt;
        /** Whether unregister answers as for a service the framework already withdrew. */
        boolean alreadyWithdrawn;

        BundleContext context() {
            return (BundleContext) Proxy.newProxyInstance(getClass().getClassLoader(), new Class<?>[] {BundleContext.class},
                    (proxy, method, args) -> {
                        if (!method.getName().equals("registerService") || !(args[0] instanceof String[] names)) {
                            throw new UnsupportedOperationException(method.toString());
                        }
                        String name = String.join("+", names);
                        if (properties.size() + 1 == failAt) {
                            throw new IllegalStateException("Invalid BundleContext (the bundle is stopping)");
                        }
                        @SuppressWarnings("unchecked")
                        Dictionary<String, ?> props = (Dictionary<String, ?>) args[2];
                        properties.add(props);
                        events.add("register " + name);
                        return registration(name);
                    });
        }

        private ServiceRegistration<?> registration(String name) {
            return (ServiceRegistration<?>) Proxy.newProxyInstance(getClass().getClassLoader(),
                    new Class<?>[] {ServiceRegistration.class}, (proxy, method, args) -> {
                        if (!method.getName().equals("unregister")) {
                            throw new UnsupportedOperationException(method.toString());
                        }
                        events.add("unregister " + name);
                        if (alreadyWithdrawn) {
                            throw new IllegalStateException("Service already unregistered");
                        }
                        return null;
                    });
        }
    }

    record Factory(Set<String> deviceKinds) implements MemoryManagerFactory {
        @Override
        public DeviceMemoryManager createMemoryManager(Device device, MemoryManagerConfig config) {
            throw new UnsupportedOperationException();
        }

        @Override
        public AdvancedMemoryManager createAdvancedMemoryManager(Device device, MemoryManagerConfig config) {
            throw new UnsupportedOperationException();
        }

        @Override
        public StreamManager createStreamManager(Device device) {
            throw new UnsupportedOperationException();
        }
    }

    private static final String STREAMS = StreamManager.class.getName();
    private static final String FACTORY = MemoryManagerFactory.class.getName();
    private static final String MANAGER = DeviceMemoryManager.class.getName() + "+" + AdvancedMemoryManager.class.getName();

    @Test
    void registersStreamsAndFactoryBeforeTheManagerWithTheDeviceProperties() {
        DeviceRegistration r = DeviceRegistration.of(manager).streams(streams).factory(new Factory(Set.of("cpu")))
                .property("service.description", "host memory cpu:3").register(recorder.context());

        assertEquals(List.of("register " + STREAMS, "register " + FACTORY, "register " + MANAGER), recorder.events);
        for (Dictionary<String, ?> p : recorder.properties) {
            assertEquals("cpu:3", p.get(DeviceMemoryManager.DEVICE_PROPERTY));
            assertEquals("cpu", p.get(DeviceMemoryManager.DEVICE_KIND_PROPERTY));
            assertEquals("test-arena", p.get(DeviceMemoryManager.BACKEND_PROPERTY));
            assertEquals("host memory cpu:3", p.get("service.description"));
            assertEquals(4, p.size());
        }
        assertTrue(r.isRegistered());
        assertEquals(CPU3, r.device());
    }

    @Test
    void everyServiceGetsItsOwnDictionary() {
        DeviceRegistration.of(manager).streams(streams).register(recorder.context());

        assertEquals(2, recorder.properties.size());
        assertFalse(recorder.properties.get(0) == recorder.properties.get(1),
                "a framework may keep the dictionary it is given; one per service");
    }

    @Test
    void unregisterWithdrawsTheManagerFirstAndOnlyOnce() {
        DeviceRegistration r = DeviceRegistration.of(manager).streams(streams).factory(new Factory(Set.of("cpu")))
                .register(recorder.context());
        recorder.events.clear();

        r.unregister();
        r.unregister();
        r.close();

        assertEquals(List.of("unregister " + MANAGER, "unregister " + FACTORY, "unregister " + STREAMS), recorder.events);
        assertFalse(r.isRegistered());
    }

    @Test
    void unregisterWhileTheBundleStopsSkipsWhatTheFrameworkAlreadyWithdrew() {
        DeviceRegistration r = DeviceRegistration.of(manager).streams(streams).register(recorder.context());
        recorder.events.clear();
        recorder.alreadyWithdrawn = true;

        r.unregister();

        assertEquals(List.of("unregister " + MANAGER, "unregister " + STREAMS), recorder.events);
        assertFalse(r.isRegistered());
    }

    @Test
    void aFailedRegistrationWithdrawsWhatItHadRegisteredAndThrows() {
        recorder.failAt = 3;
        BundleContext context = recorder.context();
        DeviceRegistration.Builder b = DeviceRegistration.of(manager).streams(streams).factory(new Factory(Set.of("cpu")));

        IllegalStateException e = assertThrows(IllegalStateException.class, () -> b.register(context));

        assertTrue(e.getMessage().contains("stopping"), e.getMessage());
        assertEquals(List.of("register " + STREAMS, "register " + FACTORY, "unregister " + FACTORY, "unregister " + STREAMS),
                recorder.events);
    }

    @Test
    void aManagerThatIsNotAdvancedIsRegisteredOnlyAsADeviceMemoryManager() {
        DeviceMemoryManager plain = (DeviceMemoryManager) Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {DeviceMemoryManager.class}, (proxy, method, args) -> switch (method.getName()) {
                    case "device" -> CPU3;
                    default -> throw new UnsupportedOperationException(method.toString());
                });

        List<DeviceRegistration.Entry> plan = DeviceRegistration.of(plain, "plain").plan();

        assertEquals(1, plan.size());
        assertEquals(List.of(DeviceMemoryManager.class.getName()), List.of(plan.get(0).types()));
        assertSame(plain, plan.get(0).service());
        assertEquals("plain", DeviceRegistration.of(plain, "plain").properties().get(DeviceMemoryManager.BACKEND_PROPERTY));
    }

    @Test
    void refusesWhatWouldRegisterAWrongDevice() {
        DeviceRegistration.Builder b = DeviceRegistration.of(manager);
        HostStreamManager other = new HostStreamManager(Device.cpu(4));
        try {
            InvalidMemoryRequestException wrongStreams = assertThrows(InvalidMemoryRequestException.class, () -> b.streams(other));
            assertTrue(wrongStreams.getMessage().contains("cpu:4") && wrongStreams.getMessage().contains("cpu:3"),
                    wrongStreams.getMessage());
        } finally {
            other.close();
        }
        InvalidMemoryRequestException wrongKind = assertThrows(InvalidMemoryRequestException.class,
                () -> b.factory(new Factory(Set.of("cuda"))));
        assertTrue(wrongKind.getMessage().contains("[cuda]"), wrongKind.getMessage());
        InvalidMemoryRequestException reserved = assertThrows(InvalidMemoryRequestException.class,
                () -> b.property(DeviceMemoryManager.DEVICE_PROPERTY, "cpu:9"));
        assertTrue(reserved.getMessage().contains(DeviceMemoryManager.DEVICE_PROPERTY), reserved.getMessage());
        assertThrows(InvalidMemoryRequestException.class, () -> b.property("objectClass", "x"));
        InvalidMemoryRequestException blank = assertThrows(InvalidMemoryRequestException.class,
                () -> DeviceRegistration.of(manager, " "));
        assertTrue(blank.getMessage().contains("' '"), blank.getMessage());
        assertEquals("cpu:3", b.properties().get(DeviceMemoryManager.DEVICE_PROPERTY), "a refused property changed nothing");
    }
}
