package io.ferrum.memory.itests;

import static org.junit.Assert.assertArrayEquals;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;
import static org.ops4j.pax.exam.CoreOptions.options;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Hashtable;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import javax.inject.Inject;

import org.apache.felix.service.command.CommandProcessor;
import org.apache.felix.service.command.CommandSession;
import org.apache.felix.service.command.Converter;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.ops4j.pax.exam.Configuration;
import org.ops4j.pax.exam.Option;
import org.ops4j.pax.exam.junit.PaxExam;
import org.ops4j.pax.exam.spi.reactors.ExamReactorStrategy;
import org.ops4j.pax.exam.spi.reactors.PerMethod;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.ServiceReference;
import org.osgi.framework.wiring.FrameworkWiring;
import org.osgi.service.cm.ConfigurationAdmin;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.AllocationStrategy;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryRouter;

/** The mem:* commands through a real Gogo runtime, and a backend installed into a running framework. */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerMethod.class)
public class ShellIT {

    @Inject
    private BundleContext context;

    @Inject
    private CommandProcessor processor;

    @Inject
    private GlobalMemoryMonitor monitor;

    @Configuration
    public Option[] config() {
        return options(FerrumOptions.wholeSystem(), FerrumOptions.reactorBundle("gogo"), FerrumOptions.reactorBundle("shell"),
                FerrumOptions.testSupport());
    }

