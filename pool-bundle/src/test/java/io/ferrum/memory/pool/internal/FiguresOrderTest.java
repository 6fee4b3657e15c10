package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolSettings;

/**
 * The cheap figures' fragmentation is "as of the last full memoryInfo": the newest one's, whichever
 * of two concurrent readings gets there last.
 */
class FiguresOrderTest {
    static final long KiB = 1024;
    static final long MiB = 1024 * KiB;

    /**
     * Two threads read the full figures at once: the one that read first (fragmentation 0) was
     * descheduled after it let the pools' locks go and recorded its ratio after the other (the pool
     * fragmented meanwhile): quickInfo went on reporting 0 for a fragmented pool, a figure older
     * than the last full one, until the next memoryInfo. Forced: the first reading is held just
     * after it let the locks go ({@code Figures.unlockedForTests}).
     */
    @Test
    void theCheapFragmentationIsThatOfTheNewestFullFigures() throws Exception {
        MemoryManagerConfig config = MemoryManagerConfig.defaults().withAutoGc(false, 0.85).withPoolConfig(
                MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).alignment(256).build());
        try (PoolEngine m = new PoolEngine(new ArenaUpstream(64 * MiB), config, PoolSettings.defaults().withThreadCache(0),
                null, new HandleTable(1024))) {
            MemoryHandle[] h = new MemoryHandle[4];
            for (int i = 0; i < h.length; i++) {
                h[i] = m.allocate(64 * KiB, Device.cpu());
            }
            CountDownLatch inside = new CountDownLatch(1);
            CountDownLatch go = new CountDownLatch(1);
            Thread first = Thread.currentThread();
            Figures.unlockedForTests = () -> {
                if (Thread.currentThread() != first) {
                    inside.countDown();
                    try {
                        assertTrue(go.await(30, TimeUnit.SECONDS));
                    } catch (InterruptedException e) {
                        throw new AssertionError(e);
                    }
                }
            };
            CompletableFuture<MemoryInfo> older;
            try {
                older = CompletableFuture.supplyAsync(m::memoryInfo);
                assertTrue(inside.await(30, TimeUnit.SECONDS), "the first reading let the locks go");
                m.deallocate(h[1]); // a hole between live blocks
                MemoryInfo newer = m.memoryInfo();
                assertTrue(newer.fragmentationRatio() > 0, newer.toString());
                go.countDown();
                assertEquals(0.0, older.get(30, TimeUnit.SECONDS).fragmentationRatio());
                assertEquals(newer.fragmentationRatio(), m.quickInfo().fragmentationRatio(),
                        "the cheap figures' fragmentation is the newest full figures'");
            } finally {
                Figures.unlockedForTests = null;
                go.countDown();
            }
        }
    }
}
