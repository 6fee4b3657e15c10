package io.ferrum.memory.shell;

import static io.ferrum.memory.shell.ShellFixture.CPU0;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.OptionalDouble;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;

/** Issue 17: a command with nothing to do, or a figure not measured, says so instead of printing nothing or zero. */
class NothingToDoTest {
    private static final String START = " Start a backend bundle (mem:backends lists them).";

    private final ShellFixture fixture = new ShellFixture();
    private final ShellFixture.Directory none = new ShellFixture.Directory(Map.of());

    @AfterEach
    void close() throws Exception {
        fixture.close();
    }

    @Test
    void withNoDevicesEachCommandOverAllDevicesSaysThereAreNone() throws Exception {
        DeviceCommands devices = new DeviceCommands(fixture.framework());
        devices.monitor = none;
        MaintenanceCommands maintenance = new MaintenanceCommands();
        maintenance.monitor = none;
        assertEquals("No memory devices." + START, devices.info().toString());
        assertEquals("No memory devices: no pressure to show." + START, devices.pressure().toString());
        assertEquals("No memory devices: nothing to defragment." + START, maintenance.defrag().toString());
        assertEquals("No memory devices: nothing to collect." + START, maintenance.gc().toString());
    }

    @Test
    void dumpAtABlocksEndAndAReadOfNothingSaySo() {
        BytesCommands bytes = new BytesCommands();
        bytes.router = fixture.directory;
        MemoryHandle h = fixture.cpu0.allocate(100, CPU0);
        assertEquals("Nothing to show: offset 100 is the end of " + h + " (100 bytes)", bytes.dump(h.toString(), "100").toString());
        assertEquals("Nothing to show: the length is 0", bytes.dump(h.toString(), "0", "0").toString());
        assertEquals("Nothing to show: the length is 0", bytes.read(h.toString(), "0", "0").toString());
    }

    /**
     * mem:copy of 0 bytes answered "copied 0 bytes ...", as if it had copied; it says there was nothing
     * to copy, as mem:read of length 0 does, and still checks the handles and offsets as any copy.
     */
    @Test
    void aCopyOfZeroBytesSaysThereWasNothingToCopyAndStillChecksItsArguments() {
        BytesCommands bytes = new BytesCommands();
        bytes.router = fixture.directory;
        MemoryHandle h = fixture.cpu0.allocate(100, CPU0);
        assertEquals("Nothing to copy: the size is 0", bytes.copy(h.toString(), h.toString(), "0").toString());
        assertTrue(bytes.copy(h.toString(), h.toString(), "0", "101").toString().startsWith("error: "),
                "an offset past the block's end is still an error");
        MemoryHandle freed = fixture.cpu0.allocate(100, CPU0);
        fixture.cpu0.deallocate(freed);
        String refused = bytes.copy(freed.toString(), h.toString(), "0").toString();
        assertTrue(refused.startsWith("error: ") && refused.contains(freed.toString()), refused);
    }

    @Test
    void aBandwidthThatRoundsToZeroIsNotMeasured() {
        String notMeasured = "not measured (no copy large enough to time yet)";
        assertEquals(notMeasured, DeviceCommands.bandwidth(info(OptionalDouble.empty())));
        assertEquals(notMeasured, DeviceCommands.bandwidth(info(OptionalDouble.of(0))));
        assertEquals(notMeasured, DeviceCommands.bandwidth(info(OptionalDouble.of(1e-6))));
        assertEquals("4.0 MB/s", DeviceCommands.bandwidth(info(OptionalDouble.of(0.004))));
        assertEquals("12.35 GB/s", DeviceCommands.bandwidth(info(OptionalDouble.of(12.3456))));
    }

    private static MemoryInfo info(OptionalDouble gbps) {
        return new MemoryInfo(1024, 0, 1024, 0, 0, 0, gbps);
    }
}
