package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryType;

/**
 * Mappings from {@code createMapping}: two handles over the same bytes, on one device or across
 * two managers of one backend, and the mappings that are refused.
 */
class EngineMappingTest extends EngineTestSupport {
    @Test
    void aMappingOnOneDeviceIsTwoHandlesOverTheSameBytes() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        var mapping = m.createMapping(CPU, CPU, 1000);
        assertNotEquals(mapping.source(), mapping.target());
        assertEquals(MemoryType.MAPPED, m.handleInfo(mapping.source()).orElseThrow().memoryType());
        assertEquals(1024, m.memoryInfo().usedBytes(), "the bytes count once");
        write(m, mapping.source(), (byte) 4);
        assertContent(m, mapping.target(), (byte) 4);
        m.deallocate(mapping.source());
        assertEquals(1024, m.memoryInfo().usedBytes(), "the other handle still holds the memory");
        assertContent(m, mapping.target(), (byte) 4);
        assertRejected(m, InvalidHandleException.class, () -> m.deallocate(mapping.source()));
        m.deallocate(mapping.target());
        assertEquals(0, m.memoryInfo().usedBytes());
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.createMapping(CPU, CPU, 0));
    }

    @Test
    void aMappingAcrossTwoManagersOfOneBackendAliasesMemory() {
        Map<Device, PooledMemoryManager> running = new java.util.concurrent.ConcurrentHashMap<>();
        PoolSettings settings = PoolSettings.defaults().withPeers(running::get);
        PooledMemoryManager a = manager(new ArenaUpstream(Device.cpu(1), 64 * MiB, true), config(pool(MiB, MiB)), settings);
        PooledMemoryManager b = manager(new ArenaUpstream(Device.cpu(2), 64 * MiB, true), config(pool(MiB, MiB)), settings);
        running.put(Device.cpu(1), a);
        running.put(Device.cpu(2), b);
        var mapping = a.createMapping(Device.cpu(1), Device.cpu(2), 4096);
        assertEquals(Device.cpu(2), b.handleInfo(mapping.target()).orElseThrow().device());
        assertTrue(a.owns(mapping.source()) && !a.owns(mapping.target()));
        assertTrue(b.owns(mapping.target()) && !b.owns(mapping.source()));
        write(b, mapping.target(), (byte) 8);
        assertContent(a, mapping.source(), (byte) 8);
        MemoryHandle local = b.allocate(4096, Device.cpu(2));
        b.copy(mapping.target(), local, 4096, 0, 0);
        assertContent(b, local, (byte) 8);
        assertEquals(4096, a.memoryInfo().usedBytes(), "the memory lives on the device that made the mapping");
        b.deallocate(mapping.target());
        a.deallocate(mapping.source());
        assertEquals(0, a.memoryInfo().usedBytes());

        assertTrue(assertRejected(a, InvalidMemoryRequestException.class, () -> a.createMapping(Device.cpu(1), Device.cpu(9), 64))
                .getMessage().contains("no running cpu:9"));
        assertTrue(assertRejected(a, InvalidMemoryRequestException.class, () -> a.createMapping(Device.cpu(1), Device.cuda(0), 64))
                .getMessage().contains("serves both kinds"));
        assertRejected(a, InvalidMemoryRequestException.class, () -> a.createMapping(Device.cpu(3), Device.cpu(2), 64));
    }
}
