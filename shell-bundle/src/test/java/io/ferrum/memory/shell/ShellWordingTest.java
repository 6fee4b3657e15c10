package io.ferrum.memory.shell;

import static io.ferrum.memory.shell.ShellFixture.CPU0;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.MemoryHandle;

/** Issue 17: what the shell prints names shell commands, not the Java methods the API's messages name. */
class ShellWordingTest {
    /** Java methods and API spellings a person at the prompt cannot call. */
    private static final List<String> JAVA = List.of("configurePool", "mapMemory", "enableAutoExpansion", "withMapped action",
            "MemoryRouter", "call it there");

    private final ShellFixture fixture = new ShellFixture();
    private final AllocationCommands allocation = new AllocationCommands();
    private final BytesCommands bytes = new BytesCommands();
    private final MaintenanceCommands maintenance = new MaintenanceCommands();

    ShellWordingTest() {
        allocation.monitor = fixture.directory;
        allocation.router = fixture.directory;
        bytes.monitor = fixture.directory;
        bytes.router = fixture.directory;
        maintenance.monitor = fixture.directory;
    }

    @AfterEach
    void close() throws Exception {
        fixture.close();
    }

    private static void speaksShell(String reply) {
        assertTrue(reply.startsWith("error: "), reply);
        JAVA.forEach(j -> assertFalse(reply.contains(j), reply));
    }

    @Test
    void aSizeOverMaxSizeSaysWhichMemPoolCallRaisesIt() {
        String pool = maintenance.pool("cpu:0", "GENERAL", "initialSize=1m", "maxSize=1m").toString();
        assertTrue(pool.contains("maxSize          1.0 MiB"), pool);
        String over = allocation.alloc("2m", "cpu:0").toString();
        speaksShell(over);
        assertTrue(over.contains("; raise it with mem:pool cpu:0 GENERAL maxSize=SIZE (0: unlimited)"), over);
        assertTrue(fixture.cpu0.handles().isEmpty());
    }

    /**
     * mem:pool cpu:0 GENERAL autoExpansion=false initialSize=1m over 3 MiB of live blocks answered
     * "... at its initialSize of 1048576 bytes (1.0 MiB) (enableAutoExpansion=false): ...", naming the
     * API's field, not the key just typed.
     */
    @Test
    void aFixedPoolBelowItsLiveBlocksNamesTheKeyMemPoolTakes() {
        assertTrue(allocation.alloc("3m", "cpu:0").toString().endsWith(" on cpu:0"));
        String refused = maintenance.pool("cpu:0", "GENERAL", "autoExpansion=false", "initialSize=1m").toString();
        speaksShell(refused);
        assertEquals("error: Cannot fix the GENERAL pool on cpu:0 at its initialSize of 1048576 bytes (1.0 MiB)"
                + " (autoExpansion=false): its live blocks already use 3145728 bytes (3.0 MiB)", refused);
    }

    @Test
    void aPoolThatMayNotGrowSaysWhichSettingLetsIt() {
        maintenance.pool("cpu:0", "TENSOR", "autoExpansion=false", "initialSize=1m");
        String over = allocation.alloc("-t", "TENSOR", "2m", "cpu:0").toString();
        speaksShell(over);
        assertTrue(over.contains("let it with mem:pool cpu:0 TENSOR autoExpansion=true"), over);
    }

    @Test
    void outOfMemoryAtAPoolsMaxSizeSaysWhichMemPoolCallRaisesIt() {
        maintenance.pool("cpu:0", "GENERAL", "initialSize=1m", "maxSize=4m", "growthIncrement=1m");
        assertTrue(allocation.alloc("3m", "cpu:0").toString().startsWith("0x"));
        List<MemoryHandle> before = fixture.cpu0.handles().stream().map(i -> i.handle()).toList();
        String oom = allocation.alloc("3m", "cpu:0").toString();
        speaksShell(oom);
        assertTrue(oom.contains("(maxSize)"), oom);
        assertTrue(oom.endsWith("; free blocks (mem:handles, mem:free), raise the pool's limit (mem:pool cpu:0 GENERAL"
                + " maxSize=SIZE, 0: unlimited), or defragment (mem:defrag cpu:0)"), oom);
        assertEquals(before, fixture.cpu0.handles().stream().map(i -> i.handle()).toList());
    }

