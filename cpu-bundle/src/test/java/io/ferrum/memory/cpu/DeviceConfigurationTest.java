package io.ferrum.memory.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.MemoryMapping;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * Configurations of the device components: cpu:0's PID takes no other index, a bad value is
 * refused with an error that names it, and a refused configuration changes nothing.
 */
class DeviceConfigurationTest {
    private static final long MiB = 1L << 20;

    private final Recording fw = new Recording();

    @Test
    void cpu0RefusesAnotherIndexAtActivationNamingItAndStartsWithItsDefaults() {
        DefaultCpuDevice cpu0 = new DefaultCpuDevice(fw.context(), TestConfigs.small(Map.of("index", 2)), fw.logger());
        try {
            DeviceMemoryManager m = fw.manager();
            assertEquals(Device.cpu(0), m.device(), "the component serves cpu:0 whatever the index");
            assertNotEquals(64 * MiB, m.memoryInfo().totalBytes(), "the refused configuration's capacity was not applied");
            assertEquals(1, fw.errors.size(), "one error: " + fw.errors);
            String error = fw.errors.get(0);
            assertTrue(error.contains("index=2") && error.contains(CpuBackend.DEVICE_FACTORY_PID)
                    && error.contains("starts with its defaults"), error);
        } finally {
            cpu0.deactivate();
        }
    }

    @Test
    void cpu0RefusesAnotherIndexOnUpdateAndKeepsRunningAsItWas() {
        DefaultCpuDevice cpu0 = new DefaultCpuDevice(fw.context(), TestConfigs.small(), fw.logger());
        try {
            DeviceMemoryManager before = fw.manager();
            long handle = before.allocate(4096, Device.cpu(0)).id();
            fw.events.clear();

            cpu0.modify(TestConfigs.small(Map.of("index", 3, "capacity", 32 * MiB)));

            assertEquals(List.of("register " + Rejection.class.getName()), fw.events, "no device service was unregistered or registered");
            assertSame(before, fw.manager());
            assertFalse(((PooledMemoryManager) before).isClosed());
            assertEquals(64 * MiB, before.memoryInfo().totalBytes(), "the running configuration stays");
            assertTrue(before.owns(new io.ferrum.memory.api.MemoryHandle(handle)), "live blocks stay live");
            assertEquals(1, fw.errors.size(), "one error: " + fw.errors);
            assertTrue(fw.errors.get(0).contains("index=3") && fw.errors.get(0).contains("cpu:0 keeps running as it was"),
                    fw.errors.get(0));
        } finally {
            cpu0.deactivate();
        }
    }

    @Test
    void aValidUpdateRestartsCpu0WithTheNewConfiguration() {
        DefaultCpuDevice cpu0 = new DefaultCpuDevice(fw.context(), TestConfigs.small(), fw.logger());
        try {
            DeviceMemoryManager before = fw.manager();

            cpu0.modify(TestConfigs.small(Map.of("index", 0, "capacity", 32 * MiB)));

            DeviceMemoryManager after = fw.manager();
            assertTrue(((PooledMemoryManager) before).isClosed(), "the old manager is closed");
            assertEquals(Device.cpu(0), after.device());
            assertEquals(32 * MiB, after.memoryInfo().totalBytes());
            assertEquals(List.of(), fw.errors);
        } finally {
            cpu0.deactivate();
        }
        assertTrue(fw.services.isEmpty(), "deactivation unregisters everything: " + fw.services);
    }

    @Test
    void anUpdateWithABadValueIsRefusedLikeABadIndex() {
        DefaultCpuDevice cpu0 = new DefaultCpuDevice(fw.context(), TestConfigs.small(), fw.logger());
        try {
            DeviceMemoryManager before = fw.manager();

            cpu0.modify(TestConfigs.small(Map.of("zeroing", "sometimes")));
            cpu0.modify(TestConfigs.small(Map.of("alignment", 3L)));

            assertSame(before, fw.manager());
            assertFalse(((PooledMemoryManager) before).isClosed());
            assertEquals(2, fw.errors.size(), "two errors: " + fw.errors);
            assertTrue(fw.errors.get(0).contains("'sometimes'"), fw.errors.get(0));
            assertTrue(fw.errors.get(1).contains("alignment 3"), fw.errors.get(1));
        } finally {
            cpu0.deactivate();
        }
    }

