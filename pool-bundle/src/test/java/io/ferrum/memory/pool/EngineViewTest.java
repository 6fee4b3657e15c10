package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Optional;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.ReentrantLock;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.DeviceChunk;
import io.ferrum.memory.pool.DeviceUpstream;

/**
 * Views from {@code mapMemory}: exactly the block's bytes, read-only when asked, dead after unmap or
 * free; memory the host cannot address is mapped through a staging copy written back on unmap.
 */
class EngineViewTest extends EngineTestSupport {
    @Test
    void mappedViewCoversExactlyTheBlockAndDiesOnUnmapOrFree() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryHandle h = m.allocate(100, CPU);
        MemorySegment rw = m.mapMemory(h, MemoryAccess.READ_WRITE);
        assertEquals(100, rw.byteSize());
        assertThrows(IndexOutOfBoundsException.class, () -> rw.get(ValueLayout.JAVA_BYTE, 100));
        assertTrue(m.handleInfo(h).orElseThrow().mapped());
        MemorySegment ro = m.mapMemory(h, MemoryAccess.READ_ONLY);
        assertTrue(ro.isReadOnly());
        assertThrows(IllegalArgumentException.class, () -> ro.set(ValueLayout.JAVA_BYTE, 0, (byte) 1));
        rw.set(ValueLayout.JAVA_BYTE, 5, (byte) 42);
        assertEquals(42, ro.get(ValueLayout.JAVA_BYTE, 5), "two views of one block see the same bytes");
        m.unmapMemory(h);
        assertThrows(IllegalStateException.class, () -> rw.get(ValueLayout.JAVA_BYTE, 5), "one unmap closes every view");
        assertThrows(IllegalStateException.class, () -> ro.get(ValueLayout.JAVA_BYTE, 5));
        assertFalse(m.handleInfo(h).orElseThrow().mapped());
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.unmapMemory(h));

        MemorySegment again = m.mapMemory(h, MemoryAccess.READ_WRITE);
        assertEquals(42, again.get(ValueLayout.JAVA_BYTE, 5));
        m.deallocate(h);
        assertThrows(IllegalStateException.class, () -> again.get(ValueLayout.JAVA_BYTE, 5),
                "a view of freed memory must not read what the next owner writes");
        MemoryHandle next = m.allocate(100, CPU);
        write(m, next, (byte) 9);
        assertThrows(IllegalStateException.class, () -> again.get(ValueLayout.JAVA_BYTE, 0));
    }

    @Test
    void nonHostMemoryMapsThroughAStagingCopyWrittenBackOnUnmap() {
        ArenaUpstream up = new ArenaUpstream(Device.cuda(0), 64 * MiB, false);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryHandle h = m.allocate(1000, Device.cuda(0));
        write(m, h, (byte) 3);
        assertContent(m, h, (byte) 3);
        MemorySegment ro = m.mapMemory(h, MemoryAccess.READ_ONLY);
        assertThrows(IllegalArgumentException.class, () -> ro.set(ValueLayout.JAVA_BYTE, 0, (byte) 0));
        m.unmapMemory(h);
        MemoryHandle copy = m.allocate(1000, Device.cuda(0));
        m.copy(h, copy, 1000, 0, 0);
        assertContent(m, copy, (byte) 3);
    }

    /**
     * {@code mapMemory} asked the upstream for the chunk's host view, twice, while it held the
     * pool's lock: a backend whose {@code hostSegment} is slow, or calls back into the manager from
     * another thread, stalled or deadlocked every allocation of the pool. The chunk's view is kept
     * since the chunk was added; a mapping takes it from there.
     */
    @Test
    void aMappingAsksTheUpstreamForNoHostViewUnderThePoolsLock() throws Exception {
        AtomicReference<ReentrantLock> lock = new AtomicReference<>();
        AtomicInteger underLock = new AtomicInteger();
        DeviceUpstream up = new ForwardingUpstream(new ArenaUpstream(64 * MiB)) {
            @Override
            public Optional<MemorySegment> hostSegment(DeviceChunk c) {
                ReentrantLock l = lock.get();
                if (l != null && l.isHeldByCurrentThread()) {
                    underLock.incrementAndGet();
                }
                return real.hostSegment(c);
            }
        };
        try (PooledMemoryManager m = PooledMemoryManager.create(up, config(pool(MiB, MiB)), PoolSettings.defaults(), null)) {
            lock.set(RaceHarness.poolLock(m, MemoryType.GENERAL));
            MemoryHandle h = m.allocate(4096, CPU);
            MemorySegment view = m.mapMemory(h, MemoryAccess.READ_WRITE);
            view.set(ValueLayout.JAVA_BYTE, 4095, (byte) 7);
            MemorySegment again = m.mapMemory(h, MemoryAccess.READ_ONLY);
            assertEquals(7, again.get(ValueLayout.JAVA_BYTE, 4095), "a second view sees the first's write");
            m.unmapMemory(h);
            byte[] last = new byte[1];
            m.read(h, 4095, MemorySegment.ofArray(last));
            assertEquals(7, last[0], "the view wrote the block itself");
            assertEquals(0, underLock.get(), "hostSegment calls made under the GENERAL pool's lock");
        }
    }

    /**
     * An upstream whose memory the CPU cannot address; after {@link #rearm} its next staging copy,
     * once made, waits for {@link #release}.
     */
    private static final class PausedStaging extends ForwardingUpstream {
        private final AtomicBoolean armed = new AtomicBoolean();
        private volatile CountDownLatch arrived = new CountDownLatch(1);
        private volatile CountDownLatch go = new CountDownLatch(1);

        PausedStaging() {
            super(new ArenaUpstream(Device.cuda(0), 64 * MiB, false));
        }

        @Override
        public void copyToHost(DeviceChunk src, long srcOffset, MemorySegment dst, long bytes) {
            real.copyToHost(src, srcOffset, dst, bytes); // copied, then paused: what it read may be overtaken
            if (armed.compareAndSet(true, false)) {
                arrived.countDown();
                try {
                    go.await(60, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }

        /** Pauses the next staging copy (after the last one was let go). */
        void rearm() {
            arrived = new CountDownLatch(1);
            go = new CountDownLatch(1);
            armed.set(true);
        }

        void awaitArrival() throws InterruptedException {
            assertTrue(arrived.await(30, TimeUnit.SECONDS), "the staging copy never came");
        }

        void release() {
            go.countDown();
        }
    }

    /**
     * The first mapping of memory the CPU cannot address copied the whole block to its staging
     * buffer while it held the pool's lock: mapping a GiB of a GPU's memory stalled every
     * allocation and free of the pool for the whole copy. The copy now runs outside the lock, the
     * block pinned; the mapping is published once filled.
     */
    @Test
    void aStagingCopyRunsOutsideThePoolsLock() throws Exception {
        PausedStaging up = new PausedStaging();
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try (PooledMemoryManager m = PooledMemoryManager.create(up, config(pool(MiB, MiB)), PoolSettings.defaults(), null)) {
            MemoryHandle h = m.allocate(1000, Device.cuda(0));
            write(m, h, (byte) 5);
            up.rearm();
            Future<MemorySegment> mapping = pool.submit(() -> m.mapMemory(h, MemoryAccess.READ_WRITE));
            up.awaitArrival();
            Future<?> other = pool.submit(() -> {
                MemoryHandle o = m.allocate(1000, Device.cuda(0));
                m.deallocate(o);
            });
            try {
                // The timeout is only the failure signal: before the fix the allocation waited for the lock.
                other.get(10, TimeUnit.SECONDS);
            } catch (TimeoutException e) {
                throw new AssertionError("an allocation of the pool waited for a staging copy of another block", e);
            } finally {
                up.release();
            }
            MemorySegment view = mapping.get(30, TimeUnit.SECONDS);
            assertEquals((byte) (5 + 999 * 31), view.get(ValueLayout.JAVA_BYTE, 999), "the staging copy holds the block");
            view.set(ValueLayout.JAVA_BYTE, 0, (byte) 77);
            m.unmapMemory(h);
            byte[] first = new byte[1];
            m.read(h, 0, MemorySegment.ofArray(first));
            assertEquals(77, first[0], "the staging copy was written back on unmap");
        } finally {
            up.release();
            pool.shutdownNow();
        }
    }

    /**
     * A free of the block while its staging copy runs (outside the lock, the block pinned): the
     * mapping is refused, its staging buffer dropped, and the block goes back once the copy ends.
     */
    @Test
    void aFreeDuringAStagingCopyRefusesTheMappingAndGivesTheBlockBack() throws Exception {
        PausedStaging up = new PausedStaging();
        ExecutorService pool = Executors.newSingleThreadExecutor();
        try (PooledMemoryManager m = PooledMemoryManager.create(up, config(pool(MiB, MiB)), PoolSettings.defaults(), null)) {
            MemoryHandle h = m.allocate(1000, Device.cuda(0));
            up.rearm();
            Future<MemorySegment> mapping = pool.submit(() -> m.mapMemory(h, MemoryAccess.READ_WRITE));
            up.awaitArrival();
            m.deallocate(h);
            up.release();
            ExecutionException refused = assertThrows(ExecutionException.class, () -> mapping.get(30, TimeUnit.SECONDS));
            assertTrue(refused.getCause() instanceof InvalidHandleException, "refused: " + refused.getCause());
            assertEquals(0, m.memoryInfo().usedBytes(), "the freed block went back when the copy ended");
            assertEquals(0, m.memoryInfo().activeAllocations());
        } finally {
            up.release();
            pool.shutdownNow();
        }
    }
}
