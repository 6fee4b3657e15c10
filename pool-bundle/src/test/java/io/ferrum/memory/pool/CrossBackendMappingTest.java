package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.ref.WeakReference;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryMapping;
import io.ferrum.memory.pool.HookedUpstream.Call;
import io.ferrum.memory.pool.HookedUpstream.Pause;

/**
 * Mappings across two backends ({@code createMapping(cpu, cuda:i)}, issue 16): the GPU's manager
 * owns the block, the host's names it by an alias; each backend is its own bundle, so one may stop
 * while the other runs on.
 */
class CrossBackendMappingTest extends RaceHarness {
    static final Device HOST = Device.cpu(1);
    static final Device GPU = Device.cuda(1);

    private final Map<Device, PooledMemoryManager> running = new ConcurrentHashMap<>();
    private final PoolSettings settings = PoolSettings.defaults().withPeers(running::get);

    /**
     * The GPU's bundle stops (its manager closes) while the host's manager still names two blocks
     * of it by aliases. The aliases are dead: calls with them say that the GPU's manager is closed,
     * a free of one is taken (a second is a double free), and nothing of the GPU's manager may stay
     * reachable from the host's. The host's handle table kept the GPU's blocks, and through them
     * the GPU's manager, its upstream and the stopped bundle's classes (on a GPU: JCuda's), for as
     * long as the host's manager ran; it reported the aliases as its live handles; and it refused
     * to close if unused, for names of a device that is gone (a restart of cpu:n for a
     * configuration change refused until the application freed handles of a stopped GPU).
     */
    @Test
    void aHostManagerKeepsNothingOfAGpuManagerThatClosedUnderItsAliases() throws Exception {
        HookedUpstream hostUp = new HookedUpstream(HOST, 64 * MiB);
        PooledMemoryManager host = manager(hostUp, settings);
        running.put(HOST, host);
        MemoryHandle[] aliases = new MemoryHandle[2];
        WeakReference<ArenaUpstream> gpuUp = mapThenCloseTheGpu(aliases);
        for (MemoryHandle alias : aliases) {
            DeviceUnavailableException e = assertThrows(DeviceUnavailableException.class,
                    () -> host.read(alias, 0, MemorySegment.ofArray(new byte[8])));
            assertEquals(GPU, e.device(), e.getMessage());
            assertFalse(host.owns(alias), "a dead alias is not a live handle of the host");
            assertTrue(host.handleInfo(alias).isEmpty());
        }
        host.deallocate(aliases[0]);
        assertThrows(InvalidHandleException.class, () -> host.deallocate(aliases[0]));
        for (int i = 0; i < 20 && gpuUp.get() != null; i++) {
            System.gc();
            Thread.sleep(10);
        }
        assertNull(gpuUp.get(), "the host's manager still reaches the closed GPU manager's upstream");
        assertTrue(host.closeIfUnused(), "the host names no live block: it closes if unused");
        assertEquals(0, hostUp.liveBytes());
    }

    /** Maps two blocks of a new GPU manager for the host, closes the GPU; keeps no reference to it. */
    private WeakReference<ArenaUpstream> mapThenCloseTheGpu(MemoryHandle[] aliases) {
        ArenaUpstream up = new ArenaUpstream(GPU, 64 * MiB, true);
        PooledMemoryManager gpu = PooledMemoryManager.create(up, config(pool(MiB, MiB, 256)), settings, null);
        running.put(GPU, gpu);
        for (int i = 0; i < aliases.length; i++) {
            aliases[i] = gpu.createMapping(HOST, GPU, 4 * KiB).source();
        }
        running.remove(GPU);
        gpu.close();
        assertEquals(0, up.liveBytes(), "the GPU's chunks went back at its close");
        return new WeakReference<>(up);
    }

    /**
     * The host frees its alias, the GPU its block, and then the GPU's bundle stops (its manager
     * closes): the host's manager names nothing of the GPU any more, so nothing of the GPU's manager
     * may stay reachable from it. Its upstream, and through it the stopped bundle's classes (on a
     * GPU: JCuda's), stayed in memory as long as the host's manager ran: the alias's slot in the
     * host's handle table kept pointing at the GPU's block after the free, until the host issued a
     * handle on that slot again.
     */
    @Test
    void aHostManagerThatFreedItsAliasKeepsNothingOfTheGpuManager() throws Exception {
        HookedUpstream hostUp = new HookedUpstream(HOST, 64 * MiB);
        PooledMemoryManager host = manager(hostUp, settings);
        running.put(HOST, host);
        WeakReference<ArenaUpstream> gpuUp = mapFreeThenCloseTheGpu(host);
        for (int i = 0; i < 20 && gpuUp.get() != null; i++) {
            System.gc();
            Thread.sleep(10);
        }
        assertNull(gpuUp.get(), "the host's manager still reaches the closed GPU manager's upstream");
        assertTrue(host.closeIfUnused());
        assertEquals(0, hostUp.liveBytes());
    }