    /** Issue 17: each bad value creates no device, one error line without a stack trace, and a rejection mem:backends shows. */
    @Test
    void aFactoryConfigurationWithABadValueCreatesNoDeviceAndSaysWhy() {
        Map<Map<String, Object>, String> bad = new java.util.LinkedHashMap<>();
        bad.put(Map.of("index", 0), "got 0");
        bad.put(Map.of("index", -1), "got '-1'");
        bad.put(Map.of("index", 1, "capacity", "12XB"), "Invalid capacity '12XB'");
        bad.put(Map.of("index", 1, "capacity", "-5"), "Invalid capacity '-5'");
        bad.put(Map.of("index", 1, "zeroing", "bogus"), "Invalid zeroing 'bogus'");
        bad.put(Map.of("index", 1, "initialSize", "1g", "capacity", "256m"), "initialSize 1073741824 bytes is larger than capacity 268435456 bytes");
        bad.put(Map.of("index", 1, "maxSize", "1k"), "maxSize 1024 bytes is smaller than initialSize");
        for (Map.Entry<Map<String, Object>, String> e : bad.entrySet()) {
            Recording rec = new Recording();
            ConfiguredCpuDevice device = new ConfiguredCpuDevice(rec.context(), TestConfigs.small(e.getKey()), rec.logger());
            assertTrue(rec.services.values().stream().noneMatch(n -> n.contains("DeviceMemoryManager")), "no device: " + rec.services);
            assertEquals(1, rec.errors.size(), "one error line: " + rec.errors);
            assertTrue(rec.errors.get(0).contains(e.getValue()) && rec.errors.get(0).contains("no device was created"), rec.errors.get(0));
            assertEquals(List.of(rec.errors.get(0)), rec.rejections(), "mem:backends shows the same line");
            device.deactivate();
            assertTrue(rec.services.isEmpty(), "deactivation removes the rejection: " + rec.services);
        }
    }

    @Test
    void poolSizesApplyWithoutARestartAndKeepTheLiveBlocks() {
        DefaultCpuDevice cpu0 = new DefaultCpuDevice(fw.context(), TestConfigs.small(), fw.logger());
        try {
            DeviceMemoryManager before = fw.manager();
            io.ferrum.memory.api.MemoryHandle h = before.allocate(MiB, Device.cpu(0));
            fw.events.clear();

            cpu0.modify(TestConfigs.small(Map.of("growthIncrement", "8m", "maxSize", "32m")));

            assertEquals(List.of(), fw.events, "nothing was unregistered or registered");
            assertSame(before, fw.manager());
            assertTrue(before.owns(h), "the live block stays");
            assertEquals(8 * MiB, before.poolConfig(io.ferrum.memory.api.MemoryType.GENERAL).growthIncrement());
            assertEquals(32 * MiB, before.poolConfig(io.ferrum.memory.api.MemoryType.TENSOR).maxSize().getAsLong());
            assertEquals(List.of(), fw.errors);

            cpu0.modify(TestConfigs.small(Map.of("maxSize", "1k", "initialSize", "0")));
            assertSame(before, fw.manager());
            assertEquals(1, fw.errors.size(), fw.errors.toString());
            assertTrue(fw.errors.get(0).contains("its live blocks already use"), fw.errors.get(0));
            assertEquals(32 * MiB, before.poolConfig(io.ferrum.memory.api.MemoryType.GENERAL).maxSize().getAsLong(), "unchanged");
        } finally {
            cpu0.deactivate();
        }
    }

    /** Review defect: indexes were compared as Integer objects, so above 127 every edit looked like a new index. */
    @Test
    void aPoolOnlyEditAppliesLiveOnADeviceWithAnIndexAbove127() {
        ConfiguredCpuDevice device = new ConfiguredCpuDevice(fw.context(), TestConfigs.small(Map.of("index", "200", "initialSize", "8m")), fw.logger());
        try {
            DeviceMemoryManager cpu200 = fw.manager();
            assertEquals(Device.cpu(200), cpu200.device());
            io.ferrum.memory.api.MemoryHandle h = cpu200.allocate(MiB, Device.cpu(200));
            fw.events.clear();

            device.modify(TestConfigs.small(Map.of("index", "200", "initialSize", "2m")));

            assertEquals(List.of(), fw.errors, "applied, not refused as needing a restart");
            assertEquals(List.of(), fw.events, "nothing was unregistered or registered");
            assertSame(cpu200, fw.manager());
            assertTrue(cpu200.owns(h), "the live block stays");
            assertEquals(2 * MiB, cpu200.poolConfig(io.ferrum.memory.api.MemoryType.GENERAL).initialSize());
        } finally {
            device.deactivate();
        }
    }

    /** Review defect: the pools were configured one by one, so a refusal by the TENSOR pool left GENERAL changed. */
    @Test
    void aPoolEditRefusedByOnePoolChangesNoPool() {
        DefaultCpuDevice cpu0 = new DefaultCpuDevice(fw.context(), TestConfigs.small(Map.of("initialSize", "0")), fw.logger());
        try {
            DeviceMemoryManager m = fw.manager();
            io.ferrum.memory.api.MemoryHandle h = m.allocate(4 * MiB, io.ferrum.memory.api.MemoryType.TENSOR, Device.cpu(0));

            cpu0.modify(TestConfigs.small(Map.of("initialSize", "0", "maxSize", "1m")));

            assertEquals(1, fw.errors.size(), fw.errors.toString());
            assertTrue(fw.errors.get(0).contains("maxSize of the TENSOR pool") && fw.errors.get(0).contains("cpu:0 keeps running as it was"),
                    fw.errors.get(0));
            for (io.ferrum.memory.api.MemoryType type : io.ferrum.memory.api.MemoryType.values()) {
                assertTrue(m.poolConfig(type).maxSize().isEmpty(), type + " keeps its unlimited maxSize");
            }
            assertTrue(m.owns(h));
        } finally {
            cpu0.deactivate();
        }
    }

