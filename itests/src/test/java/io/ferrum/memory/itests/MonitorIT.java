package io.ferrum.memory.itests;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;
import static org.ops4j.pax.exam.CoreOptions.options;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Dictionary;
import java.util.Hashtable;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeSet;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.jar.Attributes;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;

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
import org.osgi.framework.ServiceEvent;
import org.osgi.framework.ServiceListener;
import org.osgi.framework.ServiceReference;
import org.osgi.framework.ServiceRegistration;
import org.osgi.framework.namespace.PackageNamespace;
import org.osgi.framework.wiring.BundleWire;
import org.osgi.framework.wiring.BundleWiring;
import org.osgi.service.cm.ConfigurationAdmin;
import org.osgi.service.event.EventConstants;
import org.osgi.service.event.EventHandler;
import org.osgi.service.log.LogListener;
import org.osgi.service.log.LogReaderService;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.AllocationStrategy;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryManagerFactory;
import io.ferrum.memory.api.MemoryObserver;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.api.MemoryRouter;
import io.ferrum.memory.api.MemoryTransfer;

/**
 * The whole system in a real framework: CPU devices from factory configurations, the monitor and
 * router, four strategy bundles swapped while allocations flow, observers and Event Admin.
 */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerMethod.class)
public class MonitorIT {
    private static final long MiB = 1 << 20;
    private static final Device CPU0 = Device.cpu(0);
    private static final Device CPU1 = Device.cpu(1);
    private static final Device CPU2 = Device.cpu(2);
    private static final Device CPU3 = Device.cpu(3);

    @Inject
    private BundleContext context;

    @Inject
    private ConfigurationAdmin configAdmin;

    @Inject
    private MemoryRouter router;

    @Inject
    private GlobalMemoryMonitor monitor;

    @Configuration
    public Option[] config() {
        return options(FerrumOptions.wholeSystem(), FerrumOptions.testSupport());
    }

    private void addDevice(int index, long capacity, long chunk) throws Exception {
        org.osgi.service.cm.Configuration c = configAdmin.createFactoryConfiguration("io.ferrum.memory.cpu.device", "?");
        c.update(new Hashtable<>(Map.of("index", index, "capacity", capacity, "initialSize", chunk, "growthIncrement", chunk)));
        Await.service(context, DeviceMemoryManager.class, Device.cpu(index));
        Await.until("the monitor sees cpu:" + index, () -> monitor.devices().contains(Device.cpu(index)));
    }

    private void useStrategy(String name) throws Exception {
        org.osgi.service.cm.Configuration c = configAdmin.getConfiguration("io.ferrum.memory.monitor", "?");
        Dictionary<String, Object> p = new Hashtable<>(Map.of("strategy", name, "samplePeriodMs", 0L));
        c.update(p);
        Await.until("strategy " + name, () -> router.activeStrategy().equals(Optional.of(name)));
    }

    private Device place(AllocationRequirements r) {
        MemoryHandle h = router.allocate(MiB, r);
        Device d = router.owner(h).orElseThrow();
        router.deallocate(h);
        return d;
    }

    @Test
    public void placementsFollowEachStrategyAndSwaps() throws Exception {
        addDevice(1, 64 * MiB, 4 * MiB);
        addDevice(2, 128 * MiB, 4 * MiB);
        addDevice(3, 32 * MiB, 4 * MiB);
        Await.until("best-fit by default", () -> router.activeStrategy().equals(Optional.of("best-fit")));
        // best-fit: the smallest empty device wastes least (cpu:3 scores 1 - 31/32 - 0.25).
        assertEquals(CPU3, place(AllocationRequirements.defaults()));

        useStrategy("most-free");
        assertEquals("cpu:0 has all of the machine's RAM", CPU0, place(AllocationRequirements.defaults()));

        useStrategy("preferred-order");
        assertEquals(CPU2, place(AllocationRequirements.defaults().preferring(CPU2, CPU1)));
        assertEquals(CPU0, place(AllocationRequirements.defaults()));

        useStrategy("round-robin");
        List<Device> rotation = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            rotation.add(place(AllocationRequirements.defaults()));
        }
        assertEquals(List.of(CPU0, CPU1, CPU2, CPU3).stream().sorted().toList(), rotation.stream().sorted().toList());