    /** Maps a block of a new GPU manager for the host, frees both names, closes the GPU; keeps no reference to it. */
    private WeakReference<ArenaUpstream> mapFreeThenCloseTheGpu(PooledMemoryManager host) {
        ArenaUpstream up = new ArenaUpstream(GPU, 64 * MiB, true);
        PooledMemoryManager gpu = PooledMemoryManager.create(up, config(pool(MiB, MiB, 256)), settings, null);
        running.put(GPU, gpu);
        MemoryMapping mapping = gpu.createMapping(HOST, GPU, 4 * KiB);
        host.write(mapping.source(), 0, MemorySegment.ofArray(new byte[] {1, 2, 3}));
        host.deallocate(mapping.source());
        gpu.deallocate(mapping.target());
        running.remove(GPU);
        gpu.close();
        assertEquals(0, up.liveBytes(), "the GPU's chunks went back at its close");
        return new WeakReference<>(up);
    }

    /**
     * The other way round: the host's bundle stops (its manager closes, its alias dies) while the
     * GPU's block lives on under its own handle. The GPU's manager must keep nothing of the host's.
     */
    @Test
    void aGpuManagerKeepsNothingOfAHostManagerThatClosedWithItsAlias() throws Exception {
        ArenaUpstream gpuUp = new ArenaUpstream(GPU, 64 * MiB, true);
        PooledMemoryManager gpu = manager(gpuUp, settings);
        running.put(GPU, gpu);
        MemoryHandle[] primary = new MemoryHandle[1];
        WeakReference<HookedUpstream> hostUp = mapThenCloseTheHost(primary);
        gpu.write(primary[0], 0, MemorySegment.ofArray(new byte[] {7}));
        for (int i = 0; i < 20 && hostUp.get() != null; i++) {
            System.gc();
            Thread.sleep(10);
        }
        assertNull(hostUp.get(), "the GPU's manager still reaches the closed host manager's upstream");
        gpu.deallocate(primary[0]);
        assertEquals(0, gpu.memoryInfo().usedBytes());
    }

    /** Maps a block of the GPU for a new host manager, closes the host; keeps no reference to it. */
    private WeakReference<HookedUpstream> mapThenCloseTheHost(MemoryHandle[] primary) {
        HookedUpstream up = new HookedUpstream(HOST, 64 * MiB);
        PooledMemoryManager host = PooledMemoryManager.create(up, config(pool(MiB, MiB, 256)), settings, null);
        running.put(HOST, host);
        primary[0] = running.get(GPU).createMapping(HOST, GPU, 4 * KiB).target();
        running.remove(HOST);
        host.close();
        return new WeakReference<>(up);
    }

    /**
     * The host frees its alias while the GPU's close is between closing its pools and ending the
     * aliases peers issued for its blocks (held in the release of its chunk): the free takes the
     * name, the close then finds it gone and leaves no record of it, so a second free is a double
     * free, not a call on a closed device's handle.
     */
    @Test
    void anAliasFreedWhileItsOwnerClosesIsFreedOnceAndLeavesNoRecord() throws Exception {
        HookedUpstream gpuUp = new HookedUpstream(GPU, 64 * MiB);
        PooledMemoryManager gpu = manager(gpuUp, settings);
        PooledMemoryManager host = manager(new ArenaUpstream(HOST, 64 * MiB, true), settings);
        running.put(GPU, gpu);
        running.put(HOST, host);
        MemoryMapping mapping = gpu.createMapping(HOST, GPU, 4 * KiB);
        Pause release = gpuUp.pauseNext(Call.RELEASE);
        CompletableFuture<Object> closing = start("gpu-close", () -> {
            gpu.close();
            return null;
        });
        release.awaitArrival();
        host.deallocate(mapping.source());
        release.release();
        closing.get(30, TimeUnit.SECONDS);
        InvalidHandleException e = assertThrows(InvalidHandleException.class, () -> host.deallocate(mapping.source()));
        assertTrue(e.getMessage().contains("already freed"), e.getMessage());
        assertTrue(host.closeIfUnused());
        assertEquals(0, gpuUp.liveBytes());
        assertEquals("", gpuUp.violations.toString());
    }