    @Test
    void aChangeThatNeedsARestartIsRefusedWhileBlocksAreLiveAndTheirReleaseIsLogged() {
        DefaultCpuDevice cpu0 = new DefaultCpuDevice(fw.context(), TestConfigs.small(), fw.logger());
        DeviceMemoryManager before = fw.manager();
        io.ferrum.memory.api.MemoryHandle h = before.allocate(MiB, Device.cpu(0));

        cpu0.modify(TestConfigs.small(Map.of("capacity", "32m")));

        assertSame(before, fw.manager(), "not restarted: it would drop the live block");
        assertTrue(before.owns(h));
        assertEquals(1, fw.errors.size(), fw.errors.toString());
        assertTrue(fw.errors.get(0).contains("holds 1 live block (1048576 bytes) that") && fw.errors.get(0).contains("cpu:0 keeps running as it was"),
                fw.errors.get(0));
        assertEquals(fw.errors, fw.rejections());

        fw.infos.clear();
        cpu0.deactivate();
        assertTrue(fw.infos.stream().anyMatch(l -> l.startsWith("cpu:0 stopped: 1 live block (1048576 bytes) was released")), fw.infos.toString());
        assertTrue(fw.services.isEmpty(), fw.services.toString());
    }

    /**
     * A restart is refused too while the device names another device's block through a mapping
     * (createMapping issued it an alias): the refusal said "holds 0 live blocks (0 bytes)", since
     * the device's own figures count no alias; it says what it holds.
     */
    @Test
    void aRestartRefusedForAMappingsNameSaysWhatTheDeviceHolds() {
        Recording rec8 = new Recording();
        Recording rec9 = new Recording();
        ConfiguredCpuDevice cpu8 = new ConfiguredCpuDevice(rec8.context(), TestConfigs.small(Map.of("index", 8)), rec8.logger());
        ConfiguredCpuDevice cpu9 = new ConfiguredCpuDevice(rec9.context(), TestConfigs.small(Map.of("index", 9)), rec9.logger());
        try {
            AdvancedMemoryManager source = (AdvancedMemoryManager) rec9.manager();
            DeviceMemoryManager target = rec8.manager();
            MemoryMapping mapping = source.createMapping(Device.cpu(9), Device.cpu(8), 4096);
            assertEquals(0, target.memoryInfo().activeAllocations(), "cpu:8's own figures count no alias");

            cpu8.modify(TestConfigs.small(Map.of("index", 8, "capacity", "32m")));

            assertSame(target, rec8.manager(), "not restarted: cpu:8 names cpu:9's block");
            assertTrue(target.owns(mapping.target()));
            assertEquals(1, rec8.errors.size(), rec8.errors.toString());
            String refusal = rec8.errors.get(0);
            assertFalse(refusal.contains("0 live blocks"), refusal);
            assertTrue(refusal.contains("which names blocks of another device through mappings (createMapping)"), refusal);
        } finally {
            cpu8.deactivate();
            cpu9.deactivate();
        }
    }

    /**
     * The other side: a mapping whose source handle was freed leaves its block in cpu:9's pool, named
     * only by the alias cpu:8 issued, which cpu:8 lists (mem:handles shows it under cpu:8, none under
     * cpu:9). The refusal said "holds 1 live block (4096 bytes) that a restart would drop; free them",
     * and the user found no block on cpu:9 to free. It says where the block is listed.
     */
    @Test
    void aRestartRefusedForABlockNamedOnlyByAPeersHandleSaysWhereItIsListed() {
        Recording rec8 = new Recording();
        Recording rec9 = new Recording();
        ConfiguredCpuDevice cpu8 = new ConfiguredCpuDevice(rec8.context(), TestConfigs.small(Map.of("index", 8)), rec8.logger());
        ConfiguredCpuDevice cpu9 = new ConfiguredCpuDevice(rec9.context(), TestConfigs.small(Map.of("index", 9)), rec9.logger());
        try {
            AdvancedMemoryManager source = (AdvancedMemoryManager) rec9.manager();
            MemoryMapping mapping = source.createMapping(Device.cpu(9), Device.cpu(8), 4096);
            source.deallocate(mapping.source());
            assertEquals(List.of(), source.handles(), "cpu:9 lists no handle of the block");

            cpu9.modify(TestConfigs.small(Map.of("index", 9, "capacity", "32m")));

            assertSame(source, rec9.manager(), "not restarted: cpu:9 holds the block cpu:8 names");
            assertEquals(1, rec9.errors.size(), rec9.errors.toString());
            String refusal = rec9.errors.get(0);
            assertTrue(refusal.contains("which holds 1 live block (4096 bytes) that a restart would drop (mem:handles lists"
                    + " a block named only by another device's handle, the target of a mapping, under that device: free it"
                    + " there); free them"), refusal);
        } finally {
            cpu8.deactivate();
            cpu9.deactivate();
        }
    }

