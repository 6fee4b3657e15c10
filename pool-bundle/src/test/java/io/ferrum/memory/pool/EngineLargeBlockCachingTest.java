package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.MemoryHandle;

/**
 * The large-block caching rule (blocks above 256 KiB): a thread alone on a pool gives them back at
 * their exact size; while threads take turns on the pool lock they are cached, and a cached
 * block serves a request it exceeds by up to one step (12.5 %); caching stops again once the other thread has ended or gone idle.
 */
class EngineLargeBlockCachingTest extends EngineTestSupport {
    @Test
    void aThreadAloneGivesBlocksAbove256KiBBackToThePoolAtTheirExactSize() {
        PooledMemoryManager m = manager(new ArenaUpstream(64 * MiB), pool(4 * MiB, 4 * MiB));
        m.deallocate(m.allocate(600 * KiB, CPU));
        m.allocate(560 * KiB, CPU);
        assertEquals(560 * KiB, m.memoryInfo().usedBytes(), "carved at its size, not the 600 KiB block freed before");
    }

    @Test
    void threadsTakingTurnsOnAPoolCacheLargeBlocksAndReuseOneUpTo12PercentLarger() throws Exception {
        PooledMemoryManager m = manager(new ArenaUpstream(64 * MiB), pool(4 * MiB, 4 * MiB));
        MemoryHandle kept = m.allocate(64 * KiB, CPU); // this thread takes the pool lock first
        AtomicLong usedBeforeReuse = new AtomicLong();
        AtomicLong usedAfterReuse = new AtomicLong();
        Thread worker = new Thread(() -> {
            m.deallocate(m.allocate(600 * KiB, CPU)); // the lock came from another thread: cache large blocks
            usedBeforeReuse.set(m.memoryInfo().usedBytes());
            m.allocate(560 * KiB, CPU);
            usedAfterReuse.set(m.memoryInfo().usedBytes());
        });
        worker.start();
        worker.join(30_000);
        assertFalse(worker.isAlive());
        assertEquals(64 * KiB, usedBeforeReuse.get(), "the cached 600 KiB block counts as free");
        assertEquals(64 * KiB + 600 * KiB, usedAfterReuse.get(), "560 KiB got the cached 600 KiB block");

        // The worker took the lock since this thread last did: this thread caches too.
        m.deallocate(m.allocate(600 * KiB, CPU));
        m.allocate(560 * KiB, CPU);
        assertEquals(64 * KiB + 600 * KiB + 600 * KiB, m.memoryInfo().usedBytes(), "560 KiB got this thread's cached block");
        assertTrue(m.owns(kept));
    }

    @Test
    void aThreadAloneOnThePoolAgainStopsCachingLargeBlocks() throws Exception {
        PooledMemoryManager m = manager(new ArenaUpstream(64 * MiB), pool(4 * MiB, 4 * MiB));
        m.deallocate(m.allocate(64 * KiB, CPU));
        Thread other = new Thread(() -> m.deallocate(m.allocate(64 * KiB, CPU)));
        other.start();
        other.join(30_000);
        assertFalse(other.isAlive());
        visitThePoolLockInARow(m, 2500); // more than SharedPoolRule.CHECK_EVERY (4096) visits; the other thread has ended
        assertLargeBlockGoesBackAtItsExactSize(m);
    }

    @Test
    void aThreadKeepsCachingLargeBlocksWhileAnotherIsServedByItsCacheAloneAndStopsWhenItIsIdle() throws Exception {
        PooledMemoryManager m = manager(new ArenaUpstream(64 * MiB), pool(4 * MiB, 4 * MiB));
        m.deallocate(m.allocate(64 * KiB, CPU)); // this thread takes the pool lock first
        ExecutorService other = Executors.newSingleThreadExecutor();
        try {
            Runnable churn64KiB = () -> m.deallocate(m.allocate(64 * KiB, CPU));
            other.submit(churn64KiB).get(30, TimeUnit.SECONDS); // the other thread takes the lock (a turn), then keeps its block cached
            for (int round = 0; round < 3; round++) {
                // More visits in a row than CHECK_EVERY, so each round checks at least once; the other
                // thread's calls between rounds never reach the pool lock: its cache serves them.
                visitThePoolLockInARow(m, 2100);
                other.submit(churn64KiB).get(30, TimeUnit.SECONDS);
            }
            long used = m.memoryInfo().usedBytes();
            m.deallocate(m.allocate(600 * KiB, CPU));
            m.allocate(560 * KiB, CPU);
            assertEquals(used + 600 * KiB, m.memoryInfo().usedBytes(), "560 KiB got the cached 600 KiB block");

            // The other thread lives on but calls no more: two checks later this thread stops.
            visitThePoolLockInARow(m, 4200);
            assertLargeBlockGoesBackAtItsExactSize(m);
        } finally {
            other.shutdownNow();
        }
    }

    /** Allocates {@code n} blocks of 64 B and frees them: about 2n visits to the pool lock in a row (the cache keeps 8). */
    private static void visitThePoolLockInARow(PooledMemoryManager m, int n) {
        List<MemoryHandle> small = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            small.add(m.allocate(64, CPU));
        }
        small.forEach(m::deallocate);
    }

    private static void assertLargeBlockGoesBackAtItsExactSize(PooledMemoryManager m) {
        long used = m.memoryInfo().usedBytes();
        m.deallocate(m.allocate(600 * KiB, CPU));
        m.allocate(560 * KiB, CPU);
        assertEquals(used + 560 * KiB, m.memoryInfo().usedBytes(), "carved at its size: the 600 KiB block went back");
    }
}