    /**
     * The GPU's bundle stops while a createMapping on its manager is between carving the block
     * (its first handle named) and asking the host for the alias: here the close runs in full from
     * the pressure callback that allocation tells, so it looks for aliased blocks before the alias
     * exists. The mapping must be refused as a call on a closed manager and the host must name
     * nothing of the GPU. The call answered a mapping whose first handle the close had unregistered,
     * and the host kept the alias as a live handle of the closed GPU manager: it refused to close if
     * unused, and reached the GPU's upstream, for as long as it ran.
     */
    @Test
    void aMappingWhoseOwnerClosesBeforeItsAliasIsIssuedIsRefusedAndTheHostKeepsNothing() throws Exception {
        PooledMemoryManager host = manager(new ArenaUpstream(HOST, 64 * MiB, true), settings);
        running.put(HOST, host);
        ArenaUpstream gpuUp = new ArenaUpstream(GPU, 64 * MiB, true);
        PooledMemoryManager gpu = PooledMemoryManager.create(gpuUp, config(pool(MiB, MiB, 256)),
                settings.withCapacity(MiB), null);
        running.put(GPU, gpu);
        CompletableFuture<Object> closed = new CompletableFuture<>();
        gpu.setPressureCallback(p -> {
            if (!closed.isDone()) {
                // The allocation named the block and tells its pressure: the bundle stops now.
                start("gpu-close", () -> {
                    gpu.close();
                    return null;
                }).whenComplete((v, e) -> closed.complete(e == null ? "closed" : e));
                closed.join();
            }
        });
        DeviceUnavailableException e = assertThrows(DeviceUnavailableException.class,
                () -> gpu.createMapping(HOST, GPU, 800 * KiB));
        assertEquals("closed", closed.get(30, TimeUnit.SECONDS));
        assertEquals(GPU, e.device(), e.getMessage());
        assertTrue(host.handles().isEmpty(), "the host names no block of the closed GPU: " + host.handles());
        assertTrue(host.closeIfUnused(), "the host names no live block: it closes if unused");
        assertEquals(0, gpuUp.liveBytes());
    }

    /**
     * As above, but the close is held in its wait for a copy on the GPU's GENERAL pool, before it
     * looks at the MAPPED pool, while the mapping asks for its alias: the call is refused, so the
     * block it carved is no allocation the close may report as still live. It was reported: the
     * close's warning counted it beside the copy's two blocks.
     */
    @Test
    void aMappingRefusedForItsOwnersCloseIsNotReportedLiveByThatClose() throws Exception {
        PooledMemoryManager host = manager(new ArenaUpstream(HOST, 64 * MiB, true), settings);
        running.put(HOST, host);
        HookedUpstream gpuUp = new HookedUpstream(GPU, 64 * MiB);
        List<String> warnings = new CopyOnWriteArrayList<>();
        PooledMemoryManager gpu = PooledMemoryManager.create(gpuUp, config(pool(MiB, MiB, 256)),
                settings.withCapacity(4 * MiB).withLog(EngineTestSupport.warningsInto(warnings)), null);
        running.put(GPU, gpu);
        MemoryHandle from = gpu.allocate(4 * KiB, GPU);
        MemoryHandle to = gpu.allocate(4 * KiB, GPU);
        Pause copy = gpuUp.pauseNext(Call.COPY);
        CompletableFuture<Object> copying = start("gpu-copy", () -> {
            gpu.copy(from, to, 64, 0, 0);
            return null;
        });
        copy.awaitArrival();
        List<CompletableFuture<Object>> closing = new CopyOnWriteArrayList<>();
        gpu.setPressureCallback(p -> {
            if (closing.isEmpty()) {
                // The mapping's block is named: the bundle stops, its close held by the copy.
                closing.add(start("gpu-close", () -> {
                    gpu.close();
                    return null;
                }));
                awaitParkedIn(threads.get(threads.size() - 1), "Lifecycle", "awaitIdle");
            }
        });
        assertThrows(DeviceUnavailableException.class, () -> gpu.createMapping(HOST, GPU, 3 * MiB));
        copy.release();
        copying.get(30, TimeUnit.SECONDS);
        closing.get(0).get(30, TimeUnit.SECONDS);
        List<String> leaks = warnings.stream().filter(w -> w.contains("still allocated")).toList();
        assertEquals(1, leaks.size(), warnings.toString());
        assertTrue(leaks.get(0).contains("closed with 2 live allocations (8192 bytes"), leaks.get(0));
        assertTrue(host.closeIfUnused(), "the host names no live block: it closes if unused");
        assertEquals(0, gpuUp.liveBytes());
    }
}
