package io.ferrum.memory.itests;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;
import static org.ops4j.pax.exam.CoreOptions.options;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Dictionary;
import java.util.Hashtable;
import java.util.Map;

import javax.inject.Inject;

import org.junit.Test;
import org.junit.runner.RunWith;
import org.ops4j.pax.exam.Configuration;
import org.ops4j.pax.exam.Option;
import org.ops4j.pax.exam.junit.PaxExam;
import org.ops4j.pax.exam.spi.reactors.ExamReactorStrategy;
import org.ops4j.pax.exam.spi.reactors.PerMethod;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.FrameworkUtil;
import org.osgi.framework.ServiceReference;
import org.osgi.service.cm.ConfigurationAdmin;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryManagerFactory;
import io.ferrum.memory.api.MemoryMapping;
import io.ferrum.memory.api.StreamManager;

/** The CPU backend in a real framework with SCR and Config Admin, on Felix and on Equinox. */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerMethod.class)
public class CpuBackendIT {
    private static final long MiB = 1 << 20;

    @Inject
    private BundleContext context;

    @Inject
    private ConfigurationAdmin configAdmin;

    @Configuration
    public Option[] config() {
        return options(FerrumOptions.cpuBackend(), FerrumOptions.testSupport());
    }

    private <T> T await(Class<T> type, Device device) throws Exception {
        return Await.service(context, type, device);
    }

    private void awaitGone(Class<?> type, Device device) throws Exception {
        Await.gone(context, type, device);
    }

    private Bundle cpuBundle() {
        return Await.installed(context, "io.ferrum.memory.cpu");
    }

    @Test
    public void cpuZeroIsRegisteredWithItsProperties() throws Exception {
        DeviceMemoryManager manager = await(DeviceMemoryManager.class, Device.cpu());
        ServiceReference<?> ref = context.getServiceReferences(DeviceMemoryManager.class.getName(),
                "(" + DeviceMemoryManager.DEVICE_PROPERTY + "=cpu:0)")[0];
        assertEquals("cpu", ref.getProperty(DeviceMemoryManager.DEVICE_KIND_PROPERTY));
        assertEquals("ffm", ref.getProperty(DeviceMemoryManager.BACKEND_PROPERTY));
        assertEquals("io.ferrum.memory.cpu", ref.getBundle().getSymbolicName());
        assertTrue("registered as AdvancedMemoryManager too", manager instanceof AdvancedMemoryManager);
        assertNotNull(await(AdvancedMemoryManager.class, Device.cpu()));
        StreamManager streams = await(StreamManager.class, Device.cpu());
        assertEquals(Device.cpu(), streams.device());
        assertEquals(Device.cpu(), manager.device());
        assertTrue("cpu:0 defaults to physical RAM: " + manager.memoryInfo().totalBytes(),
                manager.memoryInfo().totalBytes() > 256 * MiB);

        ServiceReference<MemoryManagerFactory> factoryRef = context.getServiceReference(MemoryManagerFactory.class);
        assertNotNull(factoryRef);
        assertEquals("cpu", factoryRef.getProperty(DeviceMemoryManager.DEVICE_KIND_PROPERTY));
        MemoryManagerFactory factory = context.getService(factoryRef);
        try (AdvancedMemoryManager own = factory.createAdvancedMemoryManager(Device.cpu(7), MemoryManagerConfig.defaults())) {
            MemoryHandle h = own.allocate(4096, Device.cpu(7));
            assertEquals(4096, own.handleInfo(h).orElseThrow().size());
        }
    }

    @Test
    public void realMemoryRoundTripsThroughTheService() throws Exception {
        AdvancedMemoryManager m = await(AdvancedMemoryManager.class, Device.cpu());
        MemoryHandle a = m.allocate(MiB, Device.cpu());
        MemoryHandle b = m.allocate(MiB, Device.cpu());
        MemorySegment w = m.mapMemory(a, MemoryAccess.READ_WRITE);
        w.set(ValueLayout.JAVA_LONG, MiB - 8, 0xfeedL);
        m.unmapMemory(a);
        m.copy(a, b, MiB, 0, 0);
        MemorySegment r = m.mapMemory(b, MemoryAccess.READ_ONLY);
        assertEquals(0xfeedL, r.get(ValueLayout.JAVA_LONG, MiB - 8));
        m.unmapMemory(b);
        assertEquals(2, m.memoryInfo().activeAllocations());
        assertFalse(FrameworkUtil.getBundle(m.getClass()).getSymbolicName().isEmpty());
    }