    /**
     * A restart checked that the manager held no live block, then stopped the device: unregistering
     * its services, then closing its manager. A block allocated in between (here: as the first
     * service is unregistered) was dropped by the close, its owner's handle dead although the edit
     * was to be refused while blocks live. The check and the close are one step now: the allocation
     * either makes the edit refuse or, after the close, is refused itself.
     */
    @Test
    void aBlockAllocatedAsARestartBeginsIsNeverDroppedBehindItsOwner() {
        DefaultCpuDevice cpu0 = new DefaultCpuDevice(fw.context(), TestConfigs.small(), fw.logger());
        try {
            DeviceMemoryManager before = fw.manager();
            io.ferrum.memory.api.MemoryHandle[] racing = new io.ferrum.memory.api.MemoryHandle[1];
            RuntimeException[] refused = new RuntimeException[1];
            fw.beforeUnregister = () -> {
                try {
                    racing[0] = before.allocate(MiB, Device.cpu(0));
                } catch (io.ferrum.memory.api.DeviceUnavailableException closed) {
                    refused[0] = closed;
                }
            };

            cpu0.modify(TestConfigs.small(Map.of("capacity", "32m")));

            if (racing[0] != null) {
                assertSame(before, fw.manager(), "restarted although a block was live");
                assertTrue(!((PooledMemoryManager) before).isClosed() && before.owns(racing[0]),
                        "the block allocated after the check was dropped by the restart");
            } else {
                assertTrue(refused[0] != null && ((PooledMemoryManager) before).isClosed(),
                        "the allocation came after the close and was refused");
                assertEquals(32 * MiB, fw.manager().memoryInfo().totalBytes(), "restarted with the new capacity");
            }
        } finally {
            cpu0.deactivate();
        }
    }

    /**
     * Deleting cpu:0's configuration (config/io.ferrum.memory.cpu.cfg) while it holds a block is
     * refused, as a restart would drop the block; the refusal said "free them and save the file
     * again", but there is no file to save, and once the blocks were freed cpu:0 ran on with the
     * deleted configuration and the note. It says how to go back to the defaults.
     */
    @Test
    void aRemovedConfigurationRefusedForLiveBlocksSaysHowToReturnToTheDefaults() {
        DefaultCpuDevice cpu0 = new DefaultCpuDevice(fw.context(), TestConfigs.small(), fw.logger());
        try {
            DeviceMemoryManager before = fw.manager();
            io.ferrum.memory.api.MemoryHandle h = before.allocate(MiB, Device.cpu(0));

            // DS on deletion: the component's own properties, no service.pid, the defaults.
            cpu0.modified(CpuDeviceConfigs.DEFAULTS, Map.of("component.name", "io.ferrum.memory.cpu.DefaultCpuDevice"));

            assertSame(before, fw.manager(), "not restarted: it would drop the live block");
            assertTrue(before.owns(h));
            assertEquals(List.of("Configuration io.ferrum.memory.cpu was removed: going back to the defaults restarts cpu:0,"
                    + " which holds 1 live block (1048576 bytes) that a restart would drop; free them, then give"
                    + " io.ferrum.memory.cpu an empty configuration (in the distribution an empty file"
                    + " config/io.ferrum.memory.cpu.cfg); cpu:0 keeps running as it was"), fw.rejections());
        } finally {
            cpu0.deactivate();
        }
    }

    @Test
    void aFactoryDeviceKeepsRunningWhenItsConfigurationTurnsBadAndMovesWhenItsIndexChanges() {
        ConfiguredCpuDevice device = new ConfiguredCpuDevice(fw.context(), TestConfigs.small(Map.of("index", 4)), fw.logger());
        try {
            DeviceMemoryManager cpu4 = fw.manager();
            assertEquals(Device.cpu(4), cpu4.device());

            device.modify(TestConfigs.small(Map.of("index", 0)));
            assertSame(cpu4, fw.manager(), "a refused update changes nothing");
            assertTrue(fw.errors.get(0).contains("got 0") && fw.errors.get(0).contains("cpu:4 keeps running"), fw.errors.get(0));

            device.modify(TestConfigs.small(Map.of("index", 5)));
            assertEquals(Device.cpu(5), fw.manager().device(), "a valid new index restarts the device under it");
            assertTrue(((PooledMemoryManager) cpu4).isClosed());
        } finally {
            device.deactivate();
        }
    }

