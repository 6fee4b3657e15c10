package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.OutOfDeviceMemoryException;

/**
 * Defragmentation: live blocks move with their handles and contents while reserved memory shrinks,
 * data never moves into an emptier chunk, a mapped block stays in place, auto-GC compacts before an
 * allocation fails, and compaction running among threads that allocate, free and copy never lets
 * two owners share a block.
 */
class EngineDefragmentTest extends EngineTestSupport {
    @Test
    void defragmentKeepsHandlesValidContentsIntactAndShrinksReserved() throws Exception {
        ArenaUpstream up = new ArenaUpstream(256 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        List<MemoryHandle> keep = new ArrayList<>();
        List<MemoryHandle> drop = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            MemoryHandle h = m.allocate(60 * KiB, CPU);
            write(m, h, (byte) i);
            (i % 4 == 0 ? keep : drop).add(h);
        }
        for (MemoryHandle h : drop) {
            m.deallocate(h);
        }
        MemoryInfo before = m.memoryInfo();
        assertTrue(before.fragmentationRatio() > 0.5, "swiss cheese: " + before.fragmentationRatio());
        DefragmentationStats stats = m.defragment(CPU).toCompletableFuture().get();
        MemoryInfo after = m.memoryInfo();
        assertTrue(stats.blocksMoved() > 0);
        assertEquals(before.fragmentationRatio(), stats.fragmentationBefore(), 1e-12);
        assertEquals(after.fragmentationRatio(), stats.fragmentationAfter(), 1e-12);
        assertTrue(after.fragmentationRatio() < 0.05, "after: " + after.fragmentationRatio());
        assertEquals(before.reservedBytes() - after.reservedBytes(), stats.memoryFreed());
        assertTrue(after.reservedBytes() <= 2 * MiB, "16 live blocks of 60 KiB fit in one chunk: " + after.reservedBytes());
        assertEquals(before.usedBytes(), after.usedBytes());
        assertEquals(after.reservedBytes(), up.liveBytes());
        for (int i = 0; i < keep.size(); i++) {
            assertContent(m, keep.get(i), (byte) (i * 4));
        }
    }