    @Test
    public void factoryConfigurationsAddAndRemoveDevices() throws Exception {
        org.osgi.service.cm.Configuration one = configAdmin.createFactoryConfiguration("io.ferrum.memory.cpu.device", "?");
        one.update(props(Map.of("index", 1, "capacity", 64 * MiB, "initialSize", 4 * MiB, "growthIncrement", 4 * MiB)));
        org.osgi.service.cm.Configuration two = configAdmin.createFactoryConfiguration("io.ferrum.memory.cpu.device", "?");
        two.update(props(Map.of("index", 2, "capacity", 32 * MiB, "initialSize", 2 * MiB, "growthIncrement", 2 * MiB,
                "threadCacheBytes", 0L)));

        DeviceMemoryManager cpu1 = await(DeviceMemoryManager.class, Device.cpu(1));
        DeviceMemoryManager cpu2 = await(DeviceMemoryManager.class, Device.cpu(2));
        assertEquals(64 * MiB, cpu1.memoryInfo().totalBytes());
        assertEquals(32 * MiB, cpu2.memoryInfo().totalBytes());
        MemoryHandle h = cpu1.allocate(10 * MiB, Device.cpu(1));
        assertEquals(10 * MiB, cpu1.memoryInfo().usedBytes());
        assertTrue(cpu1.memoryInfo().reservedBytes() >= 10 * MiB);
        assertNotNull(await(StreamManager.class, Device.cpu(2)));
        // Thread caches round small requests to size classes: on by default (cpu:1), off on cpu:2.
        MemoryHandle classed = cpu1.allocate(17000, Device.cpu(1));
        assertEquals("17000 B is a 17 KiB class", 10 * MiB + 17 * 1024, cpu1.memoryInfo().usedBytes());
        MemoryHandle exact = cpu2.allocate(17000, Device.cpu(2));
        assertEquals("without a thread cache, 17000 B is only aligned to 256", 17152, cpu2.memoryInfo().usedBytes());
        cpu1.deallocate(classed);
        cpu2.deallocate(exact);

        // cpu:0 and cpu:1 can share memory: two handles, one on each device, over the same bytes.
        AdvancedMemoryManager cpu0 = await(AdvancedMemoryManager.class, Device.cpu());
        MemoryMapping shared = cpu0.createMapping(Device.cpu(), Device.cpu(1), 4096);
        MemorySegment w = cpu0.mapMemory(shared.source(), MemoryAccess.WRITE_ONLY);
        w.set(ValueLayout.JAVA_INT, 100, 77);
        cpu0.unmapMemory(shared.source());
        AdvancedMemoryManager adv1 = (AdvancedMemoryManager) cpu1;
        MemorySegment r = adv1.mapMemory(shared.target(), MemoryAccess.READ_ONLY);
        assertEquals(77, r.get(ValueLayout.JAVA_INT, 100));
        adv1.unmapMemory(shared.target());
        adv1.deallocate(shared.target());
        cpu0.deallocate(shared.source());

        one.delete();
        awaitGone(DeviceMemoryManager.class, Device.cpu(1));
        awaitGone(StreamManager.class, Device.cpu(1));
        // The backend unregisters first (so nobody new finds the device), then closes the manager.
        Await.until("cpu:1's manager closed", () -> !cpu1.owns(h));
        try {
            cpu1.deallocate(h);
            fail("the manager of a deleted device must refuse its old handles");
        } catch (DeviceUnavailableException e) {
            assertEquals(Device.cpu(1), e.device());
        }
        assertEquals(32 * MiB, cpu2.memoryInfo().totalBytes());
        two.delete();
        awaitGone(DeviceMemoryManager.class, Device.cpu(2));
    }

    @Test
    public void anIndexOnCpuZerosConfigurationIsRefusedAndChangesNothing() throws Exception {
        DeviceMemoryManager cpu0 = await(DeviceMemoryManager.class, Device.cpu());
        long total = cpu0.memoryInfo().totalBytes();
        org.osgi.service.cm.Configuration zero = configAdmin.getConfiguration("io.ferrum.memory.cpu", "?");
        org.osgi.service.cm.Configuration marker = configAdmin.createFactoryConfiguration("io.ferrum.memory.cpu.device", "?");
        try {
            zero.update(props(Map.of("index", 3, "capacity", 64 * MiB)));
            // Config Admin delivers configuration events in order, on one thread: once the later
            // configuration has taken effect, the refused one has been seen and handled.
            marker.update(props(Map.of("index", 5, "capacity", 16 * MiB, "initialSize", 2 * MiB,
                    "growthIncrement", 2 * MiB)));
            await(DeviceMemoryManager.class, Device.cpu(5));
            DeviceMemoryManager still = await(DeviceMemoryManager.class, Device.cpu());
            assertTrue("the refused update must not replace cpu:0's manager", still == cpu0);
            assertEquals("the refused capacity must not apply", total, still.memoryInfo().totalBytes());
            assertNull("no device may appear at the refused index", context.getServiceReferences(
                    DeviceMemoryManager.class.getName(), "(" + DeviceMemoryManager.DEVICE_PROPERTY + "=cpu:3)"));
        } finally {
            marker.delete();
            zero.delete();
            awaitGone(DeviceMemoryManager.class, Device.cpu(5));
        }
    }