    /**
     * Review defect: two configurations with one index both started; the second overwrote the first
     * in the backend's table and in the monitor, and mem:backends listed cpu:1 twice.
     */
    @Test
    void aSecondConfigurationOfOneIndexIsRefusedNamingTheFirst() {
        Recording rec = new Recording();
        ConfiguredCpuDevice first = new ConfiguredCpuDevice(rec.context(), TestConfigs.small(Map.of("index", "6")),
                Map.of("service.pid", "io.ferrum.memory.cpu.device~a"), rec.logger());
        ConfiguredCpuDevice second = null;
        try {
            DeviceMemoryManager cpu6 = rec.manager();
            second = new ConfiguredCpuDevice(rec.context(), TestConfigs.small(Map.of("index", "6")),
                    Map.of("service.pid", "io.ferrum.memory.cpu.device~b"), rec.logger());
            assertEquals(1, rec.services.values().stream().filter(n -> n.contains("DeviceMemoryManager")).count(),
                    "one device service: " + rec.services);
            assertSame(cpu6, rec.manager());
            assertSame(cpu6, CpuBackend.DEVICES.get(Device.cpu(6)), "the first keeps the backend's table");
            assertEquals(List.of("Configuration io.ferrum.memory.cpu.device~b refused: cpu:6 is already configured by"
                    + " io.ferrum.memory.cpu.device~a; give this one another index, or remove one of the two; no device was"
                    + " created"), rec.rejections());

            // The first goes; the second, saved again, takes the index.
            first.deactivate();
            first = null;
            second.modify(TestConfigs.small(Map.of("index", "6")));
            assertEquals(Device.cpu(6), rec.manager().device());
            assertEquals(List.of(), rec.rejections());
        } finally {
            if (first != null) {
                first.deactivate();
            }
            if (second != null) {
                second.deactivate();
            }
        }
        assertNull(CpuBackend.CLAIMS.get(Device.cpu(6)), "the claim goes with the device");
    }

    /**
     * Review defect: an activation that failed after claiming its index (a pre-allocation larger than
     * the machine) kept the claim, and DS never deactivates such a component: no later configuration
     * could run that index.
     */
    @Test
    void aFailedStartGivesItsIndexBack() {
        Recording rec = new Recording();
        assertThrows(RuntimeException.class, () -> new ConfiguredCpuDevice(rec.context(),
                TestConfigs.small(Map.of("index", "7", "capacity", "0", "preAllocate", "true", "initialSize", "1t")),
                Map.of("service.pid", "io.ferrum.memory.cpu.device~a"), rec.logger()));
        assertNull(CpuBackend.CLAIMS.get(Device.cpu(7)), "the failed start gave its claim back");
        ConfiguredCpuDevice next = new ConfiguredCpuDevice(rec.context(), TestConfigs.small(Map.of("index", "7")),
                Map.of("service.pid", "io.ferrum.memory.cpu.device~b"), rec.logger());
        try {
            assertEquals(List.of(), rec.rejections(), "cpu:7 runs the next configuration");
            assertEquals(Device.cpu(7), rec.manager().device());
        } finally {
            next.deactivate();
        }
    }

    /**
     * Review defect: a pool edit whose pre-allocation failed part-way (not a refusal of the check)
     * left the pools before it changed, with a DS stack trace and no note.
     */
    @Test
    void aPoolEditWhosePreAllocationFailsChangesNoPool() {
        Recording rec = new Recording();
        ConfiguredCpuDevice device = new ConfiguredCpuDevice(rec.context(), TestConfigs.small(Map.of("index", "8")),
                Map.of("service.pid", "io.ferrum.memory.cpu.device~c"), rec.logger());
        try {
            PooledMemoryManager m = (PooledMemoryManager) rec.manager();
            // GENERAL's 40 MiB do not fit beside TENSOR's 30 (a 64 MiB device).
            io.ferrum.memory.api.MemoryHandle h = m.allocate(30 * MiB, MemoryType.TENSOR, Device.cpu(8));
            Map<MemoryType, MemoryPoolConfig> before = new java.util.EnumMap<>(MemoryType.class);
            for (MemoryType t : MemoryType.values()) {
                before.put(t, m.poolConfig(t));
            }
            Map<MemoryType, Long> reserved = m.reservedByType();
            device.modify(TestConfigs.small(Map.of("index", "8", "initialSize", "40m", "preAllocate", "true")));
            for (MemoryType t : MemoryType.values()) {
                assertEquals(before.get(t), m.poolConfig(t), t + ": a refused edit changes no pool");
            }
            assertEquals(reserved, m.reservedByType(), "a refused edit reserves nothing");
            assertTrue(m.owns(h));
            assertEquals(1, rec.rejections().size(), rec.rejections().toString());
            assertTrue(rec.rejections().get(0).contains("cpu:8 keeps running as it was"), rec.rejections().get(0));
            assertSame(m, rec.manager());
        } finally {
            device.deactivate();
        }
    }

