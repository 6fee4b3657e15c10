package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.nio.channels.Pipe;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryMapping;
import io.ferrum.memory.pool.HookedUpstream.Call;
import io.ferrum.memory.pool.HookedUpstream.Pause;

/**
 * Found by an attack on mappings, aliases between managers and close (a mapping review, 2026-12),
 * forced with {@link HookedUpstream} pauses where a race is involved; each test failed before its fix.
 */
class MappingAttackTest extends RaceHarness {
    static final Device CPU1 = Device.cpu(1);
    static final Device CPU2 = Device.cpu(2);
    static final Device CPU3 = Device.cpu(3);

    private final Map<Device, PooledMemoryManager> running = new ConcurrentHashMap<>();
    private final PoolSettings settings = PoolSettings.defaults().withPeers(running::get);

    private PooledMemoryManager running(HookedUpstream up) {
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)), settings, null);
        running.put(up.device(), m);
        return m;
    }

    /**
     * cpu:1 maps a block for cpu:2, and cpu:2 closes while cpu:1 is inside the call (past its check
     * that cpu:2 runs, reserving the MAPPED pool's first chunk). cpu:2's alias dies as it is issued,
     * so the call must be refused as one made after that close would be, and keep no block. It
     * returned a mapping whose target handle was dead from the start while its source held 4 KiB
     * on cpu:1.
     */
    @Test
    void aMappingWhosePeerClosesDuringTheCallIsRefusedAndKeepsNoBlock() throws Exception {
        HookedUpstream up1 = new HookedUpstream(CPU1, 64 * MiB);
        PooledMemoryManager a = running(up1);
        PooledMemoryManager b = running(new HookedUpstream(CPU2, 64 * MiB));
        Pause reserve = up1.pauseNext(Call.RESERVE);
        CompletableFuture<MemoryMapping> mapping = start("create-mapping", () -> a.createMapping(CPU1, CPU2, 4 * KiB));
        reserve.awaitArrival();
        b.close();
        reserve.release();
        ExecutionException e = assertThrows(ExecutionException.class, () -> mapping.get(30, TimeUnit.SECONDS),
                () -> "createMapping returned " + mapping.join() + " although cpu:2 closed during the call: its target"
                        + " is dead (cpu:2 owns it: " + b.owns(mapping.join().target()) + ")");
        InvalidMemoryRequestException refused = assertInstanceOf(InvalidMemoryRequestException.class, e.getCause());
        assertTrue(refused.getMessage().contains("no running " + CPU2), refused.getMessage());
        MemoryInfo info = a.memoryInfo();
        assertEquals(0, info.usedBytes(), "the refused mapping's block went back");
        assertEquals(0, info.activeAllocations());
        assertEquals(List.of(), a.handles());
    }

    /**
     * The backend's peer lookup answers a manager of another device for cpu:2 (a stale or wrong
     * entry: cpu:3's, or cpu:1's own). The mapping says its target is on cpu:2, so its target handle
     * must be cpu:2's: the call is refused and changes nothing. It returned a mapping whose target
     * handle cpu:3 (or cpu:1) had issued, which cpu:2's manager refuses as foreign.
     */
    @Test
    void aPeerLookupThatAnswersAnotherDevicesManagerIsRefused() {
        PooledMemoryManager a = running(new HookedUpstream(CPU1, 64 * MiB));
        PooledMemoryManager c = running(new HookedUpstream(CPU3, 64 * MiB));
        for (PooledMemoryManager wrong : List.of(c, a)) {
            running.put(CPU2, wrong);
            MemoryInfo before = a.memoryInfo();
            InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class,
                    () -> a.createMapping(CPU1, CPU2, 4 * KiB), () -> "a mapping to cpu:2 issued by " + wrong.device());
            assertTrue(e.getMessage().contains(CPU2.toString()) && e.getMessage().contains(wrong.device().toString()),
                    e.getMessage());
            MemoryInfo after = a.memoryInfo();
            assertEquals(before.usedBytes(), after.usedBytes());
            assertEquals(before.activeAllocations(), after.activeAllocations());
            assertEquals(List.of(), a.handles());
            assertEquals(List.of(), c.handles());
        }
    }

    /**
     * cpu:1 closes while a native operation (an NIO read) holds cpu:2's view of its alias: the view
     * cannot close, so cpu:1 keeps its MAPPED pool's chunks. The read ends, cpu:2 frees the alias
     * (its view closes) and closes. Nothing holds cpu:1's memory any more, yet its chunks stayed
     * reserved and its upstream open until a second close of cpu:1, which nobody makes: once both
     * managers are closed, the live bytes must be zero.
     */
    @Test
    void theLastNameOfABlockAClosedPoolKeptForAStuckViewReleasesThePool() throws Exception {
        StuckView s = closedUnderANativeRead();
        HookedUpstream up1 = s.up1();
        HookedUpstream up2 = s.up2();
        PooledMemoryManager b = s.b();
        MemoryMapping mapping = s.mapping();
        assertTrue(up1.liveBytes() > 0, "the view in use kept cpu:1's chunk");
        s.endRead();
        b.deallocate(mapping.target());
        b.close();
        assertEquals(0, up1.liveBytes(), "cpu:1's chunks are still reserved with both managers closed and nothing in use");
        assertTrue(up1.closed, "cpu:1's upstream is closed");
        assertEquals(0, up2.liveBytes());
        assertEquals("", up1.violations.toString() + up2.violations.toString());
    }

    /**
     * As above, but the user closes cpu:1 again once the read ended, as its close's warning says:
     * the second close releases cpu:1's MAPPED pool and closes its upstream. The alias cpu:2 holds
     * was kept at the first close only so that its free could release that pool; with the pool
     * released it must die as at a close without a stuck view. It stayed live: cpu:2 reported it
     * as its handle, refused to close if unused, and kept the closed cpu:1 reachable.
     */
    @Test
    void anAliasKeptForAStuckViewDiesWhenASecondCloseReleasesThePool() throws Exception {
        StuckView s = closedUnderANativeRead(); // cpu:1's MAPPED pool keeps its chunks, and the alias
        HookedUpstream up1 = s.up1();
        HookedUpstream up2 = s.up2();
        PooledMemoryManager a = s.a();
        PooledMemoryManager b = s.b();
        MemoryMapping mapping = s.mapping();
        assertTrue(b.owns(mapping.target()), "kept with the pool");
        s.endRead();
        a.close(); // the second close the first one's warning asks for
        assertEquals(0, up1.liveBytes(), "the second close released cpu:1's pool");
        assertTrue(up1.closed, "cpu:1's upstream is closed");
        assertFalse(b.owns(mapping.target()), "the alias of a released pool is not a live handle of cpu:2");
        DeviceUnavailableException e = assertThrows(DeviceUnavailableException.class,
                () -> b.read(mapping.target(), 0, MemorySegment.ofArray(new byte[8])));
        assertEquals(CPU1, e.device(), e.getMessage());
        assertTrue(b.closeIfUnused(), "cpu:2 names no live block: it closes if unused");
        assertEquals(0, up2.liveBytes());
        assertEquals("", up1.violations.toString() + up2.violations.toString());
    }

    /** cpu:1 closed while an NIO read holds cpu:2's view of its alias; {@link #endRead} ends the read. */
    private record StuckView(HookedUpstream up1, HookedUpstream up2, PooledMemoryManager a, PooledMemoryManager b,
                             MemoryMapping mapping, Pipe pipe, Thread reader) {
        void endRead() throws Exception {
            pipe.source().close();
            reader.join(30_000);
        }
    }

    private StuckView closedUnderANativeRead() throws Exception {
        HookedUpstream up1 = new HookedUpstream(CPU1, 64 * MiB);
        HookedUpstream up2 = new HookedUpstream(CPU2, 64 * MiB);
        PooledMemoryManager a = running(up1);
        PooledMemoryManager b = running(up2);
        MemoryMapping mapping = a.createMapping(CPU1, CPU2, 4 * KiB);
        MemorySegment view = b.mapMemory(mapping.target(), MemoryAccess.READ_WRITE);
        Pipe pipe = Pipe.open();
        start("native-read", () -> pipe.source().read(view.asByteBuffer()));
        Thread reader = threads.get(threads.size() - 1);
        ReviewRacesTest.awaitInNativeRead(reader);
        a.close(); // the view is in use: cpu:1's MAPPED pool keeps its chunks
        return new StuckView(up1, up2, a, b, mapping, pipe, reader);
    }
}
