package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.AttackRacesTest.FailingCopies;
import io.ferrum.memory.pool.HookedUpstream.Call;
import io.ferrum.memory.pool.HookedUpstream.Pause;

/**
 * An attack on the pool engine's maintenance (defragment, trim, auto-GC, pressure, zeroing) against
 * what must be respected meanwhile (docs/RELIABILITY.md, "Maintenance under use"). Each interleaving
 * is forced: a paused upstream call, a held scope, a latch; every wait is bounded.
 */
class MaintenanceAttackTest extends RaceHarness {

    /**
     * An evacuation carves its destination before it copies and gives the old place back after: the
     * pool's own figures are read under its lock, which the move holds, but the device's lock-free
     * account (the cheap figures, the pressure level) saw the moving block twice meanwhile. An
     * allocation of another pool then heard a level the device never had, and nothing told it back.
     */
    @Test
    void anEvacuationInFlightShowsNoBlockTwiceToTheCheapFiguresOrThePressureLevel() throws Exception {
        HookedUpstream up = new HookedUpstream(20 * MiB); // MEDIUM from 14 MiB
        PooledMemoryManager m = manager(up, config(pool(MiB, 4 * MiB, 256)), PoolSettings.defaults().withThreadCache(0),
                null);
        MemoryHandle[] a = new MemoryHandle[4];
        for (int i = 0; i < a.length; i++) {
            a[i] = m.allocate(MiB / 4, MemoryType.TENSOR, CPU); // chunk A, 1 MiB, four quarters
        }
        MemoryHandle b = m.allocate(MiB / 4, MemoryType.TENSOR, CPU); // chunk B, 4 MiB
        write(m, b, (byte) 0x3C);
        m.deallocate(a[3]); // nothing slides: the first copy is b's evacuation into A's last quarter
        m.allocate(12 * MiB + 7 * MiB / 8, CPU); // ballast: 13.875 MiB used, LOW
        List<MemoryPressure> heard = new CopyOnWriteArrayList<>();
        m.setPressureCallback(heard::add);
        MemoryInfo before = m.memoryInfo();
        Pause copy = up.pauseNext(Call.COPY);
        CompletableFuture<DefragmentationStats> defrag = start("defragment",
                () -> m.defragment(CPU).toCompletableFuture().get());
        MemoryInfo during;
        try {
            copy.awaitArrival();
            during = m.quickInfo();
            m.allocate(256, CPU); // 13.875 MiB + 256 bytes: still LOW
        } finally {
            copy.release();
        }
        assertEquals(1, defrag.get(30, TimeUnit.SECONDS).blocksMoved());
        assertEquals(List.of(), heard, "levels told while the device stayed LOW");
        assertEquals(before.usedBytes(), during.usedBytes(), "the cheap figures during the move");
        assertEquals(before.activeAllocations(), during.activeAllocations(), "the cheap figures' live blocks during the move");
        assertEquals(m.memoryInfo().usedBytes(), m.quickInfo().usedBytes());
        EngineTestSupport.assertContent(m, b, (byte) 0x3C);
    }

    /**
     * The out-of-memory hook trims (the pool then has room to grow) and compacts: a device that
     * failed the compaction's copy made the allocation throw the copy's error, where trying again
     * would have grown the pool into the room the trim made. Auto-GC is tidying: its failure is
     * logged, and the allocation goes on, as when an allocation crosses the threshold.
     */
    @Test
    void anOutOfMemoryHookWhoseCompactionCopyFailsStillLetsTheAllocationGrowIntoWhatItsTrimGaveBack() {
        FailingCopies up = new FailingCopies(new HookedUpstream(64 * MiB));
        List<String> warnings = new CopyOnWriteArrayList<>();
        MemoryManagerConfig cfg = MemoryManagerConfig.defaults().withAutoGc(true, 1.0) // only the hook runs it
                .withPoolConfig(MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB)
                        .maxSize(8 * MiB).alignment(256).preAllocate(false).build());
        PooledMemoryManager m = manager(up, cfg,
                PoolSettings.defaults().withThreadCache(0).withLog(EngineTestSupport.warningsInto(warnings)), null);
        MemoryHandle[] p = new MemoryHandle[4];
        for (int i = 0; i < p.length; i++) {
            p[i] = m.allocate(256 * KiB, CPU); // chunk A, 1 MiB
        }
        write(m, p[1], (byte) 0x11);
        MemoryHandle emptied = m.allocate(3 * MiB, CPU); // chunk B, 3 MiB
        m.allocate(3 * MiB, CPU); // chunk C, 3 MiB: 7 of 8 MiB held
        m.deallocate(emptied); // B is empty: a trim gives it back
        m.deallocate(p[0]); // p[1] would slide into this hole
        up.failNextCopy = true;
        MemoryHandle big = m.allocate(3 * MiB + 256 * KiB, CPU); // B cannot hold it, nor the limit a growth
        assertTrue(m.owns(big), "the allocation grew into the room the trim gave back");
        assertEquals(MiB + 3 * MiB + 3 * MiB + 256 * KiB, m.memoryInfo().reservedBytes());
        assertEquals(1, warnings.size(), warnings.toString());
        EngineTestSupport.assertContent(m, p[1], (byte) 0x11);
    }

    private static void write(PooledMemoryManager m, MemoryHandle h, byte seed) {
        EngineTestSupport.write(m, h, seed);
    }
}
