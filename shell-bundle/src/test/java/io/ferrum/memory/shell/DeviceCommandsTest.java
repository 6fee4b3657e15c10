package io.ferrum.memory.shell;

import static io.ferrum.memory.shell.ShellFixture.CPU0;
import static io.ferrum.memory.shell.ShellFixture.MiB;
import static io.ferrum.memory.shell.ShellFixture.lines;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Proxy;
import java.util.Hashtable;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.osgi.framework.BundleContext;
import org.osgi.framework.ServiceReference;

import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.api.StreamManager;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.HostStreamManager;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;

class DeviceCommandsTest {
    private final ShellFixture fixture = new ShellFixture();

    @AfterEach
    void close() throws Exception {
        fixture.close();
    }

    private DeviceCommands commands() throws Exception {
        DeviceCommands c = new DeviceCommands(fixture.framework());
        c.monitor = fixture.directory;
        return c;
    }

    @Test
    void devicesListsEveryDeviceWithItsBackendAndFigures() throws Exception {
        fixture.cpu0.allocate(MiB, CPU0);
        Table t = assertInstanceOf(Table.class, commands().devices());
        assertEquals(List.of("cpu:0", "cpu:1"), t.column("DEVICE"));
        assertEquals(List.of("test-arena", "test-arena"), t.column("BACKEND"));
        assertEquals(List.of("1", "0"), t.column("ALLOCS"));
        assertEquals(List.of("LOW", "LOW"), t.column("PRESSURE"));
        assertTrue(t.toString().startsWith("DEVICE"), t.toString());
    }

    @Test
    void theBackendShownIsThatOfTheManagerThatServesTheDevice() throws Exception {
        BundleContext context = fixture.framework();
        // A second backend's manager for cpu:0 (another backend in plugins/). The registry lists the two
        // in an order of its own; the monitor serves the device with the one listed last.
        try (PooledMemoryManager other = PooledMemoryManager.create(new ArenaUpstream(CPU0, MiB, true),
                MemoryManagerConfig.defaults(), PoolSettings.defaults(), null)) {
            Hashtable<String, Object> p = ShellFixture.managerProperties(other);
            p.put(DeviceMemoryManager.BACKEND_PROPERTY, "other-backend");
            context.registerService(DeviceMemoryManager.class, other, p);
            ServiceReference<?>[] refs = context.getServiceReferences(DeviceMemoryManager.class.getName(),
                    "(" + DeviceMemoryManager.DEVICE_PROPERTY + "=cpu:0)");
            assertEquals(2, refs.length);
            ServiceReference<?> last = refs[1];
            DeviceMemoryManager serving = (DeviceMemoryManager) context.getService(last);
            String backend = (String) last.getProperty(DeviceMemoryManager.BACKEND_PROPERTY);
            DeviceCommands c = new DeviceCommands(context);
            c.monitor = new ShellFixture.Directory(Map.of(CPU0, serving, ShellFixture.CPU1, fixture.cpu1));

            Table t = assertInstanceOf(Table.class, c.devices());
            assertEquals(List.of(backend, "test-arena"), t.column("BACKEND"), "the backend of the manager the figures are of");
            assertEquals("cpu:0 (" + backend + ")", lines(c.info("cpu:0")).get(0));
            context.ungetService(last);
        }
    }

    @Test
    void infoOfEveryDeviceLeavesOutOneThatWentAwayMeanwhile() throws Exception {
        DeviceCommands c = commands();
        c.monitor = fixture.losingAfterListing(ShellFixture.CPU1);
        List<String> info = lines(c.info());
        assertEquals("cpu:0 (test-arena)", info.get(0), "cpu:1, gone, is no error of a look at every device: " + info);
        assertTrue(info.stream().noneMatch(l -> l.startsWith("cpu:1")), info.toString());

        c.monitor = fixture.closingAfterLookup(CPU0);
        assertEquals("No memory devices. " + Services.START_A_BACKEND, c.info().toString(),
                "cpu:0, closed after its lookup, is no error of a look at every device");
    }

    @Test
    void withoutAMonitorTheCommandsSayWhatToStart() throws Exception {
        DeviceCommands c = new DeviceCommands(fixture.framework());
        String expected = "error: No memory monitor is running: start the bundle io.ferrum.memory.monitor";
        assertEquals(expected, c.devices().toString());
        assertEquals(expected, c.info().toString());
        assertEquals(expected, c.pressure().toString());
    }

