package io.ferrum.memory.shell;

import static io.ferrum.memory.shell.ShellFixture.CPU0;
import static io.ferrum.memory.shell.ShellFixture.CPU1;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Proxy;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryType;

class AllocationCommandsTest {
    private static final Pattern ALLOCATED = Pattern.compile("(0x[0-9a-f]{16}) on (cpu:\\d)");

    private final ShellFixture fixture = new ShellFixture();
    private final AllocationCommands commands = new AllocationCommands();

    AllocationCommandsTest() {
        commands.monitor = fixture.directory;
        commands.router = fixture.directory;
    }

    @AfterEach
    void close() throws Exception {
        fixture.close();
    }

    private static MemoryHandle handle(Reply allocated, String device) {
        Matcher m = ALLOCATED.matcher(allocated.toString());
        assertTrue(m.matches(), allocated.toString());
        assertEquals(device, m.group(2));
        return MemoryHandle.parse(m.group(1));
    }

    @Test
    void allocThroughTheRouterAnswersTheHandleAndItsDevice() {
        MemoryHandle h = handle(commands.alloc("64k"), "cpu:0");
        assertEquals(64 * 1024, fixture.cpu0.handleInfo(h).orElseThrow().size());
    }

    @Test
    void allocOnADeviceTakesTypeAndAlignment() {
        MemoryHandle h = handle(commands.alloc("-t", "cache", "-a", "4096", "1m", "cpu:1"), "cpu:1");
        MemoryHandleInfo i = fixture.cpu1.handleInfo(h).orElseThrow();
        assertEquals(MemoryType.CACHE, i.memoryType());
        assertEquals(4096, i.alignment());
        assertEquals(1 << 20, i.size());
    }

    /**
     * A bad value holding control characters (a script's {@code $(printf '\033[2J')}) was named raw in
     * the error line: the terminal took the ESC sequence (cleared, recoloured), and a right-to-left
     * override turned the rest of the line around. Such characters are now shown as Java escapes; a
     * letter outside ASCII stays as it is (a file name may hold one).
     */
    @Test
    void aBadValueIsNamedWithItsControlCharactersEscaped() {
        assertEquals("error: Invalid size '\\u001b[2J12\\u202eB\\u0007\\u009b\\u007f\u00e9': use bytes with an optional"
                + " unit, e.g. 4096, 64k, 64KiB, 512MiB, 2g", commands.alloc("\u001b[2J12\u202eB\u0007\u009b\u007f\u00e9").toString());
        assertTrue(fixture.cpu0.handles().isEmpty() && fixture.cpu1.handles().isEmpty());
    }

    @Test
    void badArgumentsAreOneErrorLineNamingTheValueAndAllocateNothing() {
        assertEquals("error: Invalid size '12parsecs': use bytes with an optional unit, e.g. 4096, 64k, 64KiB, 512MiB, 2g",
                commands.alloc("12parsecs").toString());
        assertEquals("error: Invalid memory type 'BOGUS': use GENERAL, TENSOR, CACHE, TEMPORARY, PINNED or MAPPED",
                commands.alloc("-t", "BOGUS", "4096").toString());
        assertEquals("error: No device cpu:8 is registered; mem:devices lists the devices there are",
                commands.alloc("4096", "cpu:8").toString());
        assertTrue(fixture.cpu0.handles().isEmpty() && fixture.cpu1.handles().isEmpty());
    }

    /** Issue 17: a bad number names the argument it was given for, not "size", in every command. */
    @Test
    void aBadNumberNamesItsArgument() throws Exception {
        String h = fixture.cpu0.allocate(100, CPU0).toString();
        BytesCommands bytes = new BytesCommands();
        bytes.router = fixture.directory;
        MaintenanceCommands maintenance = new MaintenanceCommands();
        maintenance.monitor = fixture.directory;
        FileCommands files = new FileCommands();
        files.router = fixture.directory;
        Map<String, Reply> answers = new LinkedHashMap<>();
        answers.put("alignment '-8'", commands.alloc("--align", "-8", "4k"));
        answers.put("alignment 'x'", commands.alloc("-a", "x", "4k", "cpu:1"));
        answers.put("offset '-1'", bytes.dump(h, "-1"));
        answers.put("length '-1'", bytes.dump(h, "0", "-1"));
        answers.put("offset 'x'", bytes.read(h, "x", "4"));
        answers.put("length 'y'", bytes.read(h, "0", "y"));
        answers.put("offset '1.5'", bytes.write(h, "1.5", "00"));
        answers.put("source offset '-1'", bytes.copy(h, h, "16", "-1"));
        answers.put("destination offset '-2'", bytes.copy(h, h, "16", "0", "-2"));
        answers.put("size 'z'", bytes.copy(h, h, "z"));
        answers.put("maxSize 'lots'", maintenance.pool("cpu:0", "GENERAL", "maxSize=lots"));
        answers.put("growthIncrement '-1'", maintenance.pool("cpu:0", "GENERAL", "growthIncrement=-1"));
        answers.put("offset '-3'", files.load("any.bin", h, "-3"));
        answers.forEach((what, reply) -> assertTrue(reply.toString().startsWith("error: Invalid " + what + ": use bytes"),
                what + " -> " + reply));
        assertEquals(1, fixture.cpu0.handles().size(), "bad input allocated nothing");
        assertTrue(fixture.cpu1.handles().isEmpty());
    }

    @Test
    void withoutARouterAllocSaysWhatToStart() {
        AllocationCommands alone = new AllocationCommands();
        assertEquals("error: No memory router is running: start the bundle io.ferrum.memory.monitor",
                alone.alloc("4096").toString());
    }