    /** @return what the Gogo shell shows for {@code command}: what it printed, then its value as the shell formats it */
    private String run(String command) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrintStream ps = new PrintStream(out, true, StandardCharsets.UTF_8);
        try (CommandSession session = processor.createSession(new ByteArrayInputStream(new byte[0]), ps, ps)) {
            Object value = session.execute(command);
            if (value != null) {
                ps.println(session.format(value, Converter.INSPECT));
            }
        }
        return out.toString(StandardCharsets.UTF_8);
    }

    @Test
    public void commandsAllocateFillDumpAndFree() throws Exception {
        Await.until("cpu:0 in the monitor", () -> monitor.devices().contains(Device.cpu()));
        String devices = run("mem:devices");
        assertTrue(devices, devices.startsWith("DEVICE  BACKEND"));
        assertTrue(devices, devices.contains("cpu:0") && devices.contains("ffm"));

        String alloc = run("mem:alloc 100");
        Matcher m = Pattern.compile("(0x[0-9a-f]{16}) on cpu:0").matcher(alloc);
        assertTrue(alloc, m.find());
        String handle = m.group(1);
        assertTrue(run("mem:fill " + handle + " 0xab").contains("filled 100 bytes"));
        String dump = run("mem:dump " + handle + " 96");
        assertEquals(dump, "00000060  ab ab ab ab", dump.substring(0, 21));
        assertTrue("only the 4 bytes left in the block are shown: " + dump, dump.strip().endsWith("|....|"));
        assertTrue(run("mem:handles cpu:0").contains(handle));
        String info = run("mem:info cpu:0");
        assertTrue(info, Pattern.compile("\\n    GENERAL +[0-9.]+ [KMGT]?i?B reserved, 100 B in 1 block").matcher(info).find());
        assertTrue(run("mem:free " + handle).contains("freed " + handle));
        assertFalse(run("mem:handles").contains(handle));
    }

    /**
     * An Error of a command (here a router of the test's that overflows its stack on copy) is one line
     * saying it is an internal error of that command, and its stack trace goes to the Log Service once,
     * from the shell's bundle; before, Gogo got the Error and the line was its message alone.
     */
    @Test
    public void anErrorOfACommandIsOneLineAndOneLogEntryWithItsStackTrace() throws Exception {
        Await.until("cpu:0 in the monitor", () -> monitor.devices().contains(Device.cpu()));
        MemoryRouter real = context.getService(context.getServiceReference(MemoryRouter.class));
        MemoryRouter overflowing = (MemoryRouter) java.lang.reflect.Proxy.newProxyInstance(
                MemoryRouter.class.getClassLoader(), new Class<?>[] {MemoryRouter.class}, (proxy, method, args) -> {
                    if (method.getName().equals("copy")) {
                        throw new StackOverflowError();
                    }
                    try {
                        return method.invoke(real, args);
                    } catch (java.lang.reflect.InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        ServiceReference<org.osgi.service.log.LogReaderService> logRef =
                context.getServiceReference(org.osgi.service.log.LogReaderService.class);
        org.osgi.service.log.LogReaderService logs = context.getService(logRef);
        List<org.osgi.service.log.LogEntry> entries = new java.util.concurrent.CopyOnWriteArrayList<>();
        org.osgi.service.log.LogListener listener = entry -> {
            if (entry.getBundle() != null && "io.ferrum.memory.shell".equals(entry.getBundle().getSymbolicName())) {
                entries.add(entry);
            }
        };
        logs.addLogListener(listener);
        var registration = context.registerService(MemoryRouter.class, overflowing,
                new Hashtable<>(Map.of(org.osgi.framework.Constants.SERVICE_RANKING, Integer.MAX_VALUE)));
        try {
            Matcher m = Pattern.compile("(0x[0-9a-f]{16}) on cpu:0").matcher(run("mem:alloc 64"));
            assertTrue(m.find());
            String h = m.group(1);
            assertEquals("error: internal error in mem:copy: StackOverflowError; see the log",
                    run("mem:copy " + h + " " + h + " 4 0 8").strip());
            Await.until("the shell's log entry", () -> !entries.isEmpty());
            assertEquals(1, entries.size());
            assertEquals("mem:copy failed with an internal error", entries.get(0).getMessage());
            assertTrue(String.valueOf(entries.get(0).getException()),
                    entries.get(0).getException() instanceof StackOverflowError);
        } finally {
            registration.unregister();
            logs.removeLogListener(listener);
        }
    }

    @Test
    public void writeTakesHexOrTextAndReadShowsTheRange() throws Exception {
        Await.until("cpu:0 in the monitor", () -> monitor.devices().contains(Device.cpu()));
        Matcher m = Pattern.compile("(0x[0-9a-f]{16}) on cpu:0").matcher(run("mem:alloc 64"));
        assertTrue(m.find());
        String h = m.group(1);
        run("mem:fill " + h + " 0");
        assertEquals("wrote 4 bytes to " + h + " at offset 0", run("mem:write " + h + " 0 de ad be ef").strip());
        assertEquals("wrote 4 bytes to " + h + " at offset 4", run("mem:write " + h + " 4 0xCAFEBABE").strip());
        assertEquals("wrote 11 bytes to " + h + " at offset 8", run("mem:write " + h + " 8 \"hello world\"").strip());
        assertEquals("wrote 2 bytes to " + h + " at offset 19", run("mem:write --text " + h + " 19 ab").strip());
        String read = run("mem:read " + h + " 0 21").strip();
        assertTrue(read, read.startsWith("00000000  de ad be ef ca fe ba be 68 65 6c 6c 6f 20 77 6f  |........hello wo|"));
        assertTrue(read, read.endsWith("00000010  72 6c 64 61 62" + " ".repeat(35) + "|rldab|"));
        String outside = run("mem:write " + h + " 62 01 02 03").strip();
        assertTrue(outside, outside.startsWith("error: A write of 3 bytes at offset 62 falls outside block " + h));
        assertTrue(run("mem:read " + h + " 0 21").strip().equals(read));
    }

    @Test
    public void aFileOfSeveralMiBLoadsIntoANewBlockAndSavesBackByteForByte() throws Exception {
        Await.until("cpu:0 in the monitor", () -> monitor.devices().contains(Device.cpu()));
        Path dir = Files.createTempDirectory("shell-it");
        try {
            byte[] weights = new byte[(5 << 20) + 77];
            new Random(15).nextBytes(weights);
            Path in = Files.write(dir.resolve("weights.bin"), weights);
            String loaded = run("mem:load '" + in + "' --device cpu:0 --type TENSOR");
            Matcher m = Pattern.compile("^loaded 5\\.0 MiB \\(5242957 bytes\\) from " + Pattern.quote(in.toString())
                    + " into new block (0x[0-9a-f]{16}) on cpu:0 in ").matcher(loaded);
            assertTrue(loaded, m.find());
            String handle = m.group(1);
            String handles = run("mem:handles cpu:0");
            assertTrue(handles, Pattern.compile(handle + "\\s+cpu:0\\s+5\\.0 MiB\\s+TENSOR").matcher(handles).find());

            Path out = dir.resolve("saved.bin");
            String saved = run("mem:save " + handle + " '" + out + "'");
            assertTrue(saved, saved.startsWith("saved 5.0 MiB (5242957 bytes) of " + handle + " on cpu:0 to " + out + " in "));
            assertArrayEquals(weights, Files.readAllBytes(out));

            String tooLarge = run("mem:load '" + in + "' " + run("mem:alloc 1k").split(" ")[0]).strip();
            assertTrue(tooLarge, tooLarge.startsWith("error: File " + in + " (5242957 bytes) does not fit in block "));
            assertTrue(run("mem:free " + handle).contains("freed " + handle));
        } finally {
            try (var files = Files.list(dir)) {
                for (Path p : files.toList()) {
                    Files.delete(p);
                }
            }
            Files.delete(dir);
        }
    }

    @Test
    public void badInputIsOneClearLineAndTheShellGoesOn() throws Exception {
        Await.until("cpu:0 in the monitor", () -> monitor.devices().contains(Device.cpu()));
        assertEquals("error: Invalid size '12parsecs': use bytes with an optional unit, e.g. 4096, 64k, 64KiB, 512MiB, 2g",
                run("mem:alloc 12parsecs").strip());
        String freed = run("mem:free 0x0000000000000001").strip();
        assertTrue(freed, freed.startsWith("error: Handle 0x0000000000000001"));
        assertTrue(run("mem:info gpu:x").startsWith("error: Invalid device 'gpu:x'"));
        assertTrue(run("mem:pool cpu:0 GENERAL maxSize=1k initialSize=2k").startsWith("error: Invalid pool configuration"));
        String align = run("mem:alloc --align -8 4k").strip();
        assertTrue(align, align.startsWith("error: Invalid alignment '-8': "));
        String h = run("mem:alloc 64").split(" ")[0];
        String offset = run("mem:dump " + h + " -1").strip();
        assertTrue(offset, offset.startsWith("error: Invalid offset '-1': "));
        String length = run("mem:dump " + h + " 0 -1").strip();
        assertTrue(length, length.startsWith("error: Invalid length '-1': "));
        String unmap = run("mem:unmap " + h).strip();
        assertTrue(unmap, unmap.endsWith("is not mapped; map it with mem:map before mem:unmap"));
        assertTrue(run("mem:free " + h).contains("freed"));
        assertTrue("the shell still works", run("mem:pressure").contains("overall: LOW"));
    }

    /**
     * Issue 17: a missing or extra word, or an unknown option, is one error line with the command's
     * usage, through Gogo's own method matching (no "Cannot coerce"), and allocates nothing; words
     * reach the command as typed (Gogo would make 1e3 the number 1000.0).
     */
    @Test
    public void aWrongCallIsOneErrorLineWithTheUsage() throws Exception {
        Await.until("cpu:0 in the monitor", () -> monitor.devices().contains(Device.cpu()));
        String usage = "; usage: mem:alloc [-t TYPE] [-a ALIGN] SIZE [DEVICE]";
        assertEquals("error: mem:alloc is missing SIZE" + usage, run("mem:alloc").strip());
        assertEquals("error: Unknown option --size for mem:alloc; a value starting with - goes after --" + usage,
                run("mem:alloc --size 4k").strip());
        assertEquals("error: mem:alloc takes at most 2 arguments, not also '1'" + usage, run("mem:alloc 4k cpu:0 1").strip());
        assertEquals("error: Option -t of mem:alloc needs a value (TYPE)" + usage, run("mem:alloc 4k -t").strip());
        assertEquals("error: mem:free is missing HANDLE; usage: mem:free HANDLE", run("mem:free").strip());
        assertEquals("error: mem:devices takes no arguments, not also 'now'; usage: mem:devices", run("mem:devices now").strip());
        assertEquals("error: mem:dump is missing HANDLE; usage: mem:dump HANDLE [OFFSET [LENGTH]]", run("mem:dump").strip());
        assertTrue(run("mem:alloc 1e3").strip().startsWith("error: Invalid size '1e3'"));
        assertEquals("No live blocks.", run("mem:handles").strip());
    }

    /** Issue 17: what mem:alloc returns, kept in a variable, is a handle to every other command. */
    @Test
    public void theValueOfMemAllocIsAHandleForTheOtherCommands() throws Exception {
        Await.until("cpu:0 in the monitor", () -> monitor.devices().contains(Device.cpu()));
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrintStream ps = new PrintStream(out, true, StandardCharsets.UTF_8);
        try (CommandSession session = processor.createSession(new ByteArrayInputStream(new byte[0]), ps, ps)) {
            session.execute("h = mem:alloc --type=TENSOR 1m");
            String h = session.get("h").toString().split(" ")[0];
            assertTrue(Pattern.compile(h + "\\s+cpu:0\\s+1\\.0 MiB\\s+TENSOR").matcher(run("mem:handles")).find());
            assertEquals("filled 1.0 MiB (1048576 bytes) of " + h + " with 0x07", session.execute("mem:fill $h 7").toString());
            assertEquals("wrote 2 bytes to " + h + " at offset 0", session.execute("mem:write $h 0 ab cd").toString());
            assertTrue(session.execute("mem:dump $h 0 4").toString().startsWith("00000000  ab cd 07 07"));
            assertEquals("freed " + h, session.execute("mem:free $h").toString());
        }
        assertEquals("No live blocks.", run("mem:handles").strip());
    }

    /** Issue 17: a command with nothing to do says so: no devices, or a dump at a block's end. */
    @Test
    public void withNothingToDoTheCommandsSaySo() throws Exception {
        Await.until("cpu:0 in the monitor", () -> monitor.devices().contains(Device.cpu()));
        String h = run("mem:alloc 64").split(" ")[0];
        assertEquals("Nothing to show: offset 64 is the end of " + h + " (64 bytes)", run("mem:dump " + h + " 64").strip());
        assertTrue(run("mem:free " + h).contains("freed"));
        Await.installed(context, "io.ferrum.memory.cpu").uninstall();
        Await.until("cpu:0 gone", () -> !monitor.devices().contains(Device.cpu()));
        for (String command : new String[] {"mem:info", "mem:pressure", "mem:defrag", "mem:gc"}) {
            String out = run(command).strip();
            assertTrue(command + ": " + out, out.startsWith("No memory devices") && !out.contains("overall"));
        }
    }

    @Test
    public void strategiesCanBeListedAndSwitched() throws Exception {
        Await.until("best-fit", () -> monitor.devices().contains(Device.cpu()));
        String list = run("mem:strategies");
        assertTrue(list, Pattern.compile("\\*\\s+best-fit").matcher(list).find());
        assertEquals("active strategy: round-robin", run("mem:strategy round-robin").strip());
        assertTrue(Pattern.compile("\\*\\s+round-robin").matcher(run("mem:strategies")).find());
    }

    @Test
    public void aBackendInstalledAtRuntimeAppearsAndUninstallingItReleasesItsDevice() throws Exception {
        Bundle cpu = Await.installed(context, "io.ferrum.memory.cpu");
        cpu.uninstall();
        assertTrue(run("mem:devices").contains("No memory devices"));

        Bundle again = context.installBundle(new File(System.getProperty("ferrum.bundle.cpu")).toURI().toString());
        again.start();
        Await.until("cpu:0 back", () -> monitor.devices().contains(Device.cpu()));
        assertTrue(run("mem:devices").contains("cpu:0"));
        assertTrue(run("mem:backends").contains("ACTIVE"));
        DeviceMemoryManager m = monitor.manager(Device.cpu()).orElseThrow();
        MemoryHandle h = m.allocate(1 << 20, Device.cpu());

        again.uninstall();
        Await.until("cpu:0 gone", () -> !monitor.devices().contains(Device.cpu()));
        assertTrue(run("mem:devices").contains("No memory devices"));
        try {
            m.deallocate(h);
            throw new AssertionError("the uninstalled backend's manager must refuse work");
        } catch (DeviceUnavailableException expected) {
            assertEquals(Device.cpu(), expected.device());
        }
    }

    /**
     * Issue 17: mem:backends tells a bundle that is merely installed (nothing missing: start it) from
     * one that cannot resolve, and names the requirement nothing provides (Felix has no 'diag').
     */
    @Test
    public void backendsNameTheRealStateAndTheMissingRequirement() throws Exception {
        Await.installed(context, "io.ferrum.memory.cpu").uninstall();
        Bundle installed = context.installBundle(new File(System.getProperty("ferrum.bundle.cpu")).toURI().toString());
        String merely = run("mem:backends");
        assertTrue(merely, merely.contains("installed, not started (nothing is missing): start it with 'start "
                + installed.getBundleId() + "'"));
        assertFalse(merely, merely.contains("diag"));

        installed.uninstall();
        Await.installed(context, "io.ferrum.memory.pool").uninstall();
        CountDownLatch refreshed = new CountDownLatch(1);
        context.getBundle(0).adapt(FrameworkWiring.class).refreshBundles(null, e -> refreshed.countDown());
        assertTrue(refreshed.await(Await.TIMEOUT_MS, TimeUnit.MILLISECONDS));
        context.installBundle(new File(System.getProperty("ferrum.bundle.cpu")).toURI().toString());
        String missing = run("mem:backends");
        assertTrue(missing, missing.contains("installed, not resolved: nothing provides osgi.wiring.package")
                && missing.contains("io.ferrum.memory.pool"));
    }

    /**
     * Issue 17: a device configuration with a bad value (a size with an unknown unit, a zeroing that
     * does not exist) creates no device and is shown in mem:backends with its reason; once valid, the
     * device appears; a change that needs a restart while a block is live is refused and shown too.
     */
    @Test
    public void rejectedDeviceConfigurationsAreShownAndChangeNothing() throws Exception {
        ConfigurationAdmin ca = context.getService(context.getServiceReference(ConfigurationAdmin.class));
        org.osgi.service.cm.Configuration c = ca.createFactoryConfiguration("io.ferrum.memory.cpu.device", "?");
        Hashtable<String, Object> p = new Hashtable<>();
        p.put("index", "1");
        p.put("capacity", "12XB");
        p.put("zeroing", "bogus");
        c.update(p);
        String backends = "";
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Await.TIMEOUT_MS);
        while (!backends.contains("Invalid capacity '12XB'") && System.nanoTime() < deadline) {
            Thread.sleep(25);
            backends = run("mem:backends");
        }
        assertTrue(backends, backends.contains("rejected configuration: Configuration of cpu:1 refused: Invalid capacity '12XB':"
                + " use bytes with an optional unit, e.g. 4096, 64k, 64KiB, 512MiB, 2g; Invalid zeroing 'bogus': use none,"
                + " on-allocate or on-free; no device was created"));
        assertFalse(run("mem:devices").contains("cpu:1"));

        p.put("capacity", "64m");
        p.put("zeroing", "none");
        c.update(p);
        Await.until("cpu:1", () -> monitor.devices().contains(Device.cpu(1)));
        Await.until("the rejection gone", () -> !unchecked("mem:backends").contains("rejected configuration"));
        MemoryHandle h = monitor.manager(Device.cpu(1)).orElseThrow().allocate(1 << 20, Device.cpu(1));

        p.put("capacity", "32m");
        c.update(p);
        Await.until("the refusal", () -> unchecked("mem:backends").contains("1 live block"));
        DeviceMemoryManager m = monitor.manager(Device.cpu(1)).orElseThrow();
        assertTrue("the block survived", m.owns(h));
        assertEquals(64L << 20, m.memoryInfo().totalBytes());
        assertTrue(run("mem:backends").contains("cpu:1 keeps running as it was"));
    }

    private String unchecked(String command) {
        try {
            return run(command);
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * The shell's form of what {@code MonitorIT.everyClassOfTheMonitorBundleACallCouldNeedIsDefinedOnceTheRouterServes}
     * checks: a command runs on Gogo's thread and goes on after the shell is uninstalled, when its
     * class loader defines nothing more ({@link #aCommandRunningWhileTheShellIsUninstalledEndsWithItsOwnReply}).
     * So once Gogo offers the commands, before any of them ran, every class of the shell is defined (a
     * failure's {@code Reply$Failure}, a load's {@code FileTransfer}, ...). See {@link UndefinedClasses}
     * (only Equinox can say what a loader defined; Felix: skipped).
     */
    @Test
    public void everyClassOfTheShellIsDefinedOnceGogoOffersItsCommands() throws Exception {
        Bundle shell = commandsOffered();
        assertEquals("classes of the shell a command could still need after its uninstall", List.of(),
                UndefinedClasses.of(shell, 18));
    }

    /**
     * The same across bundles: a command's first use of a class of a package the shell imports has the
     * shell's loader ask the exporter's, which Equinox refuses while the exporter (the api, Gogo) is
     * being uninstalled, though it defined the class long before. So once Gogo offers the commands, the
     * shell's loader holds every imported class a class of the shell names. See {@link
     * UndefinedClasses#ofImportsNamed}; Felix: skipped.
     */
    @Test
    public void everyImportedClassTheShellNamesIsLoadedOnceGogoOffersItsCommands() throws Exception {
        Bundle shell = commandsOffered();
        assertEquals("imported classes the shell would still ask their exporter for", List.of(),
                UndefinedClasses.ofImportsNamed(shell, null));
    }

    /**
     * A command that runs while the shell is uninstalled ends with its own reply, not a linkage error.
     * Its object goes on after SCR deactivated it (the router it already holds serves it), but no
     * bundle imports from the shell, so both frameworks discard its wiring at the uninstall, and its
     * class loader defines nothing more (what it imports it still gets): each class of the shell the
     * command needs afterwards must be defined already ({@code Reply$Text} for its line). A strategy
     * of the test's holds the command inside the router until the uninstall has returned.
     */
    @Test
    public void aCommandRunningWhileTheShellIsUninstalledEndsWithItsOwnReply() throws Exception {
        Await.until("cpu:0 in the monitor", () -> monitor.devices().contains(Device.cpu()));
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch uninstalled = new CountDownLatch(1);
        AllocationStrategy held = new AllocationStrategy() {
            @Override
            public Optional<Device> selectDevice(long size, AllocationRequirements requirements, List<Device> available,
                                                 Map<Device, MemoryInfo> memoryInfo) {
                entered.countDown();
                try {
                    uninstalled.await(Await.TIMEOUT_MS, TimeUnit.MILLISECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                return available.isEmpty() ? Optional.empty() : Optional.of(available.get(0));
            }

            @Override
            public String name() {
                return "held";
            }
        };
        context.registerService(AllocationStrategy.class, held,
                new Hashtable<>(Map.of(AllocationStrategy.NAME_PROPERTY, "held")));
        ConfigurationAdmin ca = context.getService(context.getServiceReference(ConfigurationAdmin.class));
        ca.getConfiguration("io.ferrum.memory.monitor", "?")
                .update(new Hashtable<>(Map.of("strategy", "held", "samplePeriodMs", 0L)));
        MemoryRouter router = context.getService(context.getServiceReference(MemoryRouter.class));
        Await.until("the held strategy active", () -> router.activeStrategy().equals(Optional.of("held")));

        AtomicReference<String> reply = new AtomicReference<>();
        Thread gogo = new Thread(() -> {
            try {
                reply.set(run("mem:alloc 64").strip());
            } catch (Throwable e) {
                StringBuilder chain = new StringBuilder("threw");
                for (Throwable t = e; t != null; t = t.getCause()) {
                    chain.append(' ').append(t);
                }
                reply.set(chain.toString());
            }
        }, "gogo-command");
        gogo.start();
        assertTrue("mem:alloc reached the strategy", entered.await(Await.TIMEOUT_MS, TimeUnit.MILLISECONDS));
        Bundle shell = Await.installed(context, "io.ferrum.memory.shell");
        shell.uninstall();
        uninstalled.countDown();
        gogo.join(Await.TIMEOUT_MS);
        assertFalse("mem:alloc ended", gogo.isAlive());

        Matcher m = Pattern.compile("(0x[0-9a-f]{16}) on cpu:0").matcher(String.valueOf(reply.get()));
        assertTrue("the command's own reply: " + reply.get(), m.matches());
        router.deallocate(MemoryHandle.parse(m.group(1)));
        assertEquals(0, monitor.manager(Device.cpu()).orElseThrow().handles().size());
    }

    /** @return the shell bundle, once it registered its seven command services (Gogo tracks them) and no command ran */
    private Bundle commandsOffered() throws Exception {
        Bundle shell = Await.installed(context, "io.ferrum.memory.shell");
        Await.until("the shell's seven command services", () -> {
            ServiceReference<?>[] refs = shell.getRegisteredServices();
            return refs != null && refs.length == 7;
        });
        return shell;
    }
}
