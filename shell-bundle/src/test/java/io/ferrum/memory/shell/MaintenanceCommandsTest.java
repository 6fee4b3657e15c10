package io.ferrum.memory.shell;

import static io.ferrum.memory.shell.ShellFixture.MiB;
import static io.ferrum.memory.shell.ShellFixture.lines;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;

class MaintenanceCommandsTest {
    private final ShellFixture fixture = new ShellFixture();
    private final MaintenanceCommands commands = new MaintenanceCommands();

    MaintenanceCommandsTest() {
        commands.monitor = fixture.directory;
    }

    @AfterEach
    void close() throws Exception {
        fixture.close();
    }

    /**
     * A wrong mem:pool call gave the usage "mem:pool DEVICE [TYPE [KEY=VALUE...]]", as if settings
     * needed a type, where its help and docs/SHELL.md say "DEVICE [TYPE] [KEY=VALUE...]" and
     * mem:pool cpu:0 maxSize=2g sets the GENERAL pool.
     */
    @Test
    void theUsageOfAWrongPoolCallIsTheOneItsHelpGives() {
        assertEquals("error: mem:pool is missing DEVICE; usage: mem:pool DEVICE [TYPE] [KEY=VALUE...]",
                commands.pool().toString());
        String set = commands.pool("cpu:0", "initialSize=1m", "maxSize=2m").toString();
        assertTrue(set.contains("cpu:0 GENERAL pool") && set.contains("maxSize          2.0 MiB"), set);
    }

    @Test
    void defragReportsOneLinePerDevice() {
        String one = commands.defrag("cpu:0").toString();
        assertTrue(one.matches("cpu:0: moved \\d+ blocks, freed .+, fragmentation .+% -> .+%, \\d+ ms"), one);
        List<String> all = lines(commands.defrag());
        assertEquals(2, all.size(), all.toString());
        assertTrue(all.get(0).startsWith("cpu:0: ") && all.get(1).startsWith("cpu:1: "), all.toString());
        assertEquals("error: No device cpu:7 is registered; mem:devices lists the devices there are",
                commands.defrag("cpu:7").toString());
    }

    @Test
    void defragOfOneBlockSaysBlock() {
        MemoryHandle a = fixture.cpu0.allocate(MiB, ShellFixture.CPU0);
        fixture.cpu0.allocate(100, ShellFixture.CPU0);
        fixture.cpu0.deallocate(a);
        String one = commands.defrag("cpu:0").toString();
        assertTrue(one.matches("cpu:0: moved 1 block, freed .+, fragmentation .+% -> .+%, \\d+ ms"), one);
    }

    /**
     * mem:defrag rounded the fragmentation to the nearest tenth where mem:devices and mem:info round
     * down: the same ratio, 4.96 %, read 5.0 % in the defragmentation's line and 4.9 % in the device's
     * row just after, and a ratio of 0.05 % read 0.1 % there and 0.0 % in the row.
     */
    @Test
    void defragShowsTheFragmentationAsTheDeviceCommandsShowIt() {
        DeviceMemoryManager reporting = (DeviceMemoryManager) java.lang.reflect.Proxy.newProxyInstance(
                DeviceMemoryManager.class.getClassLoader(), new Class<?>[] {DeviceMemoryManager.class}, (proxy, m, args) ->
                        m.getName().equals("defragment")
                                ? java.util.concurrent.CompletableFuture.completedFuture(
                                        new io.ferrum.memory.api.DefragmentationStats(0, 0, 0, 0.0496, 0.0005))
                                : m.invoke(fixture.cpu0, args));
        commands.monitor = (io.ferrum.memory.api.GlobalMemoryMonitor) java.lang.reflect.Proxy.newProxyInstance(
                io.ferrum.memory.api.GlobalMemoryMonitor.class.getClassLoader(),
                new Class<?>[] {io.ferrum.memory.api.GlobalMemoryMonitor.class}, (proxy, m, args) ->
                        m.getName().equals("manager") && ShellFixture.CPU0.equals(args[0]) ? java.util.Optional.of(reporting)
                                : m.invoke(fixture.directory, args));
        String one = commands.defrag("cpu:0").toString();
        assertTrue(one.contains("fragmentation " + DeviceCommands.percent(4.96) + " -> " + DeviceCommands.percent(0.05)),
                one);
        assertTrue(one.contains("fragmentation 4.9% -> 0.0%"), one);
    }

    @Test
    void gcReportsEveryDeviceInOrder() {
        List<String> all = lines(commands.gc());
        assertEquals(2, all.size(), all.toString());
        assertTrue(all.get(0).startsWith("cpu:0: moved") && all.get(1).startsWith("cpu:1: moved"), all.toString());
    }

    /**
     * The monitor's global GC leaves a device that fails out of its result (the API says so); mem:gc
     * printed the others and dropped it silently. It now names the device and why, and still
     * collects the others.
     */
    @Test
    void gcNamesADeviceThatFailedAndWhyAndStillCollectsTheOthers() {
        fixture.cpu1.close(); // its defragment now fails: the manager is closed
        List<String> all = lines(commands.gc());
        assertEquals(2, all.size(), all.toString());
        assertTrue(all.get(0).startsWith("cpu:0: moved"), all.toString());
        assertTrue(all.get(1).startsWith("error: Collecting cpu:1 failed: ") && all.get(1).contains("closed"),
                all.toString());
    }