    /**
     * A file that turns preAllocate on pre-allocates on an edit what it pre-allocates at a start: the
     * GENERAL pool's initialSize (the other pools only inherit GENERAL's values; PooledMemoryManager.create).
     * The edit pre-allocated in each of the six pools: 16 MiB at a start was 96 MiB on an edit, and on
     * a 64 MiB device the edit was refused by the fifth pool.
     */
    @Test
    void aPreAllocationOnAnEditReservesWhatItReservesAtAStart() {
        Recording rec = new Recording();
        Map<String, Object> preAllocated = Map.of("index", "9", "initialSize", "16m", "preAllocate", "true");
        ConfiguredCpuDevice started = new ConfiguredCpuDevice(rec.context(), TestConfigs.small(preAllocated),
                Map.of("service.pid", "io.ferrum.memory.cpu.device~d"), rec.logger());
        Map<MemoryType, Long> atStart;
        try {
            atStart = rec.manager().reservedByType();
        } finally {
            started.deactivate();
        }
        assertEquals(Map.of(MemoryType.GENERAL, 16 * MiB), atStart);

        ConfiguredCpuDevice edited = new ConfiguredCpuDevice(rec.context(), TestConfigs.small(Map.of("index", "9")),
                Map.of("service.pid", "io.ferrum.memory.cpu.device~d"), rec.logger());
        try {
            DeviceMemoryManager m = rec.manager();
            edited.modify(TestConfigs.small(preAllocated));
            assertEquals(List.of(), rec.rejections(), "applied");
            assertSame(m, rec.manager(), "without a restart");
            assertEquals(atStart, m.reservedByType());
        } finally {
            edited.deactivate();
        }
    }

    /** Review defects 2 and 3: flags and numbers are checked by our code, and a refusal names every bad value. */
    @Test
    void aRefusalNamesEveryBadValueFlagsAndNumbersIncluded() {
        ConfiguredCpuDevice device = new ConfiguredCpuDevice(fw.context(), TestConfigs.small(Map.of("index", "1",
                "alignment", "3", "maxSize", "1m", "initialSize", "2m", "growthIncrement", "-5",
                "autoExpansion", "maybe", "stats", "perhaps", "gcThreshold", "abc", "maxConcurrentTransfers", "0")), fw.logger());
        try {
            assertTrue(fw.services.values().stream().noneMatch(n -> n.contains("DeviceMemoryManager")), "no device: " + fw.services);
            assertEquals(1, fw.errors.size(), "one error line: " + fw.errors);
            String error = fw.errors.get(0);
            for (String named : List.of("alignment 3 is not a power of two", "maxSize 1048576 bytes is smaller than initialSize 2097152",
                    "Invalid growthIncrement '-5'", "Invalid autoExpansion 'maybe'", "Invalid stats 'perhaps'",
                    "Invalid gcThreshold 'abc'", "maxConcurrentTransfers 0 must be one or more", "no device was created")) {
                assertTrue(error.contains(named), named + " in: " + error);
            }
            assertEquals(List.of(error), fw.rejections(), "mem:backends shows the same line");
        } finally {
            device.deactivate();
        }
    }

    @Test
    void aBadIndexIsNamedWithTheOtherBadValuesAndNothingThrows() {
        ConfiguredCpuDevice device = new ConfiguredCpuDevice(fw.context(),
                TestConfigs.small(Map.of("index", "abc", "debug", "sometimes")), fw.logger());
        try {
            assertEquals(1, fw.errors.size(), fw.errors.toString());
            assertTrue(fw.errors.get(0).contains("got 'abc'") && fw.errors.get(0).contains("Invalid debug 'sometimes'"),
                    fw.errors.get(0));
        } finally {
            device.deactivate();
        }
    }

    /** Flags take the words of the shell's mem:pool, as text (a file) or as Boolean (Config Admin). */
    @Test
    void flagsTakeTheShellsWordsAsTextOrTypedAndAnythingElseIsABadValue() {
        for (Object yes : List.of("yes", "on", " TRUE ", Boolean.TRUE)) {
            assertEquals(null, CpuDevice.refusal(TestConfigs.small(Map.of("autoExpansion", yes, "preAllocate", yes)), 0, null), yes.toString());
            assertTrue(CpuDevice.managerConfig(TestConfigs.small(Map.of("preAllocate", yes))).poolConfig(io.ferrum.memory.api.MemoryType.GENERAL)
                    .preAllocate(), yes.toString());
        }
        for (Object no : List.of("no", "off", "False", Boolean.FALSE)) {
            assertEquals(null, CpuDevice.refusal(TestConfigs.small(Map.of("autoExpansion", no)), 0, null), no.toString());
            assertFalse(CpuDevice.managerConfig(TestConfigs.small(Map.of("autoExpansion", no))).poolConfig(io.ferrum.memory.api.MemoryType.GENERAL)
                    .enableAutoExpansion(), no.toString());
        }
        for (String bad : List.of("maybe", "1", "", "y")) {
            String r = CpuDevice.refusal(TestConfigs.small(Map.of("autoGc", bad)), 0, null);
            assertTrue(r != null && r.contains("Invalid autoGc '" + bad + "': use true or false"), bad + ": " + r);
        }
        // Typed numbers from the Config Admin API are accepted like their text.
        assertEquals(null, CpuDevice.refusal(TestConfigs.small(Map.of("index", 0, "gcThreshold", 0.5d,
                "maxConcurrentTransfers", 8, "debug", false)), 0, null));
        var m = CpuDevice.managerConfig(TestConfigs.small(Map.of("gcThreshold", 0.5d, "maxConcurrentTransfers", 8L)));
        assertEquals(0.5, m.gcThreshold());
        assertEquals(8, m.maxConcurrentTransfers());
    }