    /**
     * An out-of-memory refusal read "... (maxSize). Free 23.5 GiB of 23.5 GiB; free blocks (mem:handles,
     * mem:free), ...": the device's free memory, written as an order to free all of it.
     */
    @Test
    void outOfMemorySaysWhatTheDeviceHasFreeRatherThanAskToFreeIt() {
        maintenance.pool("cpu:0", "GENERAL", "initialSize=1m", "maxSize=4m", "growthIncrement=1m");
        assertTrue(allocation.alloc("3m", "cpu:0").toString().startsWith("0x"));
        String oom = allocation.alloc("3m", "cpu:0").toString();
        assertTrue(oom.contains(" (maxSize). The device has 61.0 MiB of 64.0 MiB free; free blocks (mem:handles, mem:free)"),
                oom);
        assertFalse(oom.contains("Free "), oom);
    }

    @Test
    void outOfMemoryAtTheDevicesCapacityPointsToItsConfigurationNotToMaxSize() {
        String pool = maintenance.pool("cpu:0", "GENERAL").toString();
        assertTrue(pool.contains("maxSize          unlimited"), pool);
        assertTrue(allocation.alloc("40m", "cpu:0").toString().startsWith("0x"));
        String oom = allocation.alloc("40m", "cpu:0").toString();
        speaksShell(oom);
        assertTrue(oom.contains("capacity"), oom);
        assertFalse(oom.contains("maxSize"), "raising maxSize would change nothing: " + oom);
        assertTrue(oom.endsWith("; free blocks (mem:handles, mem:free) or defragment (mem:defrag cpu:0); the device's"
                + " capacity is set by capacity= in its configuration, which mem:pool does not change"), oom);
        assertEquals(1, fixture.cpu0.handles().size());
    }

    @Test
    void aRefusalByEveryDeviceAdvisesEachDeviceInItsOwnWords() {
        // The router's message when every device refuses by its own limit, as the distribution printed it
        // with cpu:0 and cpu:1 both at maxSize=1m: one manager's message per device, in the order tried.
        String refused = ShellWording.of("No device accepts an allocation of 2097152 bytes (GENERAL): tried [cpu:1"
                + " (Allocation of 2097152 bytes (2.0 MiB) on cpu:1 exceeds the GENERAL pool's maxSize of 1048576 bytes"
                + " (1.0 MiB); raise maxSize with configurePool), cpu:0 (Allocation of 2097152 bytes (2.0 MiB) on cpu:0"
                + " exceeds the TENSOR pool's maxSize of 1048576 bytes (1.0 MiB); raise maxSize with configurePool)]."
                + " Ask for less, or raise the limits named (configurePool)");
        speaksShell("error: " + refused);
        assertTrue(refused.contains("on cpu:1 exceeds the GENERAL pool's maxSize of 1048576 bytes (1.0 MiB); raise it with"
                + " mem:pool cpu:1 GENERAL maxSize=SIZE"), refused);
        assertTrue(refused.contains("on cpu:0 exceeds the TENSOR pool's maxSize of 1048576 bytes (1.0 MiB); raise it with"
                + " mem:pool cpu:0 TENSOR maxSize=SIZE"), "each device's own advice, not the last one's: " + refused);
        assertTrue(refused.endsWith(". Ask for less, or raise the limits named (mem:pool DEVICE TYPE KEY=VALUE)"), refused);
    }

    @Test
    void aGrowthIncrementOfZeroNamesTheSettingsOfMemPool() {
        String before = maintenance.pool("cpu:0", "GENERAL").toString();
        String zero = maintenance.pool("cpu:0", "GENERAL", "growthIncrement=0").toString();
        speaksShell(zero);
        assertEquals("error: Invalid pool configuration: growthIncrement is 0 while autoExpansion is on; give a"
                + " growthIncrement or set autoExpansion=false", zero);
        assertEquals(before, maintenance.pool("cpu:0", "GENERAL").toString(), "nothing changed");
    }

