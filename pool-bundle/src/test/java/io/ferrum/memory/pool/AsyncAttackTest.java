package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryMapping;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.pool.HookedUpstream.Call;
import io.ferrum.memory.pool.HookedUpstream.Pause;

/**
 * Races found by an attack on the asynchronous and cross-device paths (an async review, 2026-12),
 * forced with {@link HookedUpstream} pauses; each test failed before its fix.
 */
class AsyncAttackTest extends RaceHarness {
    static final Device CPU1 = Device.cpu(1);
    static final Device CPU2 = Device.cpu(2);
    static final Device CPU3 = Device.cpu(3);

    /**
     * cpu:2 holds aliases of a block of cpu:1 and of a block of cpu:3 (two cross-device mappings) and
     * copies between them. The copy pins both blocks in their owners' pools, none in cpu:2's, so
     * cpu:2's close does not wait for it and closes cpu:2's upstream. The copy must therefore run in
     * an upstream whose manager it holds: it ran in cpu:2's, which was closed under it (a GPU's
     * context destroyed under a running copy).
     */
    @Test
    void aCopyBetweenTwoPeersBlocksNeverRunsInTheUpstreamOfAManagerThatClosesUnderIt() throws Exception {
        HookedUpstream up1 = new HookedUpstream(CPU1, 64 * MiB);
        HookedUpstream up2 = new HookedUpstream(CPU2, 64 * MiB);
        HookedUpstream up3 = new HookedUpstream(CPU3, 64 * MiB);
        Map<Device, PooledMemoryManager> running = new ConcurrentHashMap<>();
        PoolSettings settings = PoolSettings.defaults().withPeers(running::get);
        PooledMemoryManager a = manager(up1, config(pool(MiB, MiB, 256)), settings, null);
        PooledMemoryManager b = manager(up2, config(pool(MiB, MiB, 256)), settings, null);
        PooledMemoryManager c = manager(up3, config(pool(MiB, MiB, 256)), settings, null);
        running.put(CPU1, a);
        running.put(CPU2, b);
        running.put(CPU3, c);
        MemoryMapping fromA = a.createMapping(CPU1, CPU2, 4 * KiB);
        MemoryMapping fromC = c.createMapping(CPU3, CPU2, 4 * KiB);
        byte[] data = {1, 2, 3, 4, 5, 6, 7, 8};
        a.write(fromA.source(), 0, MemorySegment.ofArray(data));

        // Paused in whichever upstream the copy goes through.
        Pause[] pauses = {up1.pauseNext(Call.COPY), up2.pauseNext(Call.COPY), up3.pauseNext(Call.COPY)};
        CompletableFuture<Void> copying = start("peer-copy", () -> {
            b.copyAsync(MemoryTransfer.of(fromA.target(), fromC.target(), data.length), null)
                    .toCompletableFuture().get(30, TimeUnit.SECONDS);
            return null;
        });
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!pauses[0].arrived() && !pauses[1].arrived() && !pauses[2].arrived()) {
            assertTrue(System.nanoTime() < deadline, "the copy never reached an upstream");
            Thread.onSpinWait();
        }
        b.close(); // nothing of cpu:2's pools is pinned: it closes at once
        boolean ranInClosedUpstream = pauses[1].arrived() && up2.closed;
        for (Pause p : pauses) {
            p.release();
        }
        copying.get(30, TimeUnit.SECONDS);
        assertTrue(!ranInClosedUpstream, "the copy ran in cpu:2's upstream, closed under it by cpu:2's close");
        byte[] got = new byte[data.length];
        c.read(fromC.source(), 0, MemorySegment.ofArray(got));
        assertArrayEquals(data, got, "the bytes arrived in cpu:3's block");
        // HookedUpstream reports a chunk that is not its own as released, and a copy between two
        // managers' blocks always hands one upstream the other's chunk: only the rest is checked.
        for (HookedUpstream up : new HookedUpstream[] {up1, up2, up3}) {
            assertEquals("", up.violations.toString().replace("call on a released chunk; ", ""), up.device().toString());
        }
    }
}
