package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
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
                .getMessage().contains("no running cuda:0 is known to it; a mapping between a host device and a cuda device"
                        + " is made by the cuda device's manager: ask cuda:0's"));
        // The other way round, a GPU's manager that knows no such host device sends no one back to the host's.
        PooledMemoryManager gpu = manager(new ArenaUpstream(Device.cuda(3), 64 * MiB, true), config(pool(MiB, MiB)),
                PoolSettings.defaults());
        String gpuSays = assertRejected(gpu, InvalidMemoryRequestException.class,
                () -> gpu.createMapping(Device.cpu(5), Device.cuda(3), 64)).getMessage();
        assertTrue(gpuSays.endsWith("no running cpu:5 is known to it"), gpuSays);
        assertRejected(a, InvalidMemoryRequestException.class, () -> a.createMapping(Device.cpu(3), Device.cpu(2), 64));
    }

    /**
     * {@code handles()} lists every live block of a manager, and a handle is one of its live blocks
     * exactly when its {@code handleInfo} answers for it (API): each manager lists the handles it
     * issued, the peer its alias too. The peer's listing left its alias out while its handleInfo,
     * owns and closeIfUnused counted it (mem:handles showed the target of a mapping nowhere); the
     * owner listed the peer's alias once the source was freed although its handleInfo had nothing
     * for it.
     */
    @Test
    void eachManagerListsTheHandlesItIssuedAPeersAliasToo() {
        Map<Device, PooledMemoryManager> running = new java.util.concurrent.ConcurrentHashMap<>();
        PoolSettings settings = PoolSettings.defaults().withPeers(running::get);
        PooledMemoryManager a = manager(new ArenaUpstream(Device.cpu(1), 64 * MiB, true), config(pool(MiB, MiB)), settings);
        PooledMemoryManager b = manager(new ArenaUpstream(Device.cpu(2), 64 * MiB, true), config(pool(MiB, MiB)), settings);
        running.put(Device.cpu(1), a);
        running.put(Device.cpu(2), b);
        var mapping = a.createMapping(Device.cpu(1), Device.cpu(2), 4096);
        assertEquals(List.of(a.handleInfo(mapping.source()).orElseThrow()), a.handles());
        assertEquals(List.of(b.handleInfo(mapping.target()).orElseThrow()), b.handles(),
                "cpu:2 lists the alias it issued, as its handleInfo answers for it");
        a.deallocate(mapping.source());
        assertEquals(List.of(), a.handles(), "cpu:1 lists no handle it does not answer for");
        assertEquals(List.of(b.handleInfo(mapping.target()).orElseThrow()), b.handles());
        assertEquals(4096, a.memoryInfo().usedBytes(), "the memory is still cpu:1's");
        b.deallocate(mapping.target());
        assertEquals(List.of(), b.handles());
        assertEquals(0, a.memoryInfo().usedBytes());
    }

    /**
     * Issue 16's {@code createMapping(cpu, cuda:i)}: a GPU's backend answers the host's manager as
     * a peer, the memory is the GPU's mapped (managed, host-addressable) memory, and the host's
     * manager names it by an alias. Copies between that alias and the host's own blocks cross two
     * backends, whose upstreams cannot read each other's chunks: they go through the host view.
     * Before, the host's upstream was handed the GPU's chunk ({@code ClassCastException}).
     */
    @Test
    void aMappingBetweenAHostAndAGpuOfAnotherBackendCopiesThroughTheHostView() {
        Device host = Device.cpu(1);
        Device gpu = Device.cuda(1);
        Map<Device, PooledMemoryManager> running = new java.util.concurrent.ConcurrentHashMap<>();
        PoolSettings settings = PoolSettings.defaults().withPeers(running::get);
        HookedUpstream hostUp = new HookedUpstream(host, 64 * MiB);
        PooledMemoryManager cpu = PooledMemoryManager.create(hostUp, config(pool(MiB, MiB)), settings, null);
        toClose.add(cpu);
        PooledMemoryManager cuda = manager(new ArenaUpstream(gpu, 64 * MiB, true), config(pool(MiB, MiB)), settings);
        running.put(host, cpu);
        running.put(gpu, cuda);

        var mapping = cuda.createMapping(host, gpu, 4096);
        assertTrue(cpu.owns(mapping.source()) && cuda.owns(mapping.target()));
        write(cpu, mapping.source(), (byte) 3);
        assertContent(cuda, mapping.target(), (byte) 3);

        MemoryHandle own = cpu.allocate(4096, host);
        cpu.copy(mapping.source(), own, 4096, 0, 0); // GPU's chunk to the host's
        assertContent(cpu, own, (byte) 3);
        write(cpu, own, (byte) 9);
        cpu.copy(own, mapping.source(), 4096, 0, 0); // the host's chunk to the GPU's
        assertContent(cuda, mapping.target(), (byte) 9);
        cpu.copy(own, mapping.source(), 100, 10, 2000);
        byte[] got = new byte[100];
        cuda.read(mapping.target(), 2000, java.lang.foreign.MemorySegment.ofArray(got));
        for (int i = 0; i < 100; i++) {
            assertEquals((byte) (9 + (10 + i) * 31), got[i], "byte " + i + " of the partial copy");
        }
        assertEquals("", hostUp.violations.toString());

        cpu.deallocate(own);
        cpu.deallocate(mapping.source());
        cuda.deallocate(mapping.target());
        assertEquals(0, cuda.memoryInfo().usedBytes());
        assertEquals(0, cpu.memoryInfo().usedBytes());
    }
}