    @Test
    void unmappingABlockThatIsNotMappedPointsToMemMap() {
        MemoryHandle h = fixture.cpu0.allocate(4096, CPU0);
        String unmap = bytes.unmap(h.toString()).toString();
        speaksShell(unmap);
        assertTrue(unmap.endsWith("is not mapped; map it with mem:map before mem:unmap"), unmap);
    }

    @Test
    void outOfMemoryAndAStoppedRouterAreAdvisedInCommands() {
        String oom = ShellWording.of("Out of memory on cpu:0: cannot allocate 1.0 GiB in the GENERAL pool: the pool holds"
                + " 64.0 MiB and may not grow (enableAutoExpansion=false). The device has 1.0 MiB of 64.0 MiB free; free blocks, raise the"
                + " limit, or defragment");
        assertEquals("Out of memory on cpu:0: cannot allocate 1.0 GiB in the GENERAL pool: the pool holds 64.0 MiB and may"
                + " not grow (autoExpansion=false). The device has 1.0 MiB of 64.0 MiB free; free blocks (mem:handles, mem:free), let"
                + " the pool grow (mem:pool cpu:0 GENERAL autoExpansion=true), or defragment (mem:defrag cpu:0)", oom);
        String unknownLimit = ShellWording.of("Out of memory on cpu:0: cannot allocate 1.0 GiB in the GENERAL pool: some"
                + " new reason. The device has 1.0 MiB of 64.0 MiB free; free blocks, raise the limit, or defragment");
        assertTrue(unknownLimit.endsWith("; free blocks (mem:handles, mem:free), raise the pool's limit (mem:pool cpu:0"
                + " GENERAL maxSize=SIZE) or the device's capacity (capacity= in its configuration), or defragment"
                + " (mem:defrag cpu:0)"), "a reason it does not know names both limits: " + unknownLimit);
        String stopped = ShellWording.of("The memory router and global monitor (io.ferrum.memory.monitor) is stopped:"
                + " deallocate(0x0000100000000001) was not carried out. Blocks allocated through it are untouched and stay"
                + " live on their managers; get the running MemoryRouter or GlobalMemoryMonitor service and call it there");
        assertEquals("The memory router and global monitor (io.ferrum.memory.monitor) is stopped: nothing was done. Blocks"
                + " allocated through it are untouched and stay live on their managers; run the command again once the"
                + " bundle io.ferrum.memory.monitor is active", stopped);
        assertEquals("Invalid size 'x'", ShellWording.of("Invalid size 'x'"), "other messages pass unchanged");
    }

    @Test
    void aBlockMappedThroughAStagingCopyPointsToMemUnmap() {
        // Checks.staged's words (pool engine), alone and quoted by a routed copy stopped after its first piece.
        String staged = "Block 0x0000200000000001 on cuda:0 is mapped through a host staging copy (mapMemory): a read,"
                + " write or copy of the device's bytes would miss the views' bytes, or be overwritten when the copy is"
                + " written back. unmapMemory it first. Nothing was done";
        String alone = ShellWording.of(staged);
        assertTrue(alone.contains("(mem:map): a read,"), alone);
        assertTrue(alone.endsWith("written back. Unmap it first (mem:unmap 0x0000200000000001). Nothing was done"), alone);
        String routed = ShellWording.of("Copy of 2097152 bytes from 0x0000100000000001 on cpu:0 to 0x0000200000000001 on"
                + " cuda:0 failed after 1048576 bytes: the destination holds part of the source (destination offsets 0 to"
                + " 1048576), the rest of its range is as it was; copy again to complete it. Its next piece was refused: "
                + staged);
        assertTrue(routed.endsWith("Unmap it first (mem:unmap 0x0000200000000001). Nothing was done"), routed);
        JAVA.forEach(j -> assertFalse(routed.contains(j), routed));
    }
}