    @Test
    void infoOfOneDeviceShowsItsNumbers() throws Exception {
        fixture.cpu0.allocate(MiB, CPU0);
        List<String> info = lines(commands().info("cpu:0"));
        assertEquals("cpu:0 (test-arena)", info.get(0));
        assertTrue(info.contains("  allocations   1"), info.toString());
        assertTrue(info.contains("  pressure      LOW"), info.toString());
    }

    /** Issue 17: mem:info shows, under the device's reserved bytes, what each memory type's pool reserved and uses. */
    @Test
    void infoShowsReservedAndUsedPerPool() throws Exception {
        for (MemoryType t : List.of(MemoryType.GENERAL, MemoryType.TENSOR)) { // small pools: both fit the test device
            fixture.cpu0.configurePool(CPU0, t, fixture.cpu0.poolConfig(t).toBuilder().initialSize(4 * MiB)
                    .growthIncrement(4 * MiB).build());
        }
        fixture.cpu0.allocate(MiB, MemoryType.GENERAL, CPU0);
        fixture.cpu0.allocate(64 * 1024, MemoryType.TENSOR, CPU0);
        fixture.cpu0.allocate(64 * 1024, MemoryType.TENSOR, CPU0);
        List<String> info = lines(commands().info("cpu:0"));
        int reserved = info.indexOf(info.stream().filter(l -> l.startsWith("  reserved ")).findFirst().orElseThrow());
        Map<io.ferrum.memory.api.MemoryType, Long> byType = fixture.cpu0.reservedByType();
        assertEquals("    GENERAL     " + Sizes.human(byType.get(MemoryType.GENERAL)) + " reserved, 1.0 MiB in 1 block",
                info.get(reserved + 1), info.toString());
        assertEquals("    TENSOR      " + Sizes.human(byType.get(MemoryType.TENSOR)) + " reserved, 128.0 KiB in 2 blocks",
                info.get(reserved + 2), info.toString());
        assertTrue(info.get(reserved + 3).startsWith("  allocations   3"), info.toString());
    }

