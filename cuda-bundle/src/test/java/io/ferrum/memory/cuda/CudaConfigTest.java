package io.ferrum.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.MemoryUsageHint;

/** Configuration checks, chunk kinds, advice and factory refusals: everything that needs no driver. */
class CudaConfigTest {

    @Test
    void defaultsAreAccepted() {
        assertNull(CudaDeviceConfigs.refusal(CudaDeviceConfigs.DEFAULTS, 0, 1));
    }

    /** What a running GPU takes in place (its pools) and what needs a restart (everything else). */
    @Test
    void onlyPoolAttributesAreTakenWithoutARestart() {
        CudaDeviceConfig base = CudaDeviceConfigs.DEFAULTS;
        for (Map.Entry<String, Object> pool : Map.<String, Object>of("initialSize", "1048576", "maxSize", "8589934592",
                "growthIncrement", "67108864", "autoExpansion", "false", "alignment", "4096", "preAllocate", "true",
                "stats", "false").entrySet()) {
            assertTrue(CudaDeviceConfigs.onlyPoolsDiffer(base, CudaDeviceConfigs.of(Map.ofEntries(pool))), pool.toString());
        }
        for (Map.Entry<String, Object> other : Map.<String, Object>of("capacity", "1073741824", "zeroing", "on-free",
                "threadCacheBytes", "0", "stagingSlots", "8", "stagingSlotBytes", "1048576", "autoGc", "false",
                "gcThreshold", "0.5", "debug", "true", "maxConcurrentTransfers", "2", "index", "1").entrySet()) {
            assertFalse(CudaDeviceConfigs.onlyPoolsDiffer(base, CudaDeviceConfigs.of(Map.ofEntries(other))), other.toString());
        }
        assertTrue(CudaDeviceConfigs.onlyPoolsDiffer(base, CudaDeviceConfigs.of(Map.of("zeroing", "NONE"))),
                "the same value written otherwise is no change");
    }

    @Test
    void indexBeyondTheDevicesIsRefused() {
        String r = CudaDeviceConfigs.refusal(CudaDeviceConfigs.of(Map.of("index", 2)), 2, 2);
        assertEquals("Configuration of cuda:2 refused: index=2, but the driver reports 2 CUDA devices: use 0 or 1", r);
    }

    @Test
    void badZeroingAndStagingAreRefusedNamingTheValue() {
        assertTrue(CudaDeviceConfigs.refusal(CudaDeviceConfigs.of(Map.of("zeroing", "often")), 0, 1).contains("'often'"));
        assertTrue(CudaDeviceConfigs.refusal(CudaDeviceConfigs.of(Map.of("stagingSlots", 99)), 0, 1)
                .contains("stagingSlots 99"));
    }

    /** Review defect 4: flags and numbers are read by our code, and a refusal names every bad value at once. */
    @Test
    void aRefusalNamesEveryBadValueFlagsAndNumbersIncluded() {
        String r = CudaDeviceConfigs.refusal(CudaDeviceConfigs.of(Map.of("capacity", "abc", "alignment", "3",
                "maxSize", "1048576", "initialSize", "2097152", "growthIncrement", "-5", "autoExpansion", "maybe",
                "gcThreshold", "2", "maxConcurrentTransfers", "x", "stagingSlots", "99", "stagingSlotBytes", "1000")), 0, 1);
        for (String named : List.of("Invalid capacity 'abc'", "alignment 3 is not a power of two",
                "maxSize 1048576 bytes is smaller than initialSize 2097152", "Invalid growthIncrement '-5': use a whole number, zero or more",
                "Invalid autoExpansion 'maybe'", "gcThreshold 2.0", "Invalid maxConcurrentTransfers 'x'",
                "stagingSlots 99", "stagingSlotBytes 1000")) {
            assertTrue(r.contains(named), named + " in: " + r);
        }
        assertTrue(r.startsWith("Configuration of cuda:0 refused: "), r);
    }

    /**
     * Review defect: stagingSlots=+8 and initialSize=-0 were taken; the shell refuses any sign. A signed
     * stagingSlots was then named "zero or more", though it takes 2 to 64: it names its own bound.
     */
    @Test
    void numbersTakeNoSign() {
        String r = CudaDeviceConfigs.refusal(CudaDeviceConfigs.of(Map.of("stagingSlots", "+8", "initialSize", "-0",
                "maxSize", "-5")), 0, 1);
        assertTrue(r != null && r.contains("Invalid stagingSlots '+8': use a whole number, 2 or more, without a sign")
                && r.contains("Invalid initialSize '-0'") && r.contains("Invalid maxSize '-5': use a whole number, zero or more"), r);
    }

