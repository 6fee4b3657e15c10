package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.Callable;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;

/**
 * Virtual threads share a few caches by lease: a block a virtual thread frees is reused without the
 * pool, counts as free meanwhile, and trim takes it back; 64 virtual threads stamping and checking
 * their blocks never see another's bytes and leave nothing behind.
 */
class EngineVirtualThreadTest extends EngineTestSupport {
    @Test
    void aVirtualThreadsFreedBlockIsReusedThroughASharedCacheAndTrimTakesItBack() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        boolean reused = onVirtualThread(() -> {
            for (int attempt = 0; attempt < 100; attempt++) {
                MemoryHandle a = m.allocate(4 * KiB, CPU);
                long first = m.withMapped(a, MemoryAccess.READ_ONLY, MemorySegment::address);
                m.deallocate(a);
                MemoryInfo info = m.memoryInfo();
                assertEquals(0, info.usedBytes(), "a block in a shared cache counts as free");
                assertEquals(0, info.activeAllocations());
                MemoryHandle b = m.allocate(4 * KiB, CPU); // the shared cache of the CPU it runs on: a's
                long second = m.withMapped(b, MemoryAccess.READ_ONLY, MemorySegment::address);
                m.deallocate(b);
                if (first == second) {
                    return true;
                }
                // The thread moved to another CPU between the free and the allocate (a loaded machine
                // moves it often): its cache was another, and the pool carved the next block.
            }
            return false;
        });
        assertTrue(reused, "reused from the shared cache (the pool would carve the next block)");
        assertEquals(MiB, up.liveBytes());
        assertEquals(MiB, m.trim(), "trim takes the shared caches back");
        assertEquals(0, up.liveBytes());
    }

    @Test
    void aVirtualThreadsFreedLargeBlockIsReusedThroughASharedCache() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(4 * MiB, 4 * MiB));
        // Several blocks live, so that a block given back to the pool would not be carved again first.
        boolean reused = onVirtualThread(() -> {
            for (int attempt = 0; attempt < 100; attempt++) {
                MemoryHandle x = m.allocate(512 * KiB, CPU);
                MemoryHandle a = m.allocate(512 * KiB, CPU);
                MemoryHandle y = m.allocate(512 * KiB, CPU);
                long first = m.withMapped(a, MemoryAccess.READ_ONLY, MemorySegment::address);
                m.deallocate(x);
                m.deallocate(a); // on top of x in the cache; in the pool, x's place comes first
                MemoryHandle b = m.allocate(512 * KiB, CPU); // the shared cache's last block: a's
                long second = m.withMapped(b, MemoryAccess.READ_ONLY, MemorySegment::address);
                m.deallocate(b);
                m.deallocate(y);
                if (first == second) {
                    return true;
                }
                // The thread moved to another CPU between the free and the allocate: its cache was another.
            }
            return false;
        });
        assertTrue(reused, "a 512 KiB block a virtual thread frees waits in a shared cache");
        assertEquals(0, m.memoryInfo().usedBytes());
        m.trim();
        assertEquals(0, up.liveBytes());
    }

    /** Seeded stress, not a forced interleaving (those are in {@code ThreadCachesTest}). */
    @Test
    void sixtyFourVirtualThreadsKeepTheirOwnBytesAndLeaveNothingBehind() throws Exception {
        ArenaUpstream up = new ArenaUpstream(1024 * MiB);
        PooledMemoryManager m = manager(up, pool(4 * MiB, 4 * MiB));
        long[] sizes = {64, 200, 4 * KiB, 5000, 64 * KiB, 300 * KiB, MiB}; // the last two: large blocks
        AtomicReference<Throwable> failed = new AtomicReference<>();
        List<Thread> threads = new ArrayList<>();
        for (int t = 0; t < 64; t++) {
            long seed = t;
            threads.add(Thread.ofVirtual().start(() -> {
                Random r = new Random(seed);
                List<MemoryHandle> live = new ArrayList<>();
                List<Long> stamps = new ArrayList<>();
                try (Arena arena = Arena.ofConfined()) {
                    MemorySegment word = arena.allocate(8);
                    for (int i = 0; i < 5_000; i++) {
                        if (live.size() < 8 && (live.isEmpty() || r.nextBoolean())) {
                            MemoryHandle h = m.allocate(sizes[r.nextInt(sizes.length)], CPU);
                            long stamp = seed << 32 | i;
                            word.set(ValueLayout.JAVA_LONG, 0, stamp);
                            m.write(h, 0, word);
                            live.add(h);
                            stamps.add(stamp);
                        } else {
                            int k = r.nextInt(live.size());
                            MemoryHandle h = live.remove(k);
                            long stamp = stamps.remove(k);
                            m.read(h, 0, word);
                            assertEquals(stamp, word.get(ValueLayout.JAVA_LONG, 0), "another thread's bytes in my block");
                            m.deallocate(h);
                        }
                        if (i % 64 == 0) {
                            Thread.yield(); // let the 64 interleave on the few carriers
                        }
                    }
                    live.forEach(m::deallocate);
                } catch (Throwable e) {
                    failed.compareAndSet(null, e);
                }
            }));
        }
        for (Thread t : threads) {
            t.join();
        }
        assertNull(failed.get());
        MemoryInfo info = m.memoryInfo();
        assertEquals(0, info.usedBytes());
        assertEquals(0, info.activeAllocations());
        m.trim();
        assertEquals(0, up.liveBytes(), "every byte went back");
    }

    private static <T> T onVirtualThread(Callable<T> body) throws Exception {
        AtomicReference<T> out = new AtomicReference<>();
        AtomicReference<Throwable> failed = new AtomicReference<>();
        Thread.ofVirtual().start(() -> {
            try {
                out.set(body.call());
            } catch (Throwable e) {
                failed.set(e);
            }
        }).join();
        if (failed.get() instanceof Exception e) {
            throw e;
        } else if (failed.get() instanceof Error e) {
            throw e;
        }
        return out.get();
    }
}