    @Test
    void freeReleasesTheBlockAndASecondFreeNamesTheHandle() {
        MemoryHandle h = fixture.cpu0.allocate(4096, CPU0);
        assertEquals("freed " + h, commands.free(h.toString()).toString());
        assertFalse(fixture.cpu0.owns(h));
        String again = commands.free(h.toString()).toString();
        assertTrue(again.startsWith("error: ") && again.contains(h.toString()), again);
    }

    /**
     * Issue 17: mem:handles lists by device, then oldest first, then by handle, whatever order a
     * manager gives (here one that answers fixed blocks in a scrambled order); AGE in s/min/h.
     */
    @Test
    void handlesAreSortedByDeviceThenAgeThenHandle() {
        Instant now = Instant.now();
        MemoryHandle a = new MemoryHandle(0x30), b = new MemoryHandle(0x10), c = new MemoryHandle(0x20);
        List<MemoryHandleInfo> scrambled = List.of(
                new MemoryHandleInfo(c, 64, CPU0, 256, now.minusSeconds(5), false, MemoryType.GENERAL),
                new MemoryHandleInfo(a, 64, CPU0, 256, now.minusSeconds(7200), false, MemoryType.GENERAL),
                new MemoryHandleInfo(b, 64, CPU0, 256, now.minusSeconds(5), false, MemoryType.GENERAL));
        DeviceMemoryManager stub = (DeviceMemoryManager) Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {DeviceMemoryManager.class}, (proxy, method, args) -> method.getName().equals("handles")
                        ? scrambled : method.invoke(fixture.cpu0, args));
        AllocationCommands listing = new AllocationCommands();
        listing.monitor = new ShellFixture.Directory(Map.of(CPU1, fixture.cpu1, CPU0, stub));
        MemoryHandle on1 = fixture.cpu1.allocate(4096, CPU1);
        Table t = assertInstanceOf(Table.class, listing.handles());
        assertEquals(List.of(a.toString(), b.toString(), c.toString(), on1.toString()), t.column("HANDLE"));
        assertEquals("2.0 h", t.column("AGE").get(0));
        assertTrue(t.column("AGE").stream().allMatch(s -> s.matches("\\d+ s|\\d+ min|\\d+\\.\\d h")), t.toString());
    }

    @Test
    void handlesOfEveryDeviceLeaveOutOneThatWentAwayMeanwhile() {
        MemoryHandle a = fixture.cpu0.allocate(4096, CPU0);
        fixture.cpu1.allocate(8192, CPU1);
        commands.monitor = fixture.losingAfterListing(CPU1);
        Table all = assertInstanceOf(Table.class, commands.handles(), "cpu:1, gone, is no error of a listing of every device");
        assertEquals(List.of(a.toString()), all.column("HANDLE"));

        commands.monitor = fixture.closingAfterLookup(CPU0);
        Reply closing = commands.handles();
        assertEquals("No live blocks.", closing.toString(), "cpu:0, closed after its lookup, is no error of a listing");
        assertTrue(commands.handles("cpu:0").toString().startsWith("error: "), "named, it is still refused");
    }

    @Test
    void handlesListsTheLiveBlocksOfEveryDeviceOrOfOne() {
        MemoryHandle a = fixture.cpu0.allocate(4096, CPU0);
        MemoryHandle b = fixture.cpu1.allocate(8192, CPU1);
        Table all = assertInstanceOf(Table.class, commands.handles());
        assertEquals(List.of(a.toString(), b.toString()), all.column("HANDLE"));
        assertEquals(List.of("4.0 KiB", "8.0 KiB"), all.column("SIZE"));
        assertEquals(List.of("no", "no"), all.column("MAPPED"));
        Table one = assertInstanceOf(Table.class, commands.handles("cpu:1"));
        assertEquals(List.of(b.toString()), one.column("HANDLE"));
        fixture.cpu1.deallocate(b);
        assertEquals("No live blocks.", commands.handles("cpu:1").toString());
    }

    /**
     * mem:alloc through the router while the chosen device's backend stops: the block is allocated,
     * then its device goes (and its memory with it) before the router is asked whose it is. The
     * answer was {@code 0x… on ?}, a success line for a block that no longer exists. It now says
     * the block is gone already, in the router's words, as a failure.
     */
    @Test
    void aBlockWhoseDeviceWentAwayAsItWasAllocatedIsNoSuccess() {
        MemoryHandle[] allocated = new MemoryHandle[1];
        commands.router = (io.ferrum.memory.api.MemoryRouter) java.lang.reflect.Proxy.newProxyInstance(
                io.ferrum.memory.api.MemoryRouter.class.getClassLoader(), new Class<?>[] {io.ferrum.memory.api.MemoryRouter.class},
                (proxy, m, args) -> {
                    Object answer;
                    try {
                        answer = m.invoke(fixture.directory, args);
                    } catch (java.lang.reflect.InvocationTargetException e) {
                        throw e.getCause();
                    }
                    if (m.getName().equals("allocate")) {
                        allocated[0] = (MemoryHandle) answer;
                        fixture.directory.remove(ShellFixture.CPU0); // its backend stops just after
                    }
                    return answer;
                });
        String reply = commands.alloc("64k").toString();
        assertEquals("error: " + allocated[0] + " was allocated, but is gone already: Handle " + allocated[0] + " belongs"
                + " to cpu:0, which went away (its backend stopped or its configuration was deleted); its memory was"
                + " released", reply);
    }
}