    @Test
    void defragmentNeverMovesDataIntoAnEmptierChunk() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(4 * MiB, MiB).toBuilder().preAllocate(true).build());
        List<MemoryHandle> big = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            big.add(m.allocate(64 * KiB, CPU)); // fills the pre-allocated 4 MiB chunk
        }
        MemoryHandle inGrowth = m.allocate(64 * KiB, CPU);
        assertEquals(5 * MiB, m.memoryInfo().reservedBytes());
        for (int i = 0; i < 64; i++) {
            if (i % 8 != 0) {
                m.deallocate(big.get(i));
            } else {
                write(m, big.get(i), (byte) i);
            }
        }
        m.deallocate(inGrowth);
        m.defragment(CPU).toCompletableFuture().get();
        // The sparse pre-allocated chunk is compacted in place; the empty growth chunk goes back.
        assertEquals(4 * MiB, m.memoryInfo().reservedBytes());
        for (int i = 0; i < 64; i += 8) {
            assertContent(m, big.get(i), (byte) i);
        }
    }

    @Test
    void aMappedBlockStaysInPlaceAndMovesOnceUnmapped() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryHandle first = m.allocate(100 * KiB, CPU);
        MemoryHandle mapped = m.allocate(100 * KiB, CPU);
        MemorySegment view = m.mapMemory(mapped, MemoryAccess.READ_WRITE);
        long address = view.address();
        m.deallocate(first);
        m.defragment(CPU).toCompletableFuture().get();
        MemorySegment again = m.mapMemory(mapped, MemoryAccess.READ_ONLY);
        assertEquals(address, again.address(), "a mapped block stays where its views point");
        view.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
        m.unmapMemory(mapped);
        m.defragment(CPU).toCompletableFuture().get();
        MemorySegment moved = m.mapMemory(mapped, MemoryAccess.READ_ONLY);
        assertNotEquals(address, moved.address(), "once unmapped it slides into the hole before it");
        assertEquals(1, moved.get(ValueLayout.JAVA_BYTE, 0));
    }

    @Test
    void autoGcCompactsAndRetriesBeforeFailing() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        MemoryPoolConfig cfg = pool(MiB, MiB).toBuilder().maxSize(MiB).build();
        MemoryManagerConfig withGc = config(cfg).withAutoGc(true, 0.85);
        PooledMemoryManager m = manager(up, withGc, PoolSettings.defaults());
        List<MemoryHandle> hs = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            hs.add(m.allocate(64 * KiB, CPU));
        }
        for (int i = 0; i < 16; i += 2) {
            m.deallocate(hs.get(i));
        }
        // Half the pool is free, but in 64 KiB holes: 512 KiB fits only after compaction.
        MemoryHandle big = m.allocate(512 * KiB, CPU);
        assertTrue(m.owns(big));
        for (int i = 1; i < 16; i += 2) {
            assertTrue(m.owns(hs.get(i)));
        }
        PooledMemoryManager noGc = manager(new ArenaUpstream(64 * MiB), config(cfg), PoolSettings.defaults());
        List<MemoryHandle> hs2 = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            hs2.add(noGc.allocate(64 * KiB, CPU));
        }
        for (int i = 0; i < 16; i += 2) {
            noGc.deallocate(hs2.get(i));
        }
        assertRejected(noGc, OutOfDeviceMemoryException.class, () -> noGc.allocate(512 * KiB, CPU));
    }

    @Test
    void threadsAllocatingFreeingCopyingAndCompactingAtOnceNeverShareABlock() throws Exception {
        ArenaUpstream up = new ArenaUpstream(256 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        java.util.concurrent.ConcurrentLinkedQueue<long[]> handedOver = new java.util.concurrent.ConcurrentLinkedQueue<>();
        List<Throwable> failures = new CopyOnWriteArrayList<>();
        int threads = 4;
        CountDownLatch done = new CountDownLatch(threads);
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int seed = t;
            Thread w = new Thread(() -> {
                java.util.Random rnd = new java.util.Random(seed);
                List<long[]> mine = new ArrayList<>(); // {handle id, fill byte}
                try {
                    for (int i = 0; i < 3000; i++) {
                        int op = rnd.nextInt(10);
                        if (op < 4 || mine.isEmpty()) {
                            long size = 1 + rnd.nextInt(rnd.nextBoolean() ? 4096 : 200_000);
                            MemoryHandle h = m.allocate(size, CPU);
                            byte fill = (byte) rnd.nextInt();
                            m.mapMemory(h, MemoryAccess.WRITE_ONLY).fill(fill);
                            m.unmapMemory(h);
                            mine.add(new long[] {h.id(), fill});
                        } else if (op < 7) {
                            long[] e = mine.remove(rnd.nextInt(mine.size()));
                            checkFill(m, e);
                            if (rnd.nextBoolean()) {
                                handedOver.add(e); // another thread frees it
                            } else {
                                m.deallocate(new MemoryHandle(e[0]));
                            }
                        } else if (op < 9) {
                            long[] other = handedOver.poll();
                            if (other != null) {
                                checkFill(m, other);
                                m.deallocate(new MemoryHandle(other[0]));
                            }
                        } else if (rnd.nextInt(20) == 0) {
                            m.defragment(CPU).toCompletableFuture().join();
                        } else {
                            long[] e = mine.get(rnd.nextInt(mine.size()));
                            checkFill(m, e);
                        }
                    }
                    for (long[] e : mine) {
                        checkFill(m, e);
                        m.deallocate(new MemoryHandle(e[0]));
                    }
                } catch (Throwable e) {
                    failures.add(e);
                } finally {
                    done.countDown();
                }
            });
            workers.add(w);
            w.start();
        }
        assertTrue(done.await(120, TimeUnit.SECONDS));
        for (Thread w : workers) {
            w.join();
        }
        assertEquals(List.of(), failures);
        for (long[] e : handedOver) {
            checkFill(m, e);
            m.deallocate(new MemoryHandle(e[0]));
        }
        MemoryInfo end = m.memoryInfo();
        assertEquals(0, end.usedBytes());
        assertEquals(0, end.activeAllocations());
        m.trim(); // every worker has ended: their caches come back and every chunk goes
        assertEquals(0, up.liveBytes());
        assertEquals(0, m.memoryInfo().reservedBytes());
    }

    private static void checkFill(PooledMemoryManager m, long[] e) {
        MemoryHandle h = new MemoryHandle(e[0]);
        MemorySegment s = m.mapMemory(h, MemoryAccess.READ_ONLY);
        try {
            for (long i = 0; i < s.byteSize(); i += 509) {
                if (s.get(ValueLayout.JAVA_BYTE, i) != (byte) e[1]) {
                    throw new AssertionError("byte " + i + " of " + h + " was overwritten: another owner shares the block");
                }
            }
            if (s.get(ValueLayout.JAVA_BYTE, s.byteSize() - 1) != (byte) e[1]) {
                throw new AssertionError("last byte of " + h + " was overwritten");
            }
        } finally {
            m.unmapMemory(h);
        }
    }
}