    /**
     * mem:info read the device's figures (its reserved line) and each pool's reserved bytes (the lines
     * under it) in two calls: a pool that grew in between showed under a reserved line that did not
     * hold it (GENERAL 4 MiB and TENSOR 4 MiB under "reserved 4.0 MiB"). The lines under the device's
     * reserved bytes add up to them. Forced: another thread grows the TENSOR pool just after the
     * device's figures were read.
     */
    @Test
    void thePoolsReservedLinesAddUpToTheDevicesReservedLine() throws Exception {
        for (MemoryType t : List.of(MemoryType.GENERAL, MemoryType.TENSOR)) {
            fixture.cpu0.configurePool(CPU0, t, fixture.cpu0.poolConfig(t).toBuilder().initialSize(4 * MiB)
                    .growthIncrement(4 * MiB).build());
        }
        fixture.cpu0.allocate(MiB, MemoryType.GENERAL, CPU0);
        java.util.concurrent.atomic.AtomicBoolean once = new java.util.concurrent.atomic.AtomicBoolean();
        DeviceMemoryManager growing = (DeviceMemoryManager) Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {DeviceMemoryManager.class}, (proxy, m, args) -> {
                    Object answer = m.invoke(fixture.cpu0, args);
                    if (m.getName().equals("memoryInfo") && once.compareAndSet(false, true)) {
                        Thread other = new Thread(() -> fixture.cpu0.allocate(64 * 1024, MemoryType.TENSOR, CPU0), "grows");
                        other.start();
                        other.join();
                    }
                    return answer;
                });
        DeviceCommands c = commands();
        c.monitor = (GlobalMemoryMonitor) Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {GlobalMemoryMonitor.class}, (proxy, m, args) ->
                        m.getName().equals("manager") && CPU0.equals(args[0]) ? java.util.Optional.of(growing)
                                : m.invoke(fixture.directory, args));
        List<String> info = lines(c.info("cpu:0"));
        assertTrue(once.get(), "the TENSOR pool grew while mem:info ran");
        assertTrue(info.contains("  reserved      8.0 MiB"), "GENERAL's 4 MiB and TENSOR's 4 MiB under it: " + info);
        assertTrue(info.contains("    TENSOR      4.0 MiB reserved, 64.0 KiB in 1 block"), info.toString());
    }

    /**
     * A mapping across two devices whose source handle was freed: its block lies in cpu:0's MAPPED
     * pool, named only by the alias cpu:1 issued, and each manager lists the handles it issued. The
     * pool lines of cpu:1 said "MAPPED     not reported reserved, 4.0 KiB in 1 block", as if cpu:1
     * held a block its manager did not account for (its allocations read 0), where the block is
     * cpu:0's memory named by a handle of cpu:1's.
     */
    @Test
    void infoSaysABlockNamedByAMappingsHandleIsAnotherDevicesMemory() throws Exception {
        Map<io.ferrum.memory.api.Device, PooledMemoryManager> running = new java.util.concurrent.ConcurrentHashMap<>();
        PoolSettings settings = PoolSettings.defaults().withPeers(running::get);
        try (PooledMemoryManager a = PooledMemoryManager.create(new ArenaUpstream(CPU0, 64 * MiB, true),
                MemoryManagerConfig.defaults(), settings, null);
             PooledMemoryManager b = PooledMemoryManager.create(new ArenaUpstream(ShellFixture.CPU1, 64 * MiB, true),
                MemoryManagerConfig.defaults(), settings, null)) {
            running.put(CPU0, a);
            running.put(ShellFixture.CPU1, b);
            var mapping = a.createMapping(CPU0, ShellFixture.CPU1, 4096);
            a.deallocate(mapping.source());
            DeviceCommands c = new DeviceCommands(fixture.framework());
            c.monitor = new ShellFixture.Directory(Map.of(CPU0, a, ShellFixture.CPU1, b));

            List<String> peer = lines(c.info("cpu:1"));
            int reserved = peer.indexOf(peer.stream().filter(l -> l.startsWith("  reserved ")).findFirst().orElseThrow());
            assertEquals("    MAPPED      none reserved here, 4.0 KiB in 1 block of another device (a mapping's handle)",
                    peer.get(reserved + 1), peer.toString());
            assertTrue(peer.contains("  allocations   0"), peer.toString());
        }
    }

    /**
     * A utilisation just under a pressure threshold (94.97 % of the 64 MiB device: HIGH, not CRITICAL)
     * is shown as under it: rounded to one decimal it read 95.0 %, the threshold of CRITICAL, next
     * to HIGH, in mem:info, mem:pressure and mem:devices alike.
     */
    @Test
    void aUtilisationJustUnderAThresholdIsNeverShownAtIt() throws Exception {
        long total = fixture.cpu0.memoryInfo().totalBytes();
        long size = (long) (total * 0.9497) & -256L; // a multiple of the pool's alignment: used is exactly this
        fixture.cpu0.allocate(size, CPU0);
        assertEquals(size, fixture.cpu0.memoryInfo().usedBytes());
        DeviceCommands c = commands();
        List<String> info = lines(c.info("cpu:0"));
        assertTrue(info.contains("  pressure      HIGH"), info.toString());
        assertTrue(info.stream().anyMatch(l -> l.startsWith("  used ") && l.endsWith("(94.9%)")), info.toString());
        List<String> pressure = lines(c.pressure());
        assertTrue(pressure.get(1).matches("cpu:0 .* 94\\.9% +HIGH"), pressure.toString());
        // Rounded down, but not below a value binary fractions put a hair under its decimal one.
        assertEquals("1.1%", DeviceCommands.percent(11.0 / 1000 * 100)); // 1.0999999999999999
        assertEquals("95.0%", DeviceCommands.percent(95.0));
    }

    @Test
    void infoWithoutADeviceShowsEveryDevice() throws Exception {
        List<String> info = lines(commands().info());
        assertEquals(2, info.stream().filter(l -> l.endsWith("(test-arena)")).count(), info.toString());
    }

    @Test
    void anUnknownOrMalformedDeviceIsOneErrorLineNamingIt() throws Exception {
        DeviceCommands c = commands();
        assertEquals("error: No device cpu:7 is registered; mem:devices lists the devices there are",
                c.info("cpu:7").toString());
        assertTrue(c.info("gpu:x").toString().startsWith("error: Invalid device 'gpu:x'"), c.info("gpu:x").toString());
    }

    @Test
    void pressureListsEachDeviceAndEndsWithTheOverallLevel() throws Exception {
        List<String> lines = lines(commands().pressure());
        assertTrue(lines.get(0).startsWith("DEVICE"), lines.toString());
        assertEquals(4, lines.size(), lines.toString());
        assertEquals("overall: LOW", lines.get(3));
    }

    /**
     * mem:pressure's overall level sums up the rows above it. It was read anew (the monitor's
     * globalMemoryPressure, a second reading of every device), so a device that changed between the
     * two readings showed LOW in its row and HIGH overall. Forced: right after the rows' reading,
     * another thread takes cpu:0 to HIGH.
     */
    @Test
    void theOverallPressureIsThatOfTheRowsAboveIt() throws Exception {
        long total = fixture.cpu0.memoryInfo().totalBytes();
        GlobalMemoryMonitor real = fixture.directory;
        GlobalMemoryMonitor between = (GlobalMemoryMonitor) Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {GlobalMemoryMonitor.class}, (proxy, method, args) -> {
                    Object result = method.invoke(real, args);
                    if (method.getName().equals("globalMemoryInfo")) {
                        Thread other = new Thread(() -> fixture.cpu0.allocate(total * 9 / 10 & -256L, CPU0), "allocates");
                        other.start();
                        other.join();
                    }
                    return result;
                });
        DeviceCommands c = new DeviceCommands(fixture.framework());
        c.monitor = between;
        List<String> lines = lines(c.pressure());
        assertTrue(lines.get(1).startsWith("cpu:0") && lines.get(1).endsWith("LOW"), lines.toString());
        assertEquals("overall: LOW", lines.get(3), "the rows above all say LOW: " + lines);
    }

    @Test
    void streamsLeaveOutADeviceWhoseStreamManagerClosesWhileTheyAreListed() throws Exception {
        BundleContext context = fixture.framework();
        try (HostStreamManager cpu0 = new HostStreamManager(CPU0); HostStreamManager cpu1 = new HostStreamManager(ShellFixture.CPU1)) {
            StreamHandle busy = cpu0.createStream(CPU0);
            // cpu:1's backend stops between the command's look at its streams and at their state.
            StreamManager stopping = (StreamManager) Proxy.newProxyInstance(StreamManager.class.getClassLoader(),
                    new Class<?>[] {StreamManager.class}, (proxy, m, args) -> {
                        Object answer;
                        try {
                            answer = m.invoke(cpu1, args);
                        } catch (java.lang.reflect.InvocationTargetException e) {
                            throw e.getCause();
                        }
                        if (m.getName().equals("streams")) {
                            cpu1.close();
                        }
                        return answer;
                    });
            context.registerService(StreamManager.class, cpu0, null);
            context.registerService(StreamManager.class, stopping, null);
            Reply r = commands().streams();
            Table t = assertInstanceOf(Table.class, r, "cpu:1, gone, is no error of a listing: " + r);
            assertEquals(List.of("cpu:0", "cpu:0"), t.column("DEVICE"));
            assertEquals(List.of("default", Long.toString(busy.id())), t.column("STREAM"));
        }
    }

    @Test
    void streamsLeaveOutAStreamDestroyedWhileTheyAreListed() throws Exception {
        BundleContext context = fixture.framework();
        try (HostStreamManager cpu0 = new HostStreamManager(CPU0)) {
            StreamHandle kept = cpu0.createStream(CPU0);
            StreamHandle gone = cpu0.createStream(CPU0);
            // Another bundle's code destroys a stream between the command's look at the streams and at their state.
            StreamManager churning = (StreamManager) Proxy.newProxyInstance(StreamManager.class.getClassLoader(),
                    new Class<?>[] {StreamManager.class}, (proxy, m, args) -> {
                        Object answer;
                        try {
                            answer = m.invoke(cpu0, args);
                        } catch (java.lang.reflect.InvocationTargetException e) {
                            throw e.getCause();
                        }
                        if (m.getName().equals("streams")) {
                            cpu0.destroyStream(gone);
                        }
                        return answer;
                    });
            context.registerService(StreamManager.class, churning, null);
            Reply r = commands().streams();
            Table t = assertInstanceOf(Table.class, r, "a stream gone meanwhile is no error of a listing: " + r);
            assertEquals(List.of("default", Long.toString(kept.id())), t.column("STREAM"));
        }
    }

    @Test
    void streamsSayWhenNoStreamManagerIsRegistered() throws Exception {
        assertEquals("No stream managers are registered.", commands().streams().toString());
    }
}