    /**
     * A bad value holding control characters ({@code capacity=\u001b[31m...} in a file: FileInstall
     * reads the escape) was named raw in the refusal, which goes to the log and to mem:backends: an
     * ESC sequence recoloured or cleared the terminal, a line break forged a log line. Every value is
     * now named with such characters (and any outside ASCII) as Java escapes.
     */
    @Test
    void aBadValueIsNamedWithItsControlCharactersEscaped() {
        String forged = "\u001b[31m\nINFO ok\u00e9";
        Map<String, Object> values = new java.util.HashMap<>();
        for (String attribute : List.of("index", "capacity", "initialSize", "zeroing", "autoGc", "gcThreshold",
                "maxConcurrentTransfers")) {
            values.put(attribute, forged);
        }
        Map<String, Object> raw = Map.of("alignment", new String[] {forged, "64"}); // DS would hand the first
        String shown = "\\u001b[31m\\u000aINFO ok\\u00e9";
        CpuDeviceConfig cfg = TestConfigs.small(values);
        for (String r : List.of(CpuDevice.refusal(cfg, raw, 1, ConfiguredCpuDevice.indexRefusal(cfg)),
                CpuDevice.refusal(cfg, raw, 0, DefaultCpuDevice.indexRefusal(cfg)))) {
            assertTrue(r.chars().allMatch(c -> c >= 0x20 && c < 0x7f), "printable ASCII only: " + r);
            for (String attribute : List.of("capacity", "initialSize", "zeroing", "autoGc", "gcThreshold", "maxConcurrentTransfers")) {
                assertTrue(r.contains("Invalid " + attribute + " '" + shown + "'"), attribute + ": " + r);
            }
            assertTrue(r.contains("'" + shown + "'"), "the index: " + r);
            assertTrue(r.contains("Invalid alignment [\"" + shown + "\", \"64\"]"), "a list: " + r);
        }
    }

    /**
     * Review defect: files took +5 and -0 where the shell refuses any sign. And maxConcurrentTransfers=-2
     * was named "use a whole number, zero or more, without a sign", offering a 0 that is refused in turn
     * ("must be one or more"): a signed value is named with the attribute's own lower bound.
     */
    @Test
    void numbersInAFileTakeNoSignAndANegativeOneIsNamedAsBelowZero() {
        Map<Map<String, Object>, String> bad = new java.util.LinkedHashMap<>();
        bad.put(Map.of("index", "+5"), "got '+5'");
        bad.put(Map.of("index", "-0"), "got '-0'");
        bad.put(Map.of("index", "1", "maxConcurrentTransfers", "+3"), "Invalid maxConcurrentTransfers '+3': use a whole number, 1 or more, without a sign");
        bad.put(Map.of("index", "1", "maxConcurrentTransfers", "-2"), "Invalid maxConcurrentTransfers '-2': use a whole number, 1 or more, without a sign");
        bad.put(Map.of("index", "1", "gcThreshold", "+0.5"), "Invalid gcThreshold '+0.5': use a decimal number, zero or more, without a sign");
        bad.put(Map.of("index", "1", "initialSize", "-0"), "Invalid initialSize '-0'");
        bad.put(Map.of("index", "1", "capacity", "-5"), "(zero or more, without a sign)");
        for (Map.Entry<Map<String, Object>, String> e : bad.entrySet()) {
            String r = CpuDevice.refusal(TestConfigs.small(e.getKey()), 1, ConfiguredCpuDevice.indexRefusal(TestConfigs.small(e.getKey())));
            assertTrue(r != null && r.contains(e.getValue()), e.getKey() + ": " + r);
        }
        assertEquals(null, CpuDevice.refusal(TestConfigs.small(Map.of("gcThreshold", "8.5e-1")), 0, null), "an exponent keeps its sign");
    }

    /** Review defect: messages that misnamed the value ("Infinity", "too large" for a small one) or said "1 bytes". */
    @Test
    void messagesNameTheValueAsWrittenAndCountOneInTheSingular() {
        Map<Map<String, Object>, String> bad = new java.util.LinkedHashMap<>();
        bad.put(Map.of("gcThreshold", "1e400"), "Invalid gcThreshold '1e400': out of range");
        bad.put(Map.of("maxConcurrentTransfers", "99999999999"), "Invalid maxConcurrentTransfers '99999999999': out of range, use at most 2147483647");
        bad.put(Map.of("maxConcurrentTransfers", "-99999999999"), "Invalid maxConcurrentTransfers '-99999999999': use a whole number, 1 or more");
        bad.put(Map.of("capacity", "1", "initialSize", "2"), "initialSize 2 bytes is larger than capacity 1 byte");
        for (Map.Entry<Map<String, Object>, String> e : bad.entrySet()) {
            String r = CpuDevice.refusal(TestConfigs.small(e.getKey()), 0, null);
            assertTrue(r != null && r.contains(e.getValue()) && !r.contains("Infinity") && !r.contains("too large"), e.getKey() + ": " + r);
        }
    }

