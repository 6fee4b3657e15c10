package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.DeviceChunk;
import io.ferrum.memory.pool.ForwardingUpstream;
import io.ferrum.memory.pool.HookedUpstream;
import io.ferrum.memory.pool.PoolSettings;

/**
 * A growth adds its chunk under the pool's lock, lets go, and its allocation carves under the lock
 * again: a trim (or auto-GC) between the two found the chunk empty and gave it back, and the
 * allocation reserved another. A growth's chunk is now carved before anyone may trim it.
 */
class GrowthTrimRaceTest {
    static final long KiB = 1024;
    static final long MiB = 1024 * KiB;
    static final Device CPU = Device.cpu();

    @AfterEach
    void noHook() {
        Growth.grownForTests = null;
    }

    @Test
    void aTrimBetweenAGrowthAndItsCarveGivesBackNothingAndTheAllocationReservesOnce() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        AtomicLong reserves = new AtomicLong();
        ForwardingUpstream counting = new ForwardingUpstream(up) {
            @Override
            public DeviceChunk reserve(long bytes, MemoryType type) {
                reserves.incrementAndGet();
                return super.reserve(bytes, type);
            }
        };
        MemoryManagerConfig cfg = MemoryManagerConfig.defaults().withAutoGc(false, 0.85).withPoolConfig(MemoryType.GENERAL,
                MemoryPoolConfig.builder().initialSize(0).growthIncrement(MiB).alignment(256).build());
        try (PoolEngine m = new PoolEngine(counting, cfg, PoolSettings.defaults().withThreadCache(0), null)) {
            AtomicLong trimmed = new AtomicLong(-1);
            Growth.grownForTests = () -> {
                Growth.grownForTests = null;
                try {
                    // Another thread trims while the grown chunk waits for its carve.
                    trimmed.set(CompletableFuture.supplyAsync(m::trim).get(30, TimeUnit.SECONDS));
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            };
            m.allocate(64 * KiB, CPU);
            assertEquals(0, trimmed.get(), "the trim gave back the chunk grown for the allocation");
            assertEquals(1, reserves.get(), "chunks reserved for one allocation");
            assertEquals(MiB, m.memoryInfo().reservedBytes());
            m.allocate(64 * KiB, CPU);
            assertEquals(1, reserves.get(), "the next allocation carves from the same chunk");
        }
        assertEquals(0, up.liveBytes());
        assertEquals("", up.violations());
    }

    /**
     * Another allocation takes the grown chunk's room before the one that grew it carves: that one then
     * fails (the pool at its limit), and the chunk, kept for its carve, must not stay kept: emptied, a
     * trim gives it back.
     */
    @Test
    void aChunkGrownForAnAllocationThatThenFailsIsTrimmedOnceEmpty() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        MemoryManagerConfig cfg = MemoryManagerConfig.defaults().withAutoGc(false, 0.85).withPoolConfig(MemoryType.GENERAL,
                MemoryPoolConfig.builder().initialSize(0).growthIncrement(MiB).maxSize(MiB).alignment(256).build());
        try (PoolEngine m = new PoolEngine(up, cfg, PoolSettings.defaults().withThreadCache(0), null)) {
            AtomicLong taken = new AtomicLong();
            Growth.grownForTests = () -> {
                Growth.grownForTests = null;
                try {
                    // Another thread takes the whole chunk while the grown chunk waits for its carve.
                    taken.set(CompletableFuture.supplyAsync(() -> m.allocate(MiB, CPU).id()).get(30, TimeUnit.SECONDS));
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            };
            assertThrows(io.ferrum.memory.api.OutOfDeviceMemoryException.class, () -> m.allocate(MiB, CPU));
            m.deallocate(new io.ferrum.memory.api.MemoryHandle(taken.get()));
            assertEquals(MiB, m.trim(), "the chunk grown for the failed allocation is trimmed once empty");
            assertEquals(0, up.liveBytes());
        }
        assertEquals("", up.violations());
    }
}