        // Stopping the configured strategy's bundle: the router falls back to best-fit at once.
        Bundle roundRobin = Await.installed(context, "io.ferrum.memory.strategy.roundrobin");
        roundRobin.stop();
        assertEquals(Optional.of("best-fit"), router.activeStrategy());
        assertEquals(CPU3, place(AllocationRequirements.defaults()));
        roundRobin.start();
        Await.until("round-robin back", () -> router.activeStrategy().equals(Optional.of("round-robin")));
    }

    @Test
    public void strategyBundlesCanBeSwappedWhileAllocationsFlowAndNothingIsLost() throws Exception {
        addDevice(1, 64 * MiB, 4 * MiB);
        Map<Device, Long> before = new java.util.TreeMap<>();
        monitor.globalMemoryInfo().forEach((d, i) -> before.put(d, i.usedBytes()));
        AtomicBoolean run = new AtomicBoolean(true);
        AtomicLong done = new AtomicLong();
        List<Throwable> failures = new CopyOnWriteArrayList<>();
        Thread worker = new Thread(() -> {
            while (run.get()) {
                try {
                    MemoryHandle h = router.allocate(64 * 1024, AllocationRequirements.defaults());
                    router.deallocate(h);
                    done.incrementAndGet();
                } catch (RuntimeException e) {
                    failures.add(e);
                }
            }
        });
        worker.start();
        String[] bundles = {"io.ferrum.memory.strategy.mostfree", "io.ferrum.memory.strategy.roundrobin",
            "io.ferrum.memory.strategy.preferredorder"};
        for (int round = 0; round < 3; round++) {
            for (String bsn : bundles) {
                Bundle b = Await.installed(context, bsn);
                long at = done.get();
                b.stop();
                Await.until("allocations after stopping " + bsn, () -> done.get() > at + 10);
                b.start();
            }
            Bundle best = Await.installed(context, "io.ferrum.memory.strategy.bestfit");
            best.update();
            long at = done.get();
            Await.until("allocations after updating best-fit", () -> done.get() > at + 10);
        }
        run.set(false);
        worker.join();
        assertEquals("no allocation failed while strategies came and went", List.of(), failures);
        assertTrue(done.get() > 100);
        Map<Device, Long> after = new java.util.TreeMap<>();
        monitor.globalMemoryInfo().forEach((d, i) -> after.put(d, i.usedBytes()));
        assertEquals("nothing leaked", before, after);
    }

    @Test
    public void observersAndEventAdminSeeEachCrossingOnce() throws Exception {
        // 100 blocks of 102400 bytes fill exactly 10 chunks of 1024000 bytes: each block is 1 %.
        org.osgi.framework.ServiceReference<LogReaderService> logRef = context.getServiceReference(LogReaderService.class);
        LogReaderService logs = context.getService(logRef);
        List<String> fromLogMonitor = new CopyOnWriteArrayList<>();
        LogListener listener = entry -> {
            if (entry.getBundle() != null && "io.ferrum.memory.monitor.log".equals(entry.getBundle().getSymbolicName())) {
                fromLogMonitor.add(entry.getMessage());
            }
        };
        logs.addLogListener(listener);
        addDevice(1, 10_240_000, 1_024_000);
        List<String> seen = new CopyOnWriteArrayList<>();
        List<String> events = new CopyOnWriteArrayList<>();
        ServiceRegistration<MemoryObserver> observer = context.registerService(MemoryObserver.class, new MemoryObserver() {
            @Override
            public void pressureChanged(Device d, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
                seen.add(previous + ">" + current);
            }
        }, new Hashtable<>(Map.of(DeviceMemoryManager.DEVICE_PROPERTY, "cpu:1")));
        ServiceRegistration<EventHandler> handler = context.registerService(EventHandler.class,
                e -> events.add(e.getTopic().substring(e.getTopic().lastIndexOf('/') + 1) + "@" + e.getProperty("device")
                        + " " + e.getProperty("old") + ">" + e.getProperty("new")),
                new Hashtable<>(Map.of(EventConstants.EVENT_TOPIC, "io/ferrum/memory/pressure/*")));
        try {
            DeviceMemoryManager cpu1 = Await.service(context, DeviceMemoryManager.class, CPU1);
            List<MemoryHandle> hs = new ArrayList<>();
            for (int i = 0; i < 100; i++) {
                hs.add(cpu1.allocate(102_400, CPU1));
            }
            for (int i = 99; i >= 0; i--) {
                cpu1.deallocate(hs.get(i));
            }
            List<String> expected = List.of("LOW>MEDIUM", "MEDIUM>HIGH", "HIGH>CRITICAL", "CRITICAL>HIGH", "HIGH>MEDIUM", "MEDIUM>LOW");
            Await.until("six pressure changes", () -> seen.size() >= 6 && events.size() >= 6);
            Thread.sleep(200); // anything extra would be a bug: let it arrive
            assertEquals(expected, seen);
            assertEquals(List.of("MEDIUM@cpu:1 LOW>MEDIUM", "HIGH@cpu:1 MEDIUM>HIGH", "CRITICAL@cpu:1 HIGH>CRITICAL",
                    "HIGH@cpu:1 CRITICAL>HIGH", "MEDIUM@cpu:1 HIGH>MEDIUM", "LOW@cpu:1 MEDIUM>LOW"), events);
        } finally {
            observer.unregister();
            handler.unregister();
        }
        // The log monitor wrote the crossing to the OSGi log (WARN from HIGH up; INFO is below the
        // default level of an R7 Log Service, so device arrivals are not asserted here).
        Await.until("the log monitor's warning", () -> fromLogMonitor.stream().anyMatch(
                m -> m.contains("cpu:1: HIGH -> CRITICAL (95.0 % used, 9728000 of 10240000 bytes, 95 allocations)")));
        logs.removeLogListener(listener);
        context.ungetService(logRef);
    }

    private Bundle bundle(String symbolicName) {
        for (Bundle b : context.getBundles()) {
            if (symbolicName.equals(b.getSymbolicName())) {
                return b;
            }
        }
        throw new AssertionError(symbolicName + " is not installed");
    }

    /** @return the packages {@code b} is wired to import */
    private static List<String> importedPackages(Bundle b) {
        List<String> out = new ArrayList<>();
        for (BundleWire w : b.adapt(BundleWiring.class).getRequiredWires(PackageNamespace.PACKAGE_NAMESPACE)) {
            out.add((String) w.getCapability().getAttributes().get(PackageNamespace.PACKAGE_NAMESPACE));
        }
        return out;
    }

    @Test
    public void theEventAdminBridgeIsAPluginBundleAndTheMonitorImportsOnlyTheApi() throws Exception {
        List<String> monitorImports = importedPackages(bundle("io.ferrum.memory.monitor"));
        assertTrue(monitorImports.toString(), monitorImports.contains("io.ferrum.memory.api"));
        assertFalse("the monitor imports no pool: " + monitorImports, monitorImports.contains("io.ferrum.memory.pool"));
        assertFalse("Event Admin is the bridge's business: " + monitorImports, monitorImports.contains("org.osgi.service.event"));

        Bundle bridge = bundle("io.ferrum.memory.monitor.eventadmin");
        List<String> added = new CopyOnWriteArrayList<>();
        ServiceRegistration<EventHandler> handler = context.registerService(EventHandler.class,
                e -> added.add(e.getProperty("device") + " " + e.getProperty("totalBytes")),
                new Hashtable<>(Map.of(EventConstants.EVENT_TOPIC, "io/ferrum/memory/device/ADDED")));
        try {
            bridge.stop();
            addDevice(1, 8 * MiB, MiB); // arrives while nobody bridges: no event
            bridge.start();
            // The restarted bridge is a new observer: the monitor tells it of the devices that exist.
            Await.until("cpu:1's arrival, told to the restarted bridge", () -> added.contains("cpu:1 8388608"));
            assertEquals("one event for cpu:1, from the restarted bridge alone: " + added, 1,
                    added.stream().filter(a -> a.startsWith("cpu:1 ")).count());
        } finally {
            handler.unregister();
        }
    }

    /**
     * A bundle registers a manager by hand through its own GlobalMemoryMonitor service and stops
     * (having closed its manager): the framework takes its service back, which undoes the
     * registration, and the device's service manager serves the device again.
     */
    @Test
    public void aManagerRegisteredByHandGoesWithTheBundleThatRegisteredIt() throws Exception {
        addDevice(1, 64 * MiB, 4 * MiB);
        useStrategy("preferred-order");
        DeviceMemoryManager service = Await.service(context, DeviceMemoryManager.class, CPU1);
        Bundle user = context.installBundle("ferrum-itest:by-hand-user", manifestOnlyBundle("io.ferrum.memory.itests.byhand"));
        try {
            user.start();
            BundleContext its = user.getBundleContext();
            GlobalMemoryMonitor itsMonitor = its.getService(its.getServiceReference(GlobalMemoryMonitor.class));
            MemoryManagerFactory factory = context.getService(context.getServiceReference(MemoryManagerFactory.class));
            DeviceMemoryManager byHand = factory.createMemoryManager(CPU1, MemoryManagerConfig.defaults());
            itsMonitor.registerManager(CPU1, byHand);
            assertTrue("the manager by hand serves cpu:1", monitor.manager(CPU1).orElseThrow() == byHand);
            byHand.close();
            user.stop();
            assertTrue("cpu:1's service manager serves again", monitor.manager(CPU1).orElseThrow() != byHand);
            assertTrue(monitor.devices().contains(CPU1));
            MemoryHandle h = router.allocate(MiB, AllocationRequirements.defaults().preferring(CPU1));
            assertTrue("the block is the service manager's", service.handleInfo(h).isPresent());
            router.deallocate(h);
        } finally {
            user.uninstall();
        }
    }

    /**
     * A bundle that gets the monitor as soon as it is registered (a DS component that allocates in
     * its activate does) finds the monitor whole: its devices and its strategy, as DS registered the
     * service only once the component had them.
     */
    @Test
    public void aBundleThatGetsTheMonitorAsItIsRegisteredFindsItsDevicesAndStrategy() throws Exception {
        Bundle monitorBundle = bundle("io.ferrum.memory.monitor");
        List<String> seen = new CopyOnWriteArrayList<>();
        ServiceListener listener = e -> {
            if (e.getType() == ServiceEvent.REGISTERED) {
                ServiceReference<?> ref = e.getServiceReference();
                GlobalMemoryMonitor m = (GlobalMemoryMonitor) context.getService(ref);
                try {
                    seen.add(new TreeSet<>(m.devices()) + " " + ((MemoryRouter) m).activeStrategy());
                } finally {
                    context.ungetService(ref);
                }
            }
        };
        context.addServiceListener(listener, "(objectClass=" + GlobalMemoryMonitor.class.getName() + ")");
        try {
            monitorBundle.stop();
            monitorBundle.start();
            Await.until("the monitor registered again", () -> !seen.isEmpty());
        } finally {
            context.removeServiceListener(listener);
        }
        assertEquals("[cpu:0] Optional[best-fit]", seen.get(0));
    }

    /** @return a bundle with a manifest alone, which imports the API: a user the framework keeps the account of */
    private static InputStream manifestOnlyBundle(String symbolicName) throws IOException {
        Manifest manifest = new Manifest();
        Attributes a = manifest.getMainAttributes();
        a.put(Attributes.Name.MANIFEST_VERSION, "1.0");
        a.putValue("Bundle-ManifestVersion", "2");
        a.putValue("Bundle-SymbolicName", symbolicName);
        a.putValue("Import-Package", "io.ferrum.memory.api");
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        new JarOutputStream(bytes, manifest).close();
        return new ByteArrayInputStream(bytes.toByteArray());
    }

    @Test
    public void aDeviceRemovedWhileItsHandlesLiveIsDroppedAndItsHandlesSaySo() throws Exception {
        addDevice(1, 64 * MiB, 4 * MiB);
        useStrategy("preferred-order");
        MemoryHandle h = router.allocate(MiB, AllocationRequirements.defaults().preferring(CPU1));
        assertEquals(Optional.of(CPU1), router.owner(h));
        org.osgi.service.cm.Configuration[] configs = configAdmin.listConfigurations("(service.factoryPid=io.ferrum.memory.cpu.device)");
        configs[0].delete();
        Await.gone(context, DeviceMemoryManager.class, CPU1);
        // The registry forgets the service before it tells listeners: the monitor's unbind may still be
        // running on the thread that unregistered it.
        Await.until("the monitor drops cpu:1", () -> !monitor.devices().contains(CPU1));
        assertFalse(monitor.globalMemoryInfo().containsKey(CPU1));
        assertFalse(monitor.devices().contains(CPU1));
        try {
            router.deallocate(h);
            fail("a handle of a removed device must not be accepted");
        } catch (DeviceUnavailableException e) {
            assertEquals(CPU1, e.device());
        }
    }

    @Test
    public void aCrossDeviceCopyArrivesIntact() throws Exception {
        addDevice(1, 64 * MiB, 4 * MiB);
        addDevice(2, 64 * MiB, 4 * MiB);
        AdvancedMemoryManager a = Await.service(context, AdvancedMemoryManager.class, CPU1);
        AdvancedMemoryManager b = Await.service(context, AdvancedMemoryManager.class, CPU2);
        MemoryHandle src = a.allocate(8 * MiB, CPU1);
        MemoryHandle dst = b.allocate(8 * MiB, CPU2);
        MemorySegment w = a.mapMemory(src, MemoryAccess.WRITE_ONLY);
        for (long i = 0; i < 8 * MiB; i += 8) {
            w.set(ValueLayout.JAVA_LONG, i, i ^ 0x5555L);
        }
        a.unmapMemory(src);
        router.copyAsync(MemoryTransfer.of(src, dst, 8 * MiB), null).toCompletableFuture().get();
        MemorySegment r = b.mapMemory(dst, MemoryAccess.READ_ONLY);
        for (long i = 0; i < 8 * MiB; i += 8) {
            if (r.get(ValueLayout.JAVA_LONG, i) != (i ^ 0x5555L)) {
                fail("byte " + i + " differs after the cross-device copy");
            }
        }
        b.unmapMemory(dst);
        assertEquals(Optional.of(CPU2), router.owner(dst));
    }

    @Test
    public void writesReadsAndScopedViewsWorkThroughTheServicesAndTheRouter() throws Exception {
        addDevice(1, 64 * MiB, 4 * MiB);
        AdvancedMemoryManager a = Await.service(context, AdvancedMemoryManager.class, CPU1);
        MemoryHandle h = a.allocate(3 * MiB, CPU1);
        byte[] data = new byte[(int) (3 * MiB)];
        new java.util.Random(15).nextBytes(data);
        router.write(h, 0, MemorySegment.ofArray(data));
        byte[] back = new byte[data.length];
        a.read(h, 0, MemorySegment.ofArray(back));
        assertTrue("router.write then the owner's read", java.util.Arrays.equals(data, back));
        long first = a.withMapped(h, MemoryAccess.READ_ONLY, view -> view.get(ValueLayout.JAVA_LONG_UNALIGNED, 0));
        assertEquals(MemorySegment.ofArray(data).get(ValueLayout.JAVA_LONG_UNALIGNED, 0), first);
        a.withMapped(h, MemoryAccess.READ_WRITE, view -> view.asSlice(MiB, 16).fill((byte) 0x7F));
        byte[] sixteen = new byte[16];
        router.read(h, MiB, MemorySegment.ofArray(sixteen));
        for (byte b : sixteen) {
            assertEquals(0x7F, b);
        }
        a.withMapped(h, MemoryAccess.READ_ONLY, view -> {
            try {
                router.deallocate(h);
                fail("a free through the router inside the action must be refused");
            } catch (io.ferrum.memory.api.InvalidMemoryRequestException expected) {
                assertTrue(expected.getMessage(), expected.getMessage().contains("withMapped"));
            }
            return null;
        });
        router.deallocate(h);
        assertFalse(a.owns(h));
    }

    /**
     * Defect 1 of the configuration review: a file with bad values at start used to leave no monitor
     * at all (DS's conversion threw). Now the monitor runs with its defaults, the error line names
     * every bad value without a stack trace, and the refusal stands as a service for mem:strategy.
     */
    @Test
    public void aBadMonitorConfigurationAtStartLeavesTheMonitorRunningWithItsDefaults() throws Exception {
        org.osgi.framework.ServiceReference<LogReaderService> logRef = context.getServiceReference(LogReaderService.class);
        LogReaderService logs = context.getService(logRef);
        List<String> errors = new CopyOnWriteArrayList<>();
        LogListener listener = entry -> {
            if (entry.getBundle() != null && "io.ferrum.memory.monitor".equals(entry.getBundle().getSymbolicName())
                    && entry.getLogLevel() == org.osgi.service.log.LogLevel.ERROR) {
                errors.add(entry.getMessage() + (entry.getException() == null ? "" : " WITH A STACK TRACE"));
            }
        };
        logs.addLogListener(listener);
        Bundle monitorBundle = bundle("io.ferrum.memory.monitor");
        try {
            monitorBundle.stop();
            org.osgi.service.cm.Configuration config = configAdmin.getConfiguration("io.ferrum.memory.monitor", "?");
            // As FileInstall delivers a file: every value as text.
            config.update(new Hashtable<>(Map.of("strategy", "most-free", "samplePeriodMs", "abc", "maxAttempts", "0")));
            monitorBundle.start();

            String rejectedFilter = "(&(ferrum.configuration.rejected=*)(ferrum.configuration.pid=io.ferrum.memory.monitor))";
            Await.service(context, Object.class, rejectedFilter);
            MemoryRouter running = Await.service(context, MemoryRouter.class, "(objectClass=" + MemoryRouter.class.getName() + ")");
            Await.until("best-fit, the default, is active", () -> running.activeStrategy().equals(Optional.of("best-fit")));
            String reason = (String) context.getServiceReferences((String) null, rejectedFilter)[0].getProperty("ferrum.configuration.rejected");
            assertTrue(reason, reason.contains("Invalid samplePeriodMs 'abc'") && reason.contains("Invalid maxAttempts '0'")
                    && reason.endsWith("the monitor starts with its defaults"));
            Await.until("the error line", () -> !errors.isEmpty());
            assertEquals(List.of(reason), errors);

            // A good configuration applies whole, and the refusal no longer stands.
            config.update(new Hashtable<>(Map.of("strategy", "most-free", "samplePeriodMs", "0", "maxAttempts", "2")));
            Await.until("most-free is active", () -> running.activeStrategy().equals(Optional.of("most-free")));
            Await.until("the refusal is withdrawn", () -> {
                try {
                    return context.getServiceReferences((String) null, rejectedFilter) == null;
                } catch (org.osgi.framework.InvalidSyntaxException e) {
                    throw new IllegalStateException(e);
                }
            });
            assertEquals(1, errors.size());
            config.delete();
        } finally {
            logs.removeLogListener(listener);
            context.ungetService(logRef);
        }
    }

    /**
     * The monitor's form of what {@code CpuBackendIT.everyClassOfThePoolBundleIsDefinedOnceAnEngineServes}
     * checks: a router or monitor object a caller kept serves it until the refresh, also while Equinox
     * uninstalls the monitor, and Equinox loads no class of a bundle then. So once the router serves,
     * every class a call of it could need is defined (a refusal's message needs {@code Bytes}, a copy
     * between two devices {@code CrossDeviceCopier.Route}). {@code MonitorBuilder} builds a monitor
     * without a framework and is never loaded in one. See {@link UndefinedClasses}; Felix: skipped.
     */
    @Test
    public void everyClassOfTheMonitorBundleACallCouldNeedIsDefinedOnceTheRouterServes() throws Exception {
        router.deallocate(router.allocate(64, AllocationRequirements.defaults()));
        List<String> undefined = new java.util.ArrayList<>(UndefinedClasses.of(bundle("io.ferrum.memory.monitor"), 20));
        undefined.removeIf(name -> name.startsWith("io.ferrum.memory.monitor.MonitorBuilder"));
        assertEquals("classes of the monitor a call could still need after its uninstall", List.of(), undefined);
    }

    /**
     * The same across bundles: after an uninstall of the api, the monitor's router serves until the
     * refresh, and its loader's first use of an API class asks the api's loader, which Equinox refuses
     * while the api is being uninstalled, though it defined the class long before. The monitor imports
     * only the API, so it cannot have its loader load all of it ({@code BundleClasses} is the pool's):
     * once the router serves, its loader holds every API class a class of the monitor names (a copy
     * between two managers names {@code MemoryHandleInfo}, {@code AdvancedMemoryManager} and
     * {@code MemoryAccess}; a refusal's message {@code MemoryType}). See
     * {@link UndefinedClasses#ofImportsNamed}; Felix: skipped.
     */
    @Test
    public void everyApiClassTheMonitorNamesIsLoadedOnceTheRouterServes() throws Exception {
        router.deallocate(router.allocate(64, AllocationRequirements.defaults()));
        assertEquals("API classes the monitor would still ask the api's loader for", List.of(),
                UndefinedClasses.ofImportsNamed(bundle("io.ferrum.memory.monitor"), "io.ferrum.memory.monitor.MonitorBuilder"));
    }

    /**
     * The strategies' form: the monitor holds every strategy from its start, and a swap makes one
     * active that may never have been asked. Its first {@code selectDevice} then has its loader ask
     * the api's for the API classes it names ({@code Device}, {@code MemoryInfo}, ...), which Equinox
     * refuses while the api is being uninstalled, though it defined them long before. So once the
     * monitor holds a strategy, before any allocation, the strategy's loader holds every class of
     * its bundle and every API class those name. {@code StrategyName} is a build-time annotation
     * (class retention) that no loader ever asks for. See {@link UndefinedClasses}; Felix: skipped.
     */
    @Test
    public void everyStrategyHoldsWhatItsFirstSelectNeedsOnceTheMonitorHoldsIt() throws Exception {
        String[] strategies = {"bestfit", "mostfree", "preferredorder", "roundrobin"};
        Bundle monitorBundle = bundle("io.ferrum.memory.monitor");
        for (String s : strategies) {
            Bundle b = bundle("io.ferrum.memory.strategy." + s);
            Await.until("the monitor holds " + s, () -> heldBy(b, monitorBundle));
        }
        List<String> missing = new ArrayList<>();
        for (String s : strategies) {
            Bundle b = bundle("io.ferrum.memory.strategy." + s);
            missing.addAll(UndefinedClasses.of(b, 1));
            for (String api : UndefinedClasses.ofImportsNamed(b, null)) {
                if (!api.equals("io.ferrum.memory.api.StrategyName")) {
                    missing.add(s + ": " + api);
                }
            }
        }
        assertEquals("classes a strategy's first select would still ask a loader for", List.of(), missing);
    }

    /**
     * The monitor plugins' form: the monitor calls an observer on its own threads, also while
     * Equinox uninstalls the observer's bundle or the api, so once the monitor serves, the log
     * monitor's and the Event Admin bridge's loaders hold every class of theirs and every API class
     * those name. Nothing was missing when this was written; the test keeps it so. See {@link
     * UndefinedClasses}; Felix: skipped.
     */
    @Test
    public void everyClassTheMonitorPluginsCouldNeedIsLoadedOnceTheMonitorServes() throws Exception {
        router.deallocate(router.allocate(64, AllocationRequirements.defaults()));
        List<String> missing = new ArrayList<>();
        for (String plugin : new String[] {"io.ferrum.memory.monitor.log", "io.ferrum.memory.monitor.eventadmin"}) {
            Bundle b = bundle(plugin);
            missing.addAll(UndefinedClasses.of(b, 1));
            missing.addAll(UndefinedClasses.ofImportsNamed(b, null));
        }
        assertEquals("classes a monitor plugin would still ask a loader for", List.of(), missing);
    }

    /** @return whether {@code user} holds the {@link AllocationStrategy} service of {@code strategy} */
    private static boolean heldBy(Bundle strategy, Bundle user) {
        ServiceReference<?>[] refs = strategy.getRegisteredServices();
        for (ServiceReference<?> ref : refs == null ? new ServiceReference<?>[0] : refs) {
            Bundle[] users = ref.getUsingBundles();
            if (((String[]) ref.getProperty("objectClass"))[0].equals(AllocationStrategy.class.getName())
                    && users != null && List.of(users).contains(user)) {
                return true;
            }
        }
        return false;
    }
}