    /** Review defect: DS cut a list to its first element, so index=["3","abc"] made cpu:3 silently. */
    @Test
    void aValueGivenAsAListIsRefusedNamingTheAttribute() {
        // DS hands the typed view the first element; the raw properties show the list.
        ConfiguredCpuDevice device = new ConfiguredCpuDevice(fw.context(), TestConfigs.small(Map.of("index", "3")),
                Map.of("index", new String[] {"3", "abc"}), fw.logger());
        try {
            assertTrue(fw.services.values().stream().noneMatch(n -> n.contains("DeviceMemoryManager")), "no device: " + fw.services);
            assertEquals(List.of("Configuration of cpu:3 refused: Invalid index [\"3\", \"abc\"]: index takes one value, not a list;"
                    + " no device was created"), fw.errors);
        } finally {
            device.deactivate();
        }
        Recording rec = new Recording();
        DefaultCpuDevice cpu0 = new DefaultCpuDevice(rec.context(), TestConfigs.small(), rec.logger());
        try {
            DeviceMemoryManager before = rec.manager();
            cpu0.modified(TestConfigs.small(Map.of("capacity", "1g")), Map.of("capacity", List.of("1g", "zz")));
            assertSame(before, rec.manager());
            assertEquals(64 * MiB, before.memoryInfo().totalBytes(), "unchanged");
            assertEquals(1, rec.errors.size(), rec.errors.toString());
            assertTrue(rec.errors.get(0).contains("Invalid capacity [\"1g\", \"zz\"]: capacity takes one value, not a list"), rec.errors.get(0));
        } finally {
            cpu0.deactivate();
        }
    }

    /** Review defect: capacty=1g (a typo) was ignored, and the device took all the RAM by default. */
    @Test
    void anUnknownAttributeIsRefusedWithTheClosestKnownOne() {
        Map<String, Object> raw = Map.of("index", "2", "capacty", "1g", "bogusKey", "x", "service.pid", "p",
                "felix.fileinstall.filename", "file:/x.cfg", "component.name", "c");
        ConfiguredCpuDevice device = new ConfiguredCpuDevice(fw.context(), TestConfigs.small(Map.of("index", "2")), raw, fw.logger());
        try {
            assertTrue(fw.services.values().stream().noneMatch(n -> n.contains("DeviceMemoryManager")), "no device: " + fw.services);
            assertEquals(1, fw.errors.size(), fw.errors.toString());
            String error = fw.errors.get(0);
            assertTrue(error.startsWith("Configuration of cpu:2 refused: Unknown attribute 'bogusKey': the attributes are alignment,"), error);
            assertTrue(error.contains("Unknown attribute 'capacty' (capacity?): the attributes are"), error);
            assertFalse(error.contains("service.pid") || error.contains("felix") || error.contains("component.name"), error);
        } finally {
            device.deactivate();
        }
    }

    /**
     * Review defect: a factory configuration file of binary bytes (no index) was refused with "A
     * io.ferrum.memory.cpu.device configuration needs ..." and no word of which file in config/.
     */
    @Test
    void aRefusalNamesTheFileTheConfigurationCameFrom() {
        Map<String, Object> raw = Map.of("service.pid", "io.ferrum.memory.cpu.device~bin",
                "felix.fileinstall.filename", "file:/srv/ferrum/config/io.ferrum.memory.cpu.device-bin.cfg");
        ConfiguredCpuDevice device = new ConfiguredCpuDevice(fw.context(), TestConfigs.small(), raw, fw.logger());
        try {
            assertEquals(1, fw.errors.size(), fw.errors.toString());
            String error = fw.errors.get(0);
            assertTrue(error.startsWith("A " + CpuBackend.DEVICE_FACTORY_PID + " configuration needs a whole number index"), error);
            assertTrue(error.endsWith("no device was created (file /srv/ferrum/config/io.ferrum.memory.cpu.device-bin.cfg)"), error);
            assertEquals(List.of(error), List.copyOf(fw.reasons.values()), "mem:backends shows the same line");
        } finally {
            device.deactivate();
        }
    }

    @Test
    void anUpdateWithABadFlagChangesNothing() {
        DefaultCpuDevice cpu0 = new DefaultCpuDevice(fw.context(), TestConfigs.small(), fw.logger());
        try {
            DeviceMemoryManager before = fw.manager();
            fw.events.clear();

            cpu0.modify(TestConfigs.small(Map.of("autoExpansion", "perhaps", "growthIncrement", "8m")));

            assertEquals(List.of("register " + Rejection.class.getName()), fw.events, "only the rejection was registered");
            assertSame(before, fw.manager());
            assertEquals(4 * MiB, before.poolConfig(io.ferrum.memory.api.MemoryType.GENERAL).growthIncrement(), "not applied");
            assertTrue(before.poolConfig(io.ferrum.memory.api.MemoryType.GENERAL).enableAutoExpansion());
            assertTrue(fw.errors.get(0).contains("Invalid autoExpansion 'perhaps'") && fw.errors.get(0).contains("cpu:0 keeps running as it was"),
                    fw.errors.get(0));
        } finally {
            cpu0.deactivate();
        }
    }
}