    /**
     * mem:defrag of every device stopped at the first device that failed: the whole command was one
     * error line, and the devices after it were not defragmented. Like mem:gc, it now names the
     * device that failed and why, and goes on with the others.
     */
    @Test
    void defragOfEveryDeviceNamesADeviceThatFailedAndGoesOnWithTheOthers() {
        fixture.cpu0.close(); // its defragment now fails: the manager is closed
        List<String> all = lines(commands.defrag());
        assertEquals(2, all.size(), all.toString());
        assertTrue(all.get(0).startsWith("error: Defragmenting cpu:0 failed: ") && all.get(0).contains("closed"),
                all.toString());
        assertTrue(all.get(1).startsWith("cpu:1: moved"), all.toString());
    }

    /**
     * Ctrl-C (the interrupt of the command's thread) while mem:defrag of every device works on the
     * first: it went on with every other device, minutes for large ones, and answered as if nothing
     * had happened. It now stops before the next device, and says which were not defragmented.
     */
    @Test
    void defragOfEveryDeviceInterruptedStopsBeforeTheNextDeviceAndSaysWhich() {
        commands.monitor = (io.ferrum.memory.api.GlobalMemoryMonitor) java.lang.reflect.Proxy.newProxyInstance(
                io.ferrum.memory.api.GlobalMemoryMonitor.class.getClassLoader(),
                new Class<?>[] {io.ferrum.memory.api.GlobalMemoryMonitor.class}, (proxy, m, args) -> {
                    if (m.getName().equals("manager") && ShellFixture.CPU0.equals(args[0])) {
                        Thread.currentThread().interrupt(); // Ctrl-C as cpu:0 is defragmented
                    }
                    try {
                        return m.invoke(fixture.directory, args);
                    } catch (java.lang.reflect.InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        List<String> all;
        try {
            all = lines(commands.defrag());
            assertTrue(Thread.currentThread().isInterrupted(), "the interrupt stays for the shell to see");
        } finally {
            Thread.interrupted();
        }
        assertEquals(2, all.size(), all.toString());
        assertTrue(all.get(0).startsWith("cpu:0: moved"), all.toString());
        assertEquals("error: interrupted: cpu:1 was not defragmented", all.get(1));
    }

    /**
     * Ctrl-C cannot stop the defragmentation of one device (one call of its manager), nor mem:gc
     * (every device at once): each runs to its end, and the answer then says what was done, the
     * interrupt kept for the shell. The thread is interrupted before each command, as Ctrl-C leaves it.
     */
    @Test
    void defragOfOneDeviceAndGcInterruptedRunToTheirEndAndSayWhatTheyDid() {
        for (int i = 0; i < 3; i++) {
            MemoryHandle a = fixture.cpu0.allocate(MiB, ShellFixture.CPU0);
            fixture.cpu0.allocate(100, ShellFixture.CPU0);
            fixture.cpu0.deallocate(a);
            MemoryHandle b = fixture.cpu1.allocate(MiB, ShellFixture.CPU1);
            fixture.cpu1.allocate(100, ShellFixture.CPU1);
            fixture.cpu1.deallocate(b);
        }
        String one;
        List<String> all;
        try {
            Thread.currentThread().interrupt();
            one = commands.defrag("cpu:0").toString();
            assertTrue(Thread.interrupted(), "the interrupt stays for the shell to see");
            Thread.currentThread().interrupt();
            all = lines(commands.gc());
            assertTrue(Thread.currentThread().isInterrupted(), "the interrupt stays for the shell to see");
        } finally {
            Thread.interrupted();
        }
        assertTrue(one.startsWith("cpu:0: moved 3 blocks"), one);
        assertEquals(2, all.size(), all.toString());
        assertTrue(all.get(0).startsWith("cpu:0: moved 0 blocks") && all.get(1).startsWith("cpu:1: moved 3 blocks"),
                all.toString());
    }

    /**
     * An Error of an asynchronous call reaches the command inside a CompletionException: it was shown
     * by its message alone, {@code error: io/ferrum/...}, a class name, and among the lines of
     * mem:gc and mem:defrag of every device as {@code Collecting cpu:0 failed: io/ferrum/...}. It is
     * an internal error as one thrown directly is.
     */
    @Test
    void anErrorOfADefragmentationIsAnInternalErrorLineOfItsDevice() {
        DeviceMemoryManager failing = (DeviceMemoryManager) java.lang.reflect.Proxy.newProxyInstance(
                DeviceMemoryManager.class.getClassLoader(), new Class<?>[] {DeviceMemoryManager.class}, (proxy, m, args) -> {
                    if (m.getName().equals("defragment")) {
                        return java.util.concurrent.CompletableFuture.failedFuture(
                                new NoClassDefFoundError("io/ferrum/memory/pool/internal/Gone"));
                    }
                    try {
                        return m.invoke(fixture.cpu0, args);
                    } catch (java.lang.reflect.InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        commands.monitor = (io.ferrum.memory.api.GlobalMemoryMonitor) java.lang.reflect.Proxy.newProxyInstance(
                io.ferrum.memory.api.GlobalMemoryMonitor.class.getClassLoader(),
                new Class<?>[] {io.ferrum.memory.api.GlobalMemoryMonitor.class}, (proxy, m, args) -> {
                    if (m.getName().equals("manager") && ShellFixture.CPU0.equals(args[0])) {
                        return java.util.Optional.of(failing);
                    }
                    try {
                        return m.invoke(fixture.directory, args);
                    } catch (java.lang.reflect.InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        assertEquals("error: internal error in mem:defrag: NoClassDefFoundError: io/ferrum/memory/pool/internal/Gone;"
                + " see the log", commands.defrag("cpu:0").toString());
        String gone = "error: Collecting cpu:0 failed: internal error: NoClassDefFoundError:"
                + " io/ferrum/memory/pool/internal/Gone (see the log); the other devices went on";
        List<String> all = lines(commands.gc());
        assertEquals(gone, all.get(0), all.toString());
        assertTrue(all.get(1).startsWith("cpu:1: moved"), all.toString());
        all = lines(commands.defrag());
        assertEquals(gone.replace("Collecting", "Defragmenting"), all.get(0), all.toString());
    }

    @Test
    void poolShowsTheGeneralPoolOfADevice() {
        List<String> pool = lines(commands.pool("cpu:0"));
        assertEquals("cpu:0 GENERAL pool", pool.get(0));
        assertEquals(8, pool.size(), pool.toString());
    }

    @Test
    void poolSettingsChangeThePoolAndTheReplyShowsIt() {
        List<String> pool = lines(commands.pool("cpu:0", "GENERAL", "initialSize=4m", "maxSize=128m", "growthIncrement=2m", "stats=off"));
        assertEquals("cpu:0 GENERAL pool", pool.get(0), pool.toString());
        MemoryPoolConfig c = fixture.cpu0.poolConfig(MemoryType.GENERAL);
        assertEquals(128 * MiB, c.maxSize().getAsLong());
        assertEquals(4 * MiB, c.initialSize());
        assertEquals(2 * MiB, c.growthIncrement());
        assertTrue(pool.contains("  maxSize          128.0 MiB"), pool.toString());
        assertTrue(pool.contains("  stats            false"), pool.toString());
        commands.pool("cpu:0", "GENERAL", "maxSize=0");
        assertTrue(fixture.cpu0.poolConfig(MemoryType.GENERAL).maxSize().isEmpty(), "0 means unlimited");
    }

    /** The help says TYPE is GENERAL by default: settings without a type change the GENERAL pool. */
    @Test
    void settingsWithoutATypeChangeTheGeneralPool() {
        List<String> pool = lines(commands.pool("cpu:0", "initialSize=4m", "maxSize=32m", "growthIncrement=2m"));
        assertEquals("cpu:0 GENERAL pool", pool.get(0), pool.toString());
        assertEquals(32 * MiB, fixture.cpu0.poolConfig(MemoryType.GENERAL).maxSize().getAsLong());
        assertEquals(2 * MiB, fixture.cpu0.poolConfig(MemoryType.GENERAL).growthIncrement());
    }

    @Test
    void badSettingsAreOneErrorLineNamingThemAndChangeNothing() {
        MemoryPoolConfig before = fixture.cpu0.poolConfig(MemoryType.GENERAL);
        assertEquals("error: Unknown pool setting 'colour': use initialSize, maxSize, growthIncrement, autoExpansion,"
                + " alignment, preAllocate or stats", commands.pool("cpu:0", "GENERAL", "colour=blue").toString());
        assertEquals("error: Invalid preAllocate 'maybe': use true or false",
                commands.pool("cpu:0", "GENERAL", "preAllocate=maybe").toString());
        assertEquals("error: Invalid setting 'maxSize': use key=value, e.g. maxSize=1g",
                commands.pool("cpu:0", "GENERAL", "maxSize").toString());
        String inconsistent = commands.pool("cpu:0", "GENERAL", "maxSize=1k", "initialSize=2k").toString();
        assertTrue(inconsistent.startsWith("error: Invalid pool configuration"), inconsistent);
        assertTrue(commands.pool("cpu:0", "WEIRD").toString().startsWith("error: Invalid memory type 'WEIRD'"));
        assertEquals(before, fixture.cpu0.poolConfig(MemoryType.GENERAL));
    }

    /** Which was meant? An option given twice is refused (Syntax); a setting given twice was the last one, without a word. */
    @Test
    void aSettingGivenTwiceIsRefusedAndChangesNothing() {
        MemoryPoolConfig before = fixture.cpu0.poolConfig(MemoryType.GENERAL);
        assertEquals("error: Setting maxSize is given twice ('1g', then '2g'): give it once; nothing changed",
                commands.pool("cpu:0", "maxSize=1g", "initialSize=4m", "maxSize=2g").toString());
        assertEquals(before, fixture.cpu0.poolConfig(MemoryType.GENERAL));
    }
}
