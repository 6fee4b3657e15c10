package io.ferrum.memory.shell;

import static io.ferrum.memory.shell.ShellFixture.CPU0;
import static io.ferrum.memory.shell.ShellFixture.MiB;
import static io.ferrum.memory.shell.ShellFixture.lines;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

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
        assertTrue(info.contains("  allocations  1"), info.toString());
        assertTrue(info.contains("  pressure     LOW"), info.toString());
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

    @Test
    void streamsSayWhenNoStreamManagerIsRegistered() throws Exception {
        assertEquals("No stream managers are registered.", commands().streams().toString());
    }
}
