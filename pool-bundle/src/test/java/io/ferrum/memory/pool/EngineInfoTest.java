package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.Set;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryType;

/**
 * The figures a manager reports: used, reserved, free, active allocations and fragmentation
 * after allocations and frees, and the lock-free snapshot against the full information.
 */
class EngineInfoTest extends EngineTestSupport {
    @Test
    void accountingAddsUpAfterAllocateAndFree() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        // Without thread caches, so that a freed block is a hole in the pool at once.
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB)), PoolSettings.defaults().withThreadCache(0));
        MemoryInfo empty = m.memoryInfo();
        assertEquals(64 * MiB, empty.totalBytes());
        assertEquals(0, empty.usedBytes());
        assertEquals(0, empty.reservedBytes());
        assertEquals(0.0, empty.fragmentationRatio());
        assertTrue(empty.bandwidthGbps().isEmpty(), "no bandwidth before the first copy");

        MemoryHandle a = m.allocate(1000, CPU);
        MemoryHandle b = m.allocate(256, CPU);
        MemoryInfo two = m.memoryInfo();
        assertEquals(1024 + 256, two.usedBytes(), "sizes round up to the 256-byte pool alignment");
        assertEquals(MiB, two.reservedBytes(), "the first chunk is the initial size");
        assertEquals(2, two.activeAllocations());
        assertEquals(two.totalBytes() - two.usedBytes(), two.freeBytes());
        assertEquals(MiB, up.liveBytes());
        assertEquals(1000, m.handleInfo(a).orElseThrow().size());
        assertEquals(256, m.handleInfo(a).orElseThrow().alignment());
        assertEquals(CPU, m.handleInfo(b).orElseThrow().device());

        m.deallocate(a);
        MemoryInfo one = m.memoryInfo();
        assertEquals(256, one.usedBytes());
        assertEquals(1, one.activeAllocations());
        // Free space: the 1 KiB hole before b and the tail after it; the largest is the tail.
        double expected = 1.0 - (double) (MiB - 1024 - 256) / (double) (MiB - 256);
        assertEquals(expected, one.fragmentationRatio(), 1e-12);
        m.deallocate(b);
        assertEquals(0, m.memoryInfo().usedBytes());
        assertEquals(0.0, m.memoryInfo().fragmentationRatio(), "one free block is no fragmentation");
        assertEquals(List.of(), m.handles());
    }

    /** API 1.2 (issue 17): what each memory type's pool reserved, adding up to the device's reserved bytes. */
    @Test
    void reservedByTypeNamesEachPoolThatHoldsMemoryAndAddsUpToReserved() {
        PooledMemoryManager m = manager(new ArenaUpstream(64 * MiB), config(pool(MiB, MiB)), PoolSettings.defaults().withThreadCache(0));
        assertEquals(Map.of(), m.reservedByType(), "no pool holds anything yet");
        m.allocate(1000, MemoryType.GENERAL, CPU);
        m.allocate(4096, MemoryType.TENSOR, CPU);
        Map<MemoryType, Long> byType = m.reservedByType();
        assertEquals(Set.of(MemoryType.GENERAL, MemoryType.TENSOR), byType.keySet());
        assertTrue(byType.values().stream().allMatch(r -> r > 0), byType.toString());
        assertEquals(m.memoryInfo().reservedBytes(), byType.values().stream().mapToLong(Long::longValue).sum());
    }

    @Test
    void theLockFreeSnapshotAgreesWithTheFullInformation() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryHandle a = m.allocate(1000, CPU);
        m.allocate(300_000, MemoryType.CACHE, CPU);
        m.deallocate(a);
        MemoryInfo full = m.memoryInfo();
        MemoryInfo quick = m.quickInfo();
        assertEquals(full.usedBytes(), quick.usedBytes());
        assertEquals(full.freeBytes(), quick.freeBytes());
        assertEquals(full.reservedBytes(), quick.reservedBytes());
        assertEquals(full.activeAllocations(), quick.activeAllocations());
        assertEquals(full.fragmentationRatio(), quick.fragmentationRatio(), "the ratio of the last full information");
        m.close();
        assertThrows(DeviceUnavailableException.class, m::quickInfo);
    }
}