    @Test
    public void stoppingTheBundleRemovesItsServicesAndStartingItAgainWorks() throws Exception {
        DeviceMemoryManager before = await(DeviceMemoryManager.class, Device.cpu());
        MemoryHandle h = before.allocate(8 * MiB, Device.cpu());
        assertTrue(before.owns(h));

        Bundle cpu = cpuBundle();
        cpu.stop();
        assertNull(context.getServiceReference(DeviceMemoryManager.class));
        assertNull(context.getServiceReference(StreamManager.class));
        assertNull(context.getServiceReference(MemoryManagerFactory.class));
        try {
            before.allocate(1, Device.cpu());
            fail("a stopped backend's manager must refuse work");
        } catch (DeviceUnavailableException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("cpu:0"));
        }
        assertFalse("handles of a stopped backend are gone", before.owns(h));

        cpu.start();
        DeviceMemoryManager after = await(DeviceMemoryManager.class, Device.cpu());
        assertFalse(after == before);
        assertEquals(0, after.memoryInfo().usedBytes());
        MemoryHandle fresh = after.allocate(MiB, Device.cpu());
        assertTrue(after.owns(fresh));
        assertFalse("an old handle never comes back to life", after.owns(h));
    }

    private static Dictionary<String, Object> props(Map<String, Object> values) {
        return new Hashtable<>(values);
    }

    /**
     * The backends wired to an uninstalled pool bundle keep serving through its engines until a
     * refresh, and Equinox refuses to load a class of a bundle being uninstalled: in
     * LifecycleUnderTrafficIT a free that first needed one ({@code Scopes}) threw "Module has been
     * uninstalled" to its caller. So every class of the pool bundle is defined when its first engine
     * is made. The window inside Equinox's uninstall cannot be held from outside; this checks what
     * closes it: once cpu:0 serves, the pool bundle's class loader has defined all its classes
     * (see {@link UndefinedClasses}; Felix loads classes of uninstalled bundles, so there the check does
     * not apply).
     */
    @Test
    public void everyClassOfThePoolBundleIsDefinedOnceAnEngineServes() throws Exception {
        DeviceMemoryManager manager = await(DeviceMemoryManager.class, Device.cpu());
        manager.deallocate(manager.allocate(64, Device.cpu()));
        Bundle pool = Await.installed(context, "io.ferrum.memory.pool");
        assertEquals("classes of the pool bundle a call could still need after its uninstall", java.util.List.of(),
                UndefinedClasses.of(pool, 20));
    }

    /**
     * The cpu bundle's form of the same: its managers stay registered with callers (the monitor, a user
     * holding one) until its stop unregisters them, and a call already inside one, or one made on a
     * manager kept across the stop, runs the cpu bundle's upstream ({@code FfmUpstream}) while Equinox
     * uninstalls the bundle. Every class of it is defined before its first upstream is made.
     */
    @Test
    public void everyClassOfTheCpuBundleIsDefinedOnceCpuZeroServes() throws Exception {
        DeviceMemoryManager manager = await(DeviceMemoryManager.class, Device.cpu());
        manager.deallocate(manager.allocate(64, Device.cpu()));
        assertEquals("classes of the cpu bundle a call could still need after its uninstall", java.util.List.of(),
                UndefinedClasses.of(cpuBundle(), 10));
    }

    /**
     * The same across bundles: after an uninstall of the pool (or of the api), the cpu bundle's first
     * use of a class of the pool's SPI or of the API asks the exporter's loader, which Equinox refuses
     * while the exporter is being uninstalled, though it defined that class long before. So once cpu:0
     * serves, the pool's and the cpu bundle's loaders hold every class of the packages they import from
     * another bundle ({@link UndefinedClasses#ofImports}).
     */
    @Test
    public void everyClassThePoolAndTheCpuBundleImportIsLoadedOnceCpuZeroServes() throws Exception {
        DeviceMemoryManager manager = await(DeviceMemoryManager.class, Device.cpu());
        manager.deallocate(manager.allocate(64, Device.cpu()));
        Bundle pool = Await.installed(context, "io.ferrum.memory.pool");
        assertEquals("imported classes the pool bundle would still ask its exporter for", java.util.List.of(),
                UndefinedClasses.ofImports(pool));
        assertEquals("imported classes the cpu bundle would still ask its exporter for", java.util.List.of(),
                UndefinedClasses.ofImports(cpuBundle()));
    }
}