    /** Review defect: the PID for every GPU was refused as "Configuration of cuda:0", and one GPU's choice read "(use 0)". */
    @Test
    void aRefusalNamesWhatItConfigures() {
        assertEquals("Configuration of io.ferrum.memory.cuda (every GPU) refused: Invalid zeroing 'often': use none, on-allocate"
                + " or on-free", CudaDeviceConfigs.defaultsRefusal(CudaDeviceConfigs.of(Map.of("zeroing", "often")), Map.of()));
        CudaDeviceConfig abc = CudaDeviceConfigs.of(Map.of("index", "abc"));
        assertEquals("Configuration of io.ferrum.memory.cuda.device refused: Invalid index 'abc': use the index of a GPU the"
                + " driver reports: 0", CudaDeviceConfigs.refusal(abc, null, 1));
        assertEquals("Configuration of cuda:4 refused: index=4, but the driver reports 3 CUDA devices: use 0 to 2",
                CudaDeviceConfigs.refusal(CudaDeviceConfigs.of(Map.of("index", "4")), 4, 3));
    }

    /** Review defect: DS cut a list to its first element silently. */
    @Test
    void aValueGivenAsAListIsRefusedNamingTheAttribute() {
        assertEquals("Configuration of cuda:0 refused: Invalid stagingSlots [8, 16]: stagingSlots takes one value, not a list",
                CudaDeviceConfigs.refusal(CudaDeviceConfigs.of(Map.of("stagingSlots", "8")), Map.of("stagingSlots", new int[] {8, 16}), 0, 1));
        assertEquals("Configuration of io.ferrum.memory.cuda (every GPU) refused: Invalid capacity [\"1g\", \"zz\"]: capacity takes"
                + " one value, not a list", CudaDeviceConfigs.defaultsRefusal(CudaDeviceConfigs.of(Map.of("capacity", "1073741824")),
                Map.of("capacity", List.of("1g", "zz"))));
    }

    @Test
    void anUnknownAttributeIsRefusedWithTheClosestKnownOne() {
        String r = CudaDeviceConfigs.defaultsRefusal(CudaDeviceConfigs.DEFAULTS, Map.of("stagingSlot", "8", "service.pid", "x"));
        assertTrue(r.startsWith("Configuration of io.ferrum.memory.cuda (every GPU) refused: Unknown attribute 'stagingSlot'"
                + " (stagingSlots?): the attributes are"), r);
    }

    @Test
    void aBadIndexIsNamedWithoutThrowing() {
        CudaDeviceConfig cfg = CudaDeviceConfigs.of(Map.of("index", "abc", "debug", "sometimes"));
        assertNull(CudaDeviceConfigs.index(cfg));
        assertEquals("Configuration of io.ferrum.memory.cuda.device refused: Invalid index 'abc': use the index of a GPU the driver reports: 0 or 1;"
                + " Invalid debug 'sometimes': use true or false (yes/no and on/off work too)",
                CudaDeviceConfigs.refusal(cfg, CudaDeviceConfigs.index(cfg), 2));
    }

    @Test
    void flagsAndNumbersAreTakenAsTextOrTyped() {
        for (Object no : List.of("no", "OFF", " false ", Boolean.FALSE)) {
            CudaDeviceConfig cfg = CudaDeviceConfigs.of(Map.of("autoExpansion", no, "growthIncrement", 0));
            assertNull(CudaDeviceConfigs.refusal(cfg, 0, 1), no.toString());
            assertFalse(CudaDeviceConfigs.managerConfig(cfg).poolConfig(MemoryType.GENERAL).enableAutoExpansion());
        }
        CudaDeviceConfig typed = CudaDeviceConfigs.of(Map.of("capacity", 1L << 30, "gcThreshold", 0.5d, "maxConcurrentTransfers", 8,
                "stagingSlots", 8, "preAllocate", "yes"));
        assertNull(CudaDeviceConfigs.refusal(typed, 0, 1));
        assertEquals(1L << 30, CudaDeviceConfigs.capacity(typed));
        assertEquals(0.5, CudaDeviceConfigs.managerConfig(typed).gcThreshold());
        assertEquals(8, CudaDeviceConfigs.settings(typed).stagingSlots());
        assertTrue(CudaDeviceConfigs.managerConfig(typed).poolConfig(MemoryType.GENERAL).preAllocate());
    }

    @Test
    void memoryTypesPickTheirChunkKind() {
        assertEquals(ChunkKind.PINNED, ChunkKind.of(MemoryType.PINNED));
        assertEquals(ChunkKind.MANAGED, ChunkKind.of(MemoryType.MAPPED));
        assertEquals(ChunkKind.DEVICE, ChunkKind.of(MemoryType.TENSOR));
    }

    @Test
    void hintsWithoutCudaAdviceAreNoOps() {
        assertEquals(-1, ManagedHints.advice(MemoryUsageHint.SEQUENTIAL));
        assertEquals(jcuda.driver.CUmem_advise.CU_MEM_ADVISE_SET_READ_MOSTLY, ManagedHints.advice(MemoryUsageHint.READ_MOSTLY));
    }

    @Test
    void factoryRefusesOtherKindsAndMissingGpus() {
        assertTrue(CudaMemoryManagerFactory.refusal(Device.cpu(0), 1).contains("not served by the cuda backend"));
        assertEquals("No cuda:3: the driver reports 1 CUDA device", CudaMemoryManagerFactory.refusal(Device.cuda(3), 1));
        assertNull(CudaMemoryManagerFactory.refusal(Device.cuda(0), 1));
    }
}
