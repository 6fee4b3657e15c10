package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolSettings;

/**
 * The level a pressure teller tells is one the device had: its used bytes and the bytes in thread
 * caches (which the level leaves out) read at one moment. Read apart, a cache drained between the
 * two reads made the level count its blocks as used: a level that never was, told, then taken back.
 */
class PressureLevelMomentTest {
    static final long KiB = 1024;
    static final long MiB = 1024 * KiB;
    static final Device CPU = Device.cpu();

    @AfterEach
    void noHook() {
        PressureNotifier.tellingForTests = null;
    }

    static MemoryManagerConfig config() {
        MemoryPoolConfig oneMiB = MemoryPoolConfig.builder().initialSize(0).growthIncrement(MiB).alignment(256).build();
        MemoryManagerConfig cfg = MemoryManagerConfig.defaults().withAutoGc(false, 0.85);
        for (MemoryType t : MemoryType.values()) {
            cfg = cfg.withPoolConfig(t, oneMiB);
        }
        return cfg;
    }

    @Test
    void aCacheDrainedWhileTheLevelIsReadNeverMakesATellOfALevelTheDeviceNeverHad() throws Exception {
        try (PoolEngine m = new PoolEngine(new ArenaUpstream(64 * MiB), config(),
                PoolSettings.defaults().withCapacity(5 * MiB), null)) {
            m.allocate(5 * MiB / 2, MemoryType.TENSOR, CPU); // 50 %: LOW
            // Another thread keeps 1 MiB of freed blocks in its cache: used for the pools, free for the level.
            CountDownLatch cached = new CountDownLatch(1);
            CountDownLatch drain = new CountDownLatch(1);
            CountDownLatch drained = new CountDownLatch(1);
            CompletableFuture<Void> owner = CompletableFuture.runAsync(() -> {
                List<MemoryHandle> hs = new ArrayList<>();
                for (int i = 0; i < 8; i++) {
                    hs.add(m.allocate(128 * KiB, CPU));
                }
                hs.forEach(m::deallocate);
                cached.countDown();
                try {
                    if (drain.await(30, TimeUnit.SECONDS)) {
                        m.trim(); // its own cache goes back to the pool at once
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } finally {
                    drained.countDown();
                }
            }, r -> new Thread(r, "cache owner").start());
            assertEquals(true, cached.await(30, TimeUnit.SECONDS));
            assertEquals(5 * MiB / 2, m.memoryInfo().usedBytes(), "the owner's blocks are free, in its cache");
            List<MemoryPressure> heard = new CopyOnWriteArrayList<>();
            m.setPressureCallback(heard::add);
            // The teller of the next change lets the owner drain its cache before it reads the level.
            PressureNotifier.tellingForTests = () -> {
                PressureNotifier.tellingForTests = null;
                drain.countDown();
                try {
                    drained.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            };
            m.allocate(5 * MiB / 4, MemoryType.CACHE, CPU); // 3.75 MiB, 75 %: MEDIUM (with the cached MiB 95 %)
            owner.get(30, TimeUnit.SECONDS);
            assertEquals(15 * MiB / 4, m.memoryInfo().usedBytes());
            assertEquals(List.of(MemoryPressure.MEDIUM), heard, "levels told while the device went from LOW to MEDIUM");
        }
    }

    /**
     * The closer look (every pool's lock) runs on a change of level only: with cached blocks taking
     * the account's used bytes past the quick bound while the level stays, or at a level held, the
     * quick look and the closer one agree, so an allocate or free that changes no level never takes it.
     */
    @Test
    void anAllocateOrFreeThatChangesNoLevelNeverTakesTheCloserLook() throws Exception {
        try (PoolEngine m = new PoolEngine(new ArenaUpstream(64 * MiB), config(),
                PoolSettings.defaults().withCapacity(5 * MiB), null)) {
            m.allocate(5 * MiB / 2, MemoryType.TENSOR, CPU); // 50 %: LOW
            List<MemoryHandle> hs = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                hs.add(m.allocate(128 * KiB, CPU));
            }
            hs.forEach(m::deallocate); // cached: 70 % for the account, 50 % for the level
            assertEquals(5 * MiB / 2, m.memoryInfo().usedBytes(), "the blocks are in this thread's cache");
            java.lang.reflect.Field p = PoolEngine.class.getDeclaredField("pressure");
            p.setAccessible(true);
            java.lang.reflect.Field a = PressureNotifier.class.getDeclaredField("account");
            a.setAccessible(true);
            assertEquals(7 * MiB / 2, ((DeviceAccount) a.get(p.get(m))).used(), "the account counts the cached blocks");
            java.util.concurrent.atomic.AtomicInteger closerLooks = new java.util.concurrent.atomic.AtomicInteger();
            PressureNotifier.tellingForTests = closerLooks::incrementAndGet;
            List<MemoryPressure> heard = new CopyOnWriteArrayList<>();
            m.setPressureCallback(heard::add);
            for (int i = 0; i < 1000; i++) {
                m.deallocate(m.allocate(128 * KiB, CPU)); // from and back into the cache
            }
            assertEquals(0, closerLooks.get(), "closer looks at LOW with the caches past the quick bound");
            MemoryHandle medium = m.allocate(5 * MiB / 4, MemoryType.CACHE, CPU); // 75 %: MEDIUM
            for (int i = 0; i < 1000; i++) {
                m.deallocate(m.allocate(128 * KiB, CPU));
            }
            assertEquals(1, closerLooks.get(), "closer looks: one for the change to MEDIUM, none at MEDIUM");
            m.deallocate(medium);
            assertEquals(2, closerLooks.get(), "and one for the change back");
            assertEquals(List.of(MemoryPressure.MEDIUM, MemoryPressure.LOW), heard);
        }
    }
}
