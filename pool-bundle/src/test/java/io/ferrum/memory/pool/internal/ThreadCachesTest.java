package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.internal.PoolFixture.HeapUpstream;

/**
 * The registry of a manager's thread caches: one cache per platform thread, none for virtual
 * threads, when off, or once closed; a drain of all empties the caller's cache at once and every
 * other thread's on its next call (forced: the other thread waits on a latch between its calls);
 * the caches of threads that ended are swept, their blocks back in their pools; close empties every
 * thread's holder.
 */
class ThreadCachesTest {
    static final long KiB = 1024;
    static final int GENERAL = MemoryType.GENERAL.ordinal();

    private final DeviceAccount account = new DeviceAccount(1L << 30, 4 * KiB);
    private final Pool[] pools = new Pool[MemoryType.values().length];
    private final HandleTable handles = new HandleTable();
    private final Lifecycle lifecycle;
    private final ThreadCaches caches;
    /** The CPU the registry is told the caller runs on; -1: unknown, the thread's id picks. */
    private final AtomicInteger cpuNow = new AtomicInteger(-1);
    private final List<Thread> threads = new ArrayList<>();
    private final CountDownLatch end = new CountDownLatch(1);

    ThreadCachesTest() {
        MemoryPoolConfig cfg = MemoryPoolConfig.builder().initialSize(64 * KiB).growthIncrement(64 * KiB).alignment(256).build();
        for (MemoryType t : MemoryType.values()) {
            pools[t.ordinal()] = new Pool(t, cfg, account, Double.NaN);
        }
        pools[GENERAL].addChunk(HeapUpstream.chunk(1024 * KiB, 1L << 20));
        lifecycle = new Lifecycle(new HeapUpstream(), account, null, pools);
        caches = new ThreadCaches(pools, handles, lifecycle, SharedPoolRule.INSTANCE, 1024 * KiB, true, cpuNow::get);
    }

    @AfterEach
    void endThreads() throws InterruptedException {
        end.countDown();
        for (Thread t : threads) {
            t.join(TimeUnit.SECONDS.toMillis(30));
        }
    }

    /** Carves a block of the general pool and puts it in {@code tc}, as a free into the cache does. */
    private Block cached(ThreadCache tc, long size) {
        Pool p = pools[GENERAL];
        p.acquire();
        Block b;
        try {
            b = p.carve(size, 256);
        } finally {
            p.lock.unlock();
        }
        assertTrue(tc.push(GENERAL, b));
        return b;
    }

    /** Carves a block of the general pool, as an allocation does; it is used in its pool. */
    private Block carved(long size) {
        Pool p = pools[GENERAL];
        p.acquire();
        try {
            return p.carve(size, 256);
        } finally {
            p.lock.unlock();
        }
    }

