package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;

/**
 * The large-block rule ({@link SharedPoolRule}) decision by decision: the first visit of a pool
 * only records the thread; a visit after another thread's turns large-block caching on at once;
 * visits in a row decide nothing until the {@value SharedPoolRule#CHECK_EVERY}th, which caches
 * large blocks only if another live thread called its cache since the last check. Other threads'
 * caches are made on real threads, kept alive (or ended) by the test.
 */
class LargeBlockPolicyTest {
    private final LargeBlockPolicy rule = SharedPoolRule.INSTANCE;
    private final Pool pool = new Pool(MemoryType.GENERAL, MemoryPoolConfig.defaults(), new DeviceAccount(1L << 30, 4096), Double.NaN);
    private final ThreadCache mine = new ThreadCache(1, 1 << 20, 0);
    private final List<ThreadCache> caches = new ArrayList<>(List.of(mine));
    private final CountDownLatch release = new CountDownLatch(1);
    private final List<Thread> threads = new ArrayList<>();

    @AfterEach
    void endOtherThreads() throws InterruptedException {
        release.countDown();
        for (Thread t : threads) {
            t.join(TimeUnit.SECONDS.toMillis(30));
        }
    }

    /** @return a cache owned by a new thread, which stays alive until the test ends unless {@code alive} is false */
    private ThreadCache othersCache(boolean alive) throws InterruptedException {
        AtomicReference<ThreadCache> made = new AtomicReference<>();
        CountDownLatch ready = new CountDownLatch(1);
        Thread t = new Thread(() -> {
            made.set(new ThreadCache(1, 1 << 20, 0));
            ready.countDown();
            if (alive) {
                try {
                    release.await();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        });
        threads.add(t);
        t.start();
        assertTrue(ready.await(30, TimeUnit.SECONDS));
        if (!alive) {
            t.join();
        }
        ThreadCache c = made.get();
        rule.started(c);
        caches.add(c);
        return c;
    }

    /** The other thread's cache serves {@code n} calls (the rule reads only the count). */
    private static void calls(ThreadCache c, int n) {
        for (int i = 0; i < n; i++) {
            c.pop(0, 16);
        }
    }

    private void visits(int n) {
        for (int i = 0; i < n; i++) {
            rule.sawPoolLock(mine, pool, caches);
        }
    }

    @Test
    void aNewCacheDoesNotCacheLargeBlocksAndStartsCounting() {
        rule.started(mine);
        assertFalse(mine.cachesLarge);
        assertEquals(SharedPoolRule.CHECK_EVERY, mine.untilCheck);
    }

    @Test
    void theFirstVisitOfAPoolOnlyRecordsTheThread() {
        rule.started(mine);
        visits(1);
        assertEquals(mine.ownerId, pool.lastCacheThread);
        assertFalse(mine.cachesLarge);
        assertEquals(SharedPoolRule.CHECK_EVERY, mine.untilCheck, "the first visit counts as no visit in a row");
    }

    @Test
    void aVisitAfterAnotherThreadsCachesLargeBlocksAndRestartsTheCount() {
        rule.started(mine);
        visits(1);
        visits(10);
        assertEquals(SharedPoolRule.CHECK_EVERY - 10, mine.untilCheck);
        pool.lastCacheThread = mine.ownerId + 1; // another thread's cache path took the lock since
        visits(1);
        assertTrue(mine.cachesLarge);
        assertEquals(mine.ownerId, pool.lastCacheThread);
        assertEquals(SharedPoolRule.CHECK_EVERY, mine.untilCheck);
    }

    @Test
    void visitsInARowDecideNothingUntilTheCheck() throws Exception {
        rule.started(mine);
        othersCache(true); // a live thread that never calls
        visits(1);
        pool.lastCacheThread = mine.ownerId + 1;
        visits(1); // caching large blocks now
        visits(SharedPoolRule.CHECK_EVERY - 1);
        assertTrue(mine.cachesLarge, "one visit short of the check: still caching");
        assertEquals(1, mine.untilCheck);
        visits(1);
        assertFalse(mine.cachesLarge, "the check: no other thread called since, so this thread is alone");
        assertEquals(SharedPoolRule.CHECK_EVERY, mine.untilCheck);
    }

    @Test
    void aCheckCachesLargeBlocksWhileAnotherLiveThreadCallsItsCache() throws Exception {
        rule.started(mine);
        ThreadCache other = othersCache(true);
        visits(1);
        calls(other, 3);
        visits(SharedPoolRule.CHECK_EVERY);
        assertTrue(mine.cachesLarge, "at the first check: the other thread has called");
        assertEquals(3, mine.othersCalls);
        calls(other, 1);
        visits(SharedPoolRule.CHECK_EVERY);
        assertTrue(mine.cachesLarge, "it called again since the last check");
        visits(SharedPoolRule.CHECK_EVERY);
        assertFalse(mine.cachesLarge, "no call since the last check: it is idle");
    }

    @Test
    void anEndedThreadsCallsDoNotCount() throws Exception {
        rule.started(mine);
        ThreadCache ended = othersCache(false);
        calls(ended, 5);
        visits(1);
        visits(SharedPoolRule.CHECK_EVERY);
        assertFalse(mine.cachesLarge);
        assertEquals(0, mine.othersCalls);
    }
}
