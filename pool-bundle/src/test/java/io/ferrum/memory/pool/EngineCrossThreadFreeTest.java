package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;

/**
 * A block freed on another thread goes back to the cache of the thread that allocated it (its
 * inbound stack), so that a pipeline keeps both threads off the pool: the allocating thread gets the
 * same blocks back, the figures count them as free meanwhile, trim takes them back while that thread
 * lives, and a pipeline under load hands every block to one owner at a time and loses nothing.
 */
class EngineCrossThreadFreeTest extends EngineTestSupport {
    @Test
    void aBlockFreedOnAnotherThreadComesBackToTheThreadThatAllocatedIt() throws Exception {
        PooledMemoryManager m = manager(new ArenaUpstream(64 * MiB), pool(MiB, MiB));
        List<MemoryHandle> first = allocate(m, 8, 4 * KiB);
        Set<Long> addresses = addresses(m, first);
        Thread freer = new Thread(() -> first.forEach(m::deallocate));
        freer.start();
        freer.join();

        MemoryInfo info = m.memoryInfo();
        assertEquals(0, info.usedBytes(), "blocks waiting for their thread count as free");
        assertEquals(0, info.activeAllocations());
        assertEquals(0, m.quickInfo().usedBytes());
        assertEquals(List.of(), m.handles());
        List<MemoryHandle> again = allocate(m, 8, 4 * KiB);
        assertEquals(addresses, addresses(m, again),
                "the allocating thread got its blocks back (a free into the freeing thread's cache would leave them there)");
        assertEquals(8 * 4 * KiB, m.memoryInfo().usedBytes());
    }

    @Test
    void trimTakesBackWhatWasFreedForAThreadThatLivesOn() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        CountDownLatch done = new CountDownLatch(1);
        CompletableFuture<List<MemoryHandle>> allocated = new CompletableFuture<>();
        Thread owner = new Thread(() -> {
            allocated.complete(allocate(m, 16, 64 * KiB)); // the whole 1 MiB chunk
            try {
                done.await(); // alive, and making no call, while the test frees and trims
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        owner.start();
        try {
            allocated.get(30, TimeUnit.SECONDS).forEach(m::deallocate);
            assertEquals(0, m.memoryInfo().usedBytes());
            assertEquals(MiB, up.liveBytes(), "the blocks wait for their thread, in its chunk");
            assertEquals(MiB, m.trim());
            assertEquals(0, up.liveBytes(), "trim took them back from the live thread's inbound stack");
            assertEquals(0, m.memoryInfo().reservedBytes());
        } finally {
            done.countDown();
            owner.join();
        }
    }

    /**
     * Seeded stress, not a forced interleaving (those are in {@code ThreadCachesTest}): one thread
     * allocates mixed sizes and stamps each block, another checks the stamp and frees it, through a
     * 1024-slot ring. A block handed to two owners at once would show another's stamp.
     */
    @Test
    void aPipelineHandsEachBlockToOneOwnerAtATimeAndLosesNothing() throws Exception {
        ArenaUpstream up = new ArenaUpstream(256 * MiB);
        PooledMemoryManager m = manager(up, pool(4 * MiB, 4 * MiB));
        BlockingQueue<long[]> ring = new ArrayBlockingQueue<>(1024);
        List<Thread> threads = new ArrayList<>();
        int blocks = 200_000;
        long[] sizes = {64, 200, 4 * KiB, 5000, 64 * KiB, 300 * KiB};
        CompletableFuture<Void> producer = CompletableFuture.runAsync(() -> {
            Random r = new Random(15);
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment stamp = arena.allocate(8);
                for (long i = 1; i <= blocks; i++) {
                    long size = sizes[r.nextInt(sizes.length)];
                    MemoryHandle h = m.allocate(size, CPU);
                    stamp.set(ValueLayout.JAVA_LONG, 0, i);
                    m.write(h, 0, stamp);
                    m.write(h, size - 8, stamp);
                    ring.put(new long[] {h.id(), i, size});
                }
                ring.put(new long[] {0, 0, 0});
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        }, runnable -> start(threads, runnable, "producer"));
        CompletableFuture<Long> consumer = CompletableFuture.supplyAsync(() -> {
            long seen = 0;
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment got = arena.allocate(8);
                for (long[] e = ring.take(); e[0] != 0; e = ring.take()) {
                    MemoryHandle h = new MemoryHandle(e[0]);
                    m.read(h, 0, got);
                    assertEquals(e[1], got.get(ValueLayout.JAVA_LONG, 0), "the block's first bytes are its own");
                    m.read(h, e[2] - 8, got);
                    assertEquals(e[1], got.get(ValueLayout.JAVA_LONG, 0), "the block's last bytes are its own");
                    m.deallocate(h);
                    seen++;
                }
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
            return seen;
        }, runnable -> start(threads, runnable, "consumer"));
        producer.get(120, TimeUnit.SECONDS);
        assertEquals(blocks, consumer.get(120, TimeUnit.SECONDS));
        for (Thread t : threads) {
            t.join(); // a cache is swept once its thread has ended, not when its last task completed
        }

        MemoryInfo info = m.memoryInfo();
        assertEquals(0, info.usedBytes());
        assertEquals(0, info.activeAllocations());
        m.trim(); // both threads have ended: their caches and inbound stacks are swept
        assertEquals(0, m.memoryInfo().reservedBytes());
        assertEquals(0, up.liveBytes(), "every byte went back");
    }

    private static void start(List<Thread> threads, Runnable body, String name) {
        Thread t = new Thread(body, name);
        synchronized (threads) {
            threads.add(t);
        }
        t.start();
    }

    private static List<MemoryHandle> allocate(PooledMemoryManager m, int n, long size) {
        List<MemoryHandle> hs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            hs.add(m.allocate(size, CPU));
        }
        return hs;
    }

    private static Set<Long> addresses(PooledMemoryManager m, List<MemoryHandle> hs) {
        Set<Long> out = new HashSet<>();
        for (MemoryHandle h : hs) {
            out.add(m.withMapped(h, MemoryAccess.READ_ONLY, MemorySegment::address));
        }
        assertTrue(out.size() == hs.size());
        return out;
    }
}