    /** Offers {@code n} new blocks of {@code size} to {@code tc} from another thread, as its frees do. */
    private List<Block> offeredFromAnotherThread(ThreadCache tc, int n, long size) throws Exception {
        List<Block> blocks = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            blocks.add(carved(size));
        }
        assertEquals(n, onThread(() -> blocks.stream().filter(b -> tc.offer(GENERAL, b)).count()).get(30, TimeUnit.SECONDS));
        return blocks;
    }

    /** Runs {@code body} on a new virtual thread and waits for its result. */
    private static <T> T onVirtualThread(Callable<T> body) throws Exception {
        AtomicReference<T> out = new AtomicReference<>();
        AtomicReference<Exception> failed = new AtomicReference<>();
        Thread.ofVirtual().start(() -> {
            try {
                out.set(body.call());
            } catch (Exception e) {
                failed.set(e);
            }
        }).join();
        if (failed.get() != null) {
            throw failed.get();
        }
        return out.get();
    }

    /** Runs {@code body} on a new platform thread. */
    private <T> CompletableFuture<T> onThread(Callable<T> body) {
        CompletableFuture<T> out = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                out.complete(body.call());
            } catch (Throwable e) {
                out.completeExceptionally(e);
            }
        });
        threads.add(t);
        t.start();
        return out;
    }

    private static void await(CountDownLatch l) {
        try {
            assertTrue(l.await(30, TimeUnit.SECONDS));
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
    }

    @Test
    void aThreadGetsOneCacheOfItsOwn() throws Exception {
        assertNull(caches.own(), "none before the first call");
        ThreadCache mine = caches.cache();
        assertNotNull(mine);
        assertSame(mine, caches.cache());
        assertSame(mine, caches.own());
        assertSame(Thread.currentThread(), mine.owner);
        ThreadCache theirs = onThread(caches::cache).get(30, TimeUnit.SECONDS);
        assertNotNull(theirs);
        assertFalse(mine == theirs);
        cached(mine, KiB);
        cached(theirs, 4 * KiB);
        assertEquals(5 * KiB, caches.cachedBytes());
        assertArrayEquals(new long[] {5 * KiB, 2}, caches.cached());
        assertArrayEquals(new long[] {5 * KiB, 2}, caches.cachedAtOneMoment());
        pools[GENERAL].acquire();
        try {
            assertEquals(5 * KiB, caches.cachedBytesOf(pools[GENERAL]));
            assertEquals(0, caches.cachedBytesOf(pools[MemoryType.CACHE.ordinal()]));
        } finally {
            pools[GENERAL].lock.unlock();
        }
    }

    @Test
    void noCacheWhenOffOrOnceClosed() throws Exception {
        ThreadCaches off = new ThreadCaches(pools, handles, lifecycle, SharedPoolRule.INSTANCE, 1024 * KiB, false);
        assertFalse(off.enabled());
        assertNull(off.own());
        off.drainAll();
        assertFalse(off.sweepDead());
        assertArrayEquals(new long[2], off.cachedAtOneMoment());
        assertEquals(0, off.cachedBytesOf(pools[GENERAL]));

        lifecycle.closed = true;
        assertNull(onThread(caches::cache).get(30, TimeUnit.SECONDS), "a closed manager makes no cache");
        assertNull(onVirtualThread(caches::cache), "nor leases a shared one");
    }

    @Test
    void aVirtualThreadLeasesASharedCacheTakesTheNextWhenItsOwnIsHeldAndThePoolPathWhenBothAre() throws Exception {
        List<ThreadCache> leased = onVirtualThread(() -> {
            List<ThreadCache> out = new ArrayList<>();
            for (int i = 0; i < 3; i++) {
                out.add(caches.cache()); // no lease ended between the calls: each finds the last one's held
            }
            return out;
        });
        ThreadCache first = leased.get(0);
        ThreadCache second = leased.get(1);
        assertNotNull(first);
        assertTrue(first.shared);
        assertNull(first.home, "blocks it serves record no allocating thread");
        assertNotNull(second);
        assertFalse(first == second, "a held cache is never leased twice");
        assertNull(leased.get(2), "both it may take are held: the pool path");
        assertFalse(first.tryLease());
        first.endLease();
        assertTrue(first.tryLease());
        first.endLease();
        second.endLease();
    }

    @Test
    void aVirtualThreadLeasesTheSharedCacheOfTheCpuItRunsOnWhateverItsId() throws Exception {
        cpuNow.set(0);
        ThreadCache onZero = onVirtualThread(caches::cache);
        onZero.endLease();
        cpuNow.set(1);
        ThreadCache onOne = onVirtualThread(caches::cache);
        onOne.endLease();
        assertNotNull(onZero);
        assertFalse(onZero == onOne, "two CPUs, two caches");
        for (int i = 0; i < 16; i++) {
            ThreadCache again = onVirtualThread(caches::cache); // a new thread, a new id: the same CPU's cache
            again.endLease();
            assertSame(onOne, again);
        }
        assertTrue(onOne.tryLease());
        ThreadCache next = onVirtualThread(caches::cache);
        next.endLease();
        assertNotNull(next);
        assertFalse(next == onOne, "the CPU's cache held: the next one");
        onOne.endLease();
        cpuNow.set(-1);
        ThreadCache byId = onVirtualThread(caches::cache);
        assertNotNull(byId, "the CPU unknown: the thread's id picks");
        byId.endLease();
    }

    @Test
    void whatASharedCacheHoldsIsCountedAndDrainAllTakesItBack() throws Exception {
        Pool general = pools[GENERAL];
        ThreadCache tc = onVirtualThread(caches::cache);
        cached(tc, 4 * KiB);
        tc.endLease();
        assertArrayEquals(new long[] {4 * KiB, 1}, caches.cached());
        assertArrayEquals(new long[] {4 * KiB, 1}, caches.cachedAtOneMoment());
        general.acquire();
        try {
            assertEquals(4 * KiB, caches.cachedBytesOf(general));
        } finally {
            general.lock.unlock();
        }
        caches.drainAll();
        assertEquals(0, general.used, "drained by the caller, who could take the lease");
        assertArrayEquals(new long[2], caches.cached());

        // Held while drainAll runs: its next lease drains it.
        cached(tc, 4 * KiB);
        assertTrue(tc.tryLease());
        caches.drainAll();
        assertEquals(4 * KiB, general.used, "a held cache is its holder's");
        tc.endLease();
        ThreadCache again = null;
        for (int tries = 0; tries < 10_000 && again != tc; tries++) {
            again = onVirtualThread(caches::cache); // the thread's id picks the cache
            again.endLease();
        }
        assertSame(tc, again);
        assertEquals(0, tc.count(), "its next lease drained it");
        assertEquals(0, general.used);
    }

    @Test
    void drainAllEmptiesTheCallersCacheAtOnceAndAnothersOnItsNextCall() throws Exception {
        Pool general = pools[GENERAL];
        ThreadCache mine = caches.cache();
        cached(mine, KiB);
        CountDownLatch filled = new CountDownLatch(1);
        CountDownLatch drained = new CountDownLatch(1);
        AtomicReference<ThreadCache> theirs = new AtomicReference<>();
        CompletableFuture<Integer> countAfterNextCall = onThread(() -> {
            ThreadCache tc = caches.cache();
            theirs.set(tc);
            cached(tc, 2 * KiB);
            cached(tc, 2 * KiB);
            filled.countDown();
            await(drained); // the other thread makes no call until drainAll has run
            return caches.cache().count();
        });
        await(filled);
        assertEquals(5 * KiB, general.used, "cached blocks are still used in their pool");

        caches.drainAll();
        assertEquals(0, mine.count(), "the caller's cache drains at once");
        assertEquals(2, theirs.get().count(), "a live thread's cache is its own to drain");
        assertEquals(4 * KiB, general.used);
        drained.countDown();
        assertEquals(0, countAfterNextCall.get(30, TimeUnit.SECONDS), "its next call drained it");
        assertEquals(0, general.used);
        Block first = general.chunks.get(0).first;
        assertTrue(first.free && first.nextPhys == null, "every block went back and merged");
    }

    @Test
    void aDeadThreadsCacheIsSweptAndItsBlocksGoBack() throws Exception {
        Pool general = pools[GENERAL];
        ThreadCache dead = onThread(() -> {
            ThreadCache tc = caches.cache();
            cached(tc, 8 * KiB);
            handles.register(new Block(null, 0, 64), tc); // takes a batch of spare slots
            return tc;
        }).get(30, TimeUnit.SECONDS);
        threads.get(0).join();
        assertEquals(8 * KiB, general.used);
        assertTrue(dead.slotCount > 0);

        assertTrue(caches.sweepDead(), "it held blocks");
        assertEquals(0, general.used);
        assertEquals(0, dead.count());
        assertEquals(0, dead.slotCount, "its spare slots went back to the table");
        assertEquals(0, caches.cachedBytes(), "the dead cache left the registry");
        assertFalse(caches.sweepDead(), "nothing left to sweep");
    }

    @Test
    void aNewThreadsFirstCallSweepsTheDeadFirst() throws Exception {
        Pool general = pools[GENERAL];
        onThread(() -> cached(caches.cache(), 16 * KiB)).get(30, TimeUnit.SECONDS);
        threads.get(0).join();
        assertEquals(16 * KiB, general.used);
        onThread(caches::cache).get(30, TimeUnit.SECONDS);
        assertEquals(0, general.used, "the newcomer's first call swept the dead thread's blocks back");
    }

    @Test
    void closeEmptiesTheHolderOfEveryThreadThatLivesOn() throws Exception {
        CountDownLatch made = new CountDownLatch(1);
        CountDownLatch closed = new CountDownLatch(1);
        CompletableFuture<Object[]> holderAfterClose = onThread(() -> {
            ThreadCache tc = caches.cache();
            Object[] holder = tc.holder;
            made.countDown();
            await(closed);
            assertNull(caches.own(), "the thread lives on, its cache is gone");
            return holder;
        });
        caches.cache();
        await(made);
        caches.close();
        assertNull(caches.own());
        assertEquals(0, caches.cachedBytes());
        closed.countDown();
        Object[] holder = holderAfterClose.get(30, TimeUnit.SECONDS);
        assertNull(holder[0], "only an empty JDK array is left in its thread-local map");
    }

    @Test
    void blocksFreedForAThreadCountAsCachedAndItsRefillSpillsWhatItsBinsCannotHold() throws Exception {
        Pool general = pools[GENERAL];
        ThreadCache mine = caches.cache();
        List<Block> offered = offeredFromAnotherThread(mine, 12, 4 * KiB);
        assertEquals(48 * KiB, general.used, "blocks in an inbound stack are used in their pool");
        assertArrayEquals(new long[] {48 * KiB, 12}, caches.cached());
        assertArrayEquals(new long[] {48 * KiB, 12}, caches.cachedAtOneMoment());
        general.acquire();
        try {
            assertEquals(48 * KiB, caches.cachedBytesOf(general));
        } finally {
            general.lock.unlock();
        }

        assertTrue(caches.refill(mine, general));
        assertEquals(ThreadCache.DEPTH, mine.count(), "one bin's depth came in");
        assertEquals(32 * KiB, general.used, "the four that did not fit went back to the pool at once");
        assertArrayEquals(new long[] {32 * KiB, 8}, caches.cached());
        assertArrayEquals(new long[2], mine.inbound());
        for (int i = 0; i < ThreadCache.DEPTH; i++) {
            assertTrue(offered.contains(mine.pop(GENERAL, 4 * KiB)));
        }
        assertFalse(caches.refill(mine, general), "nothing left to take");
    }

    @Test
    void anEndedThreadsInboundIsTakenAndClosedSoALaterFreeTakesThePoolPath() throws Exception {
        Pool general = pools[GENERAL];
        ThreadCache dead = onThread(caches::cache).get(30, TimeUnit.SECONDS);
        threads.get(0).join();
        offeredFromAnotherThread(dead, 2, 4 * KiB);
        assertEquals(8 * KiB, general.used);

        assertTrue(caches.sweepDead(), "its inbound stack held blocks");
        assertEquals(0, general.used, "they went back to the pool");
        // A free that read the block's cache before the sweep and offers after it: refused, so the
        // block is not left in a stack that nobody will take (it goes to the pool instead).
        Block late = carved(4 * KiB);
        assertFalse(dead.offer(GENERAL, late));
        assertArrayEquals(new long[2], caches.cached());
    }

    @Test
    void drainAllTakesBackWhatWasFreedForAThreadThatLivesOn() throws Exception {
        Pool general = pools[GENERAL];
        CountDownLatch made = new CountDownLatch(1);
        AtomicReference<ThreadCache> theirs = new AtomicReference<>();
        onThread(() -> {
            theirs.set(caches.cache());
            made.countDown();
            await(end); // alive, and making no call
            return null;
        });
        await(made);
        offeredFromAnotherThread(theirs.get(), 3, 4 * KiB);
        assertEquals(12 * KiB, general.used);
        caches.drainAll();
        assertEquals(0, general.used, "a live thread's inbound stack is anyone's to take under the pool lock");
        assertArrayEquals(new long[2], caches.cached());
        assertTrue(theirs.get().offer(GENERAL, carved(KiB)), "taken, not closed: the thread lives on");
    }

    @Test
    void closeClosesEveryInboundStack() {
        ThreadCache mine = caches.cache();
        caches.close();
        assertFalse(mine.offer(GENERAL, carved(KiB)), "a free after close takes the pool path, which finds the pool closed");
    }
}
