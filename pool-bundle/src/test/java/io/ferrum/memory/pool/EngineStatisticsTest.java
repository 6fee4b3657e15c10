package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.time.Instant;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.AccessPatternType;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryAccessStats;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryUsageHint;

/**
 * Access statistics (sequential, random and burst patterns, read on an injected clock), statistics
 * turned off, and usage hints and prefetch passed to the upstream.
 */
class EngineStatisticsTest extends EngineTestSupport {
    @Test
    void accessStatisticsDetectSequentialRandomAndBurst() {
        AtomicLong clock = new AtomicLong(1_000_000_000L);
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB)), PoolSettings.defaults().withNanoClock(clock::get));
        MemoryHandle src = m.allocate(64 * KiB, CPU);
        MemoryHandle seq = m.allocate(64 * KiB, CPU);
        MemoryHandle rnd = m.allocate(64 * KiB, CPU);
        assertEquals(AccessPatternType.UNKNOWN, m.accessStats(seq).orElseThrow().patternType());
        for (int i = 0; i < 8; i++) {
            clock.addAndGet(10_000_000L);
            m.copy(src, seq, 4096, 0, i * 4096L);
            m.copy(src, rnd, 4096, 0, ((i * 7) % 8) * 4096L + (i % 2) * 100);
        }
        var s = m.accessStats(seq).orElseThrow();
        assertEquals(8, s.writeCount());
        assertEquals(0, s.readCount());
        assertEquals(4096, s.avgWriteSize());
        assertEquals(AccessPatternType.SEQUENTIAL, s.patternType());
        assertEquals(AccessPatternType.RANDOM, m.accessStats(rnd).orElseThrow().patternType());
        assertEquals(16, m.accessStats(src).orElseThrow().readCount());

        MemoryHandle burst = m.allocate(64 * KiB, CPU);
        clock.addAndGet(100_000_000L); // idle 100 ms, then 8 accesses 0.1 ms apart
        for (int i = 0; i < 8; i++) {
            clock.addAndGet(100_000L);
            m.copy(src, burst, 16, 0, (i * 5000L) % 60000);
        }
        assertEquals(AccessPatternType.BURST, m.accessStats(burst).orElseThrow().patternType());
    }

    /**
     * On the system clock, access times come from the coarse clock (PERFORMANCE item 15), which lags
     * the exact one by up to a millisecond: an async write stamped with the exact clock put the
     * synchronous write after it earlier in time. Each round fails unless a tick falls between the
     * two calls.
     */
    @Test
    void lastAccessNeverStepsBackFromAnAsyncWriteToTheNextWrite() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB)), PoolSettings.defaults());
        MemoryHandle h = m.allocate(4096, CPU);
        MemorySegment one = MemorySegment.ofArray(new byte[] {1});
        for (int round = 0; round < 50; round++) {
            m.writeAsync(h, 0, one, null).toCompletableFuture().join(); // the default stream: done on return
            Instant afterAsync = m.accessStats(h).orElseThrow().lastAccess();
            m.write(h, 1, one);
            Instant afterWrite = m.accessStats(h).orElseThrow().lastAccess();
            assertTrue(!afterWrite.isBefore(afterAsync),
                    "round " + round + ": the write came after the async write but reads " + afterWrite + " < " + afterAsync);
        }
        assertEquals(100, m.accessStats(h).orElseThrow().writeCount());
    }

    /**
     * The same for {@code mapMemory}: it stamped its view with the exact clock, so the write after
     * it read as earlier. Each round fails unless a tick of the coarse clock falls between the two calls.
     */
    @Test
    void lastAccessNeverStepsBackFromAMappedViewToTheNextWrite() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB)), PoolSettings.defaults());
        MemoryHandle h = m.allocate(4096, CPU);
        MemorySegment one = MemorySegment.ofArray(new byte[] {1});
        for (int round = 0; round < 50; round++) {
            m.mapMemory(h, MemoryAccess.READ_ONLY);
            m.unmapMemory(h);
            Instant afterMap = m.accessStats(h).orElseThrow().lastAccess();
            m.write(h, 1, one);
            Instant afterWrite = m.accessStats(h).orElseThrow().lastAccess();
            assertTrue(!afterWrite.isBefore(afterMap),
                    "round " + round + ": the write came after the view but reads " + afterWrite + " < " + afterMap);
        }
        assertEquals(50, m.accessStats(h).orElseThrow().readCount());
        assertEquals(50, m.accessStats(h).orElseThrow().writeCount());
    }

    /**
     * On memory the CPU cannot address, a view is a staging copy read from the device first. When the
     * device fails that copy, no view was opened and the action never ran: the call counts no access,
     * as a failed {@code read} counts none. It counted a read and a write of the whole block.
     */
    @Test
    void aViewWhoseStagingCopyFailedCountsNoAccess() {
        FailingHostCopies up = new FailingHostCopies(new ArenaUpstream(CPU, 64 * MiB, false));
        PooledMemoryManager m = PooledMemoryManager.create(up, config(pool(MiB, MiB)), PoolSettings.defaults(), null);
        toClose.add(m);
        MemoryHandle h = m.allocate(4096, CPU);
        up.failNext = true;
        assertThrows(IllegalStateException.class, () -> m.read(h, 0, MemorySegment.ofArray(new byte[16])));
        up.failNext = true;
        boolean[] ran = {false};
        assertThrows(IllegalStateException.class, () -> m.withMapped(h, MemoryAccess.READ_WRITE, view -> ran[0] = true));
        assertFalse(ran[0], "the action never ran");
        MemoryAccessStats stats = m.accessStats(h).orElseThrow();
        assertEquals(0, stats.readCount(), "reads counted after two calls that read nothing");
        assertEquals(0, stats.writeCount(), "writes counted after a call that wrote nothing");
        m.withMapped(h, MemoryAccess.READ_WRITE, view -> view.byteSize());
        assertEquals(1, m.accessStats(h).orElseThrow().readCount(), "a view that opened counts");
    }

    /** A device the CPU cannot address ({@code real}), whose next copy to the host fails once armed. */
    static final class FailingHostCopies extends ForwardingUpstream {
        volatile boolean failNext;

        FailingHostCopies(ArenaUpstream real) {
            super(real);
        }

        @Override
        public void copyToHost(DeviceChunk src, long srcOffset, MemorySegment dst, long bytes) {
            if (failNext) {
                failNext = false;
                throw new IllegalStateException("test: the device reports a copy error");
            }
            real.copyToHost(src, srcOffset, dst, bytes);
        }
    }

    @Test
    void statisticsOffMeansNoStatistics() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB).toBuilder().stats(false).build());
        MemoryHandle h = m.allocate(100, CPU);
        assertTrue(m.accessStats(h).isEmpty());
    }

    /**
     * enableStats is "keep access statistics and bandwidth figures (off is faster)": with it off in
     * every pool, copies were still timed (two clock reads each) and the device reported a bandwidth.
     */
    @Test
    void statisticsOffMeansNoBandwidthEither() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB).toBuilder().stats(false).build());
        MemoryHandle a = m.allocate(64 * KiB, CPU);
        MemoryHandle b = m.allocate(64 * KiB, CPU);
        MemorySegment bytes = MemorySegment.ofArray(new byte[64 * 1024]);
        m.copy(a, b, 64 * KiB, 0, 0);
        m.write(a, 0, bytes);
        m.read(a, 0, bytes);
        m.writeAsync(a, 0, bytes, null).toCompletableFuture().join(); // the default stream: done on return
        assertTrue(m.memoryInfo().bandwidthGbps().isEmpty(), "bandwidth with statistics off: " + m.memoryInfo().bandwidthGbps());
    }

    @Test
    void usageHintsAndPrefetchReachTheUpstream() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryHandle h = m.allocate(100, CPU);
        m.setUsageHint(h, MemoryUsageHint.READ_MOSTLY);
        assertEquals(MemoryUsageHint.READ_MOSTLY, up.lastHint);
        assertEquals(MemoryUsageHint.READ_MOSTLY, m.usageHint(h).orElseThrow());
        m.prefetch(h, Device.cpu());
        assertEquals(Device.cpu(), up.lastPrefetchTarget);
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.setUsageHint(h, null));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.prefetch(h, null));
    }
}
