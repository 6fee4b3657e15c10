package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.OutOfDeviceMemoryException;

/**
 * Per-thread caches of small blocks: a freed block is reused by its thread under a new handle and
 * counts as free; cached blocks go back before the pool grows, on trim and defragmentation, and from
 * another thread on its next call or, once it has ended, on trim; a block with a live view is
 * never cached.
 */
class EngineThreadCacheTest extends EngineTestSupport {
    @Test
    void aFreedSmallBlockIsReusedByTheSameThreadUnderANewHandleAndCountsAsFree() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryHandle a = m.allocate(1000, CPU);
        long address = m.mapMemory(a, MemoryAccess.READ_ONLY).address();
        m.unmapMemory(a);
        assertEquals(1024, m.memoryInfo().usedBytes(), "1000 B is a 1 KiB class at alignment 256");
        m.deallocate(a);
        MemoryInfo afterFree = m.memoryInfo();
        assertEquals(0, afterFree.usedBytes(), "a cached block is reported as free");
        assertEquals(0, afterFree.activeAllocations());
        assertEquals(afterFree.usedBytes(), m.quickInfo().usedBytes());
        assertEquals(List.of(), m.handles());

        MemoryHandle b = m.allocate(1000, CPU);
        assertNotEquals(a, b);
        MemorySegment view = m.mapMemory(b, MemoryAccess.READ_WRITE);
        assertEquals(address, view.address(), "the same thread got its cached block back");
        assertEquals(1000, view.byteSize());
        m.unmapMemory(b);
        assertFalse(m.owns(a));
        assertRejected(m, InvalidHandleException.class, () -> m.deallocate(a));
        assertRejected(m, InvalidHandleException.class, () -> m.mapMemory(a, MemoryAccess.READ_ONLY));
        assertEquals(1000, m.handleInfo(b).orElseThrow().size());
        assertEquals(1, m.memoryInfo().activeAllocations());
    }

    @Test
    void aThreadGivesItsCachedBlocksBackBeforeThePoolGrows() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        fill1MiBWith64KiBBlocksAndFreeThem(m); // 8 go to this thread's cache (its depth per bin), 8 back to the pool
        assertEquals(MiB, m.memoryInfo().reservedBytes());
        m.allocate(MiB, CPU);
        assertEquals(MiB, m.memoryInfo().reservedBytes(), "the cached half went back: 1 MiB fits without growth");
        assertEquals(MiB, up.liveBytes());
    }

    @Test
    void aMappedBlockIsNeverCachedWithALiveView() {
        PooledMemoryManager m = manager(new ArenaUpstream(64 * MiB), pool(MiB, MiB));
        MemoryHandle a = m.allocate(4096, CPU);
        MemorySegment view = m.mapMemory(a, MemoryAccess.READ_WRITE);
        m.deallocate(a);
        assertThrows(IllegalStateException.class, () -> view.get(ValueLayout.JAVA_BYTE, 0), "the view died with the free");
        MemoryHandle b = m.allocate(4096, CPU);
        assertEquals(4096, m.mapMemory(b, MemoryAccess.READ_ONLY).byteSize());
        m.unmapMemory(b);
    }

    @Test
    void trimAndDefragmentTakeTheCallersCachedBlocksBack() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        fill1MiBWith64KiBBlocksAndFreeThem(m);
        assertEquals(MiB, up.liveBytes(), "cached blocks keep their chunk");
        assertEquals(MiB, m.trim());
        assertEquals(0, up.liveBytes());
        assertEquals(0, m.memoryInfo().reservedBytes());

        fill1MiBWith64KiBBlocksAndFreeThem(m);
        DefragmentationStats d = m.defragment(CPU).toCompletableFuture().join();
        assertEquals(MiB, d.memoryFreed());
        assertEquals(0, up.liveBytes());
    }

    @Test
    void anotherThreadsCachedBlocksComeBackOnItsNextCallAndADeadThreadsAtTrim() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        // One chunk of 1 MiB and no growth: what another thread caches is missing here.
        MemoryPoolConfig fixed = pool(MiB, MiB).toBuilder().autoExpansion(false).build();
        PooledMemoryManager m = manager(up, config(fixed), PoolSettings.defaults());
        CountDownLatch cached = new CountDownLatch(1);
        CountDownLatch callAgain = new CountDownLatch(1);
        CountDownLatch calledAgain = new CountDownLatch(1);
        Thread t = new Thread(() -> {
            List<MemoryHandle> hs = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                hs.add(m.allocate(64 * KiB, CPU));
            }
            hs.forEach(m::deallocate);
            cached.countDown();
            try {
                callAgain.await();
            } catch (InterruptedException e) {
                return;
            }
            m.deallocate(m.allocate(64 * KiB, CPU)); // its next call gives back what was cached
            calledAgain.countDown();
        });
        t.start();
        assertTrue(cached.await(30, TimeUnit.SECONDS));
        assertEquals(0, m.memoryInfo().usedBytes());
        OutOfDeviceMemoryException e = assertThrows(OutOfDeviceMemoryException.class, () -> m.allocate(768 * KiB, CPU));
        assertTrue(e.getMessage().contains("768"), e.getMessage());
        callAgain.countDown();
        assertTrue(calledAgain.await(30, TimeUnit.SECONDS));
        MemoryHandle big = m.allocate(768 * KiB, CPU);
        m.deallocate(big);
        t.join();
        // The thread ended with one block cached: trim takes it back, and the chunk goes too.
        assertEquals(MiB, up.liveBytes());
        m.configurePool(CPU, MemoryType.GENERAL, fixed.toBuilder().autoExpansion(true).build());
        assertEquals(MiB, m.trim());
        assertEquals(0, up.liveBytes());
    }

    /** Allocates 16 blocks of 64 KiB, then frees them: the cache keeps 8 (its depth per bin), the pool gets 8. */
    private static void fill1MiBWith64KiBBlocksAndFreeThem(PooledMemoryManager m) {
        List<MemoryHandle> hs = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            hs.add(m.allocate(64 * KiB, CPU));
        }
        hs.forEach(m::deallocate);
    }
}
