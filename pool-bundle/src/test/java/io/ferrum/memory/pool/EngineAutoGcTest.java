package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;

/**
 * Auto-GC at {@code gcThreshold}: when an allocation takes a pool's utilisation (its used bytes over
 * the most it may hold: maxSize, or the device's capacity) above the threshold, the engine trims and
 * compacts, once per crossing. Seen through the reserved bytes: a trim gives the pool's empty chunks
 * back. No thread caches, so that every free reaches the pool at once.
 */
class EngineAutoGcTest {
    static final long KiB = 1024;
    static final long MiB = 1024 * KiB;
    static final Device CPU = Device.cpu();
    /** maxSize of the pool: with a threshold of 0.5 the line lies at 4 MiB. */
    static final long MAX = 8 * MiB;

    private static PooledMemoryManager manager(boolean autoGc, double threshold) {
        return manager(new ArenaUpstream(64 * MiB), autoGc, threshold);
    }

    private static PooledMemoryManager manager(DeviceUpstream up, boolean autoGc, double threshold) {
        MemoryManagerConfig config = MemoryManagerConfig.defaults().withAutoGc(autoGc, threshold)
                .withPoolConfig(MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB)
                        .maxSize(MAX).alignment(256).preAllocate(false).build());
        return PooledMemoryManager.create(up, config, PoolSettings.defaults().withThreadCache(0), null);
    }

    private static long reserved(PooledMemoryManager m) {
        return m.memoryInfo().reservedBytes();
    }

    /** 3 MiB live, and an empty chunk of 1 MiB left by a block freed below the line. */
    private static void threeLiveAndOneEmpty(PooledMemoryManager m) {
        m.allocate(3 * MiB, CPU);
        MemoryHandle x = m.allocate(MiB, CPU); // 4 MiB used: at the line, not above it
        m.deallocate(x);
        assertEquals(4 * MiB, reserved(m), "a 3 MiB chunk and an empty 1 MiB chunk");
    }

    @Test
    void crossingTheThresholdTrimsOnceAndFallingBelowRearmsIt() {
        try (PooledMemoryManager m = manager(true, 0.5)) {
            threeLiveAndOneEmpty(m);
            MemoryHandle b = m.allocate(3 * MiB / 2, CPU); // 4.5 MiB used: crosses the line
            assertEquals(3 * MiB + 3 * MiB / 2, reserved(m), "the crossing gave the empty chunk back");

            MemoryHandle y = m.allocate(MiB, CPU); // 5.5 MiB, still above: no crossing
            m.deallocate(y); // 4.5 MiB, still above: not re-armed; y's chunk stays empty
            MemoryHandle c = m.allocate(5 * MiB / 4, CPU);
            assertEquals(3 * MiB + 3 * MiB / 2 + MiB + 5 * MiB / 4, reserved(m),
                    "staying above the line does not run auto-GC again: y's empty chunk stays");

            m.deallocate(b);
            m.deallocate(c); // 3 MiB used: below the line, re-armed
            assertEquals(3 * MiB + 3 * MiB / 2 + MiB + 5 * MiB / 4, reserved(m), "a free alone trims nothing");
            m.allocate(3 * MiB / 2, CPU); // into b's old chunk: 4.5 MiB, crosses again
            assertEquals(3 * MiB + 3 * MiB / 2, reserved(m), "the second crossing gave both empty chunks back");
            assertEquals(3 * MiB + 3 * MiB / 2, m.memoryInfo().usedBytes());
        }
    }

    @Test
    void aThresholdOfOneNeverRunsAutoGcOnAllocation() {
        try (PooledMemoryManager m = manager(true, 1.0)) {
            threeLiveAndOneEmpty(m);
            m.allocate(3 * MiB / 2, CPU);
            assertEquals(4 * MiB + 3 * MiB / 2, reserved(m), "utilisation never lies above 1: the empty chunk stays");
        }
    }

    @Test
    void aThresholdOfZeroRunsAutoGcWhenAnEmptyPoolGetsABlock() {
        try (PooledMemoryManager m = manager(true, 0.0)) {
            MemoryHandle x = m.allocate(MiB, CPU);
            m.deallocate(x); // empty again: re-armed
            m.allocate(3 * MiB / 2, CPU); // a new chunk; the crossing trims x's empty one
            assertEquals(3 * MiB / 2, reserved(m));
        }
    }

    @Test
    void withAutoGcOffTheThresholdIsNotRead() {
        try (PooledMemoryManager m = manager(false, 0.5)) {
            threeLiveAndOneEmpty(m);
            m.allocate(3 * MiB / 2, CPU);
            assertEquals(4 * MiB + 3 * MiB / 2, reserved(m));
        }
    }

    @Test
    void crossingTheThresholdCompactsThePool() {
        try (PooledMemoryManager m = manager(true, 0.5)) {
            MemoryHandle[] p = new MemoryHandle[4];
            for (int i = 0; i < p.length; i++) {
                p[i] = m.allocate(256 * KiB, CPU); // four blocks fill the first 1 MiB chunk
            }
            m.deallocate(p[0]);
            m.deallocate(p[2]); // two holes of 256 KiB
            assertEquals(0.5, m.memoryInfo().fragmentationRatio(), 1e-9);
            m.allocate(4 * MiB - 256 * KiB, CPU); // 4.25 MiB used: crosses the line
            assertEquals(0.0, m.memoryInfo().fragmentationRatio(), 1e-9, "the two live blocks slid together");
            assertEquals(MiB + 4 * MiB - 256 * KiB, reserved(m));
        }
    }

    /**
     * A close that comes while an allocation runs auto-GC (its trim paused inside the upstream's
     * release): the allocation itself is done and returns its handle; the close waits for the
     * release and then gives every chunk back.
     */
    @Test
    void aCloseDuringAutoGcLeavesTheAllocationDoneAndEveryChunkBack() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, true, 0.5);
        threeLiveAndOneEmpty(m);
        HookedUpstream.Pause release = up.pauseNext(HookedUpstream.Call.RELEASE);
        CompletableFuture<MemoryHandle> crossing = CompletableFuture.supplyAsync(() -> m.allocate(3 * MiB / 2, CPU),
                runnable -> new Thread(runnable, "crossing").start());
        release.awaitArrival(); // the crossing's trim gives the empty chunk back, paused
        Thread closer = new Thread(m::close, "closer");
        closer.start();
        RaceHarness.awaitParked(closer); // the close waits for the trim's release
        assertTrue(m.isClosed());
        release.release();
        MemoryHandle h = crossing.get(30, TimeUnit.SECONDS);
        closer.join(TimeUnit.SECONDS.toMillis(30));
        assertTrue(h.isValid(), "the allocation was done before the close: it returned its handle");
        assertEquals(0, up.liveBytes(), "every chunk went back");
        assertEquals("", up.violations.toString());
    }
}
