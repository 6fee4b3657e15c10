package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryMapping;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.HookedUpstream.Pause;

/**
 * Races of the staging copies of memory the CPU cannot address (a GPU's), made and written back
 * outside the pool's lock: each test pauses a host copy of the upstream and forces another call
 * into the pause.
 */
class StagingRacesTest extends RaceHarness {
    static final Device GPU = Device.cuda(0);

    /**
     * An upstream whose memory the CPU cannot address; the next copy to the device ({@code
     * copyFromHost}, an unmap's write-back) can be paused before it copies or made to fail, and
     * every staging buffer written back is kept, to see whether it was freed.
     */
    static final class StagedUpstream extends ForwardingUpstream {
        final ArenaUpstream memory;
        private final AtomicReference<Pause> writeBack = new AtomicReference<>();
        private final AtomicReference<RuntimeException> failWriteBack = new AtomicReference<>();
        private final AtomicReference<RuntimeException> failCopy = new AtomicReference<>();
        final List<MemorySegment> writtenBack = new CopyOnWriteArrayList<>();
        /** Run after each staging copy a mapping made ({@code copyToHost}), by the thread that made it; or null. */
        volatile Runnable afterCopy;
        /** Run before the next staging copy, once; or null. */
        private final AtomicReference<Runnable> beforeCopy = new AtomicReference<>();
        /** Every staging buffer a copy filled, to see whether it was freed. */
        final List<MemorySegment> copiedTo = new CopyOnWriteArrayList<>();

        StagedUpstream() {
            this(new ArenaUpstream(GPU, 64 * MiB, false));
        }

        StagedUpstream(ArenaUpstream memory) {
            super(memory);
            this.memory = memory;
        }

        Pause pauseNextWriteBack() {
            Pause p = new Pause();
            writeBack.set(p);
            return p;
        }

        /** Pauses the next staging copy before it copies (a copy on a released chunk would throw then). */
        Pause pauseNextCopy() {
            Pause p = new Pause();
            beforeCopy.set(p::hold);
            return p;
        }

        void failNextWriteBack(RuntimeException e) {
            failWriteBack.set(e);
        }

        /** Fails the next staging copy ({@code copyToHost}), after a pause set by {@link #pauseNextCopy}. */
        void failNextCopy(RuntimeException e) {
            failCopy.set(e);
        }

        @Override
        public void copyToHost(DeviceChunk src, long srcOffset, MemorySegment dst, long bytes) {
            copiedTo.add(dst);
            Runnable before = beforeCopy.getAndSet(null);
            if (before != null) {
                before.run();
            }
            RuntimeException e = failCopy.getAndSet(null);
            if (e != null) {
                throw e;
            }
            real.copyToHost(src, srcOffset, dst, bytes);
            Runnable hook = afterCopy;
            if (hook != null) {
                hook.run();
            }
        }

        @Override
        public void copyFromHost(MemorySegment src, DeviceChunk dst, long dstOffset, long bytes) {
            writtenBack.add(src);
            Pause p = writeBack.getAndSet(null);
            if (p != null) {
                p.hold(); // before the copy: the device still holds the old bytes
            }
            RuntimeException e = failWriteBack.getAndSet(null);
            if (e != null) {
                throw e;
            }
            real.copyFromHost(src, dst, dstOffset, bytes);
        }
    }

    PooledMemoryManager manager(StagedUpstream up) {
        return manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults(), null);
    }

    static byte firstByte(PooledMemoryManager m, MemoryHandle h) {
        byte[] one = new byte[1];
        m.read(h, 0, MemorySegment.ofArray(one));
        return one[0];
    }

    /**
     * An unmap wrote a GPU block's staging copy back to the device while it held the pool's lock:
     * unmapping a GiB block stalled every allocation, free and figure of the pool for the whole copy.
     * The copy back now runs outside the lock, after the views closed: none writes the copy then.
     */
    @Test
    void aWriteBackRunsOutsideThePoolsLockWithItsViewsClosed() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = manager(up);
        MemoryHandle h = m.allocate(1000, GPU);
        MemorySegment view = m.mapMemory(h, MemoryAccess.READ_WRITE);
        view.fill((byte) 7);
        Pause paused = up.pauseNextWriteBack();
        CompletableFuture<Void> unmap = start("unmap", () -> {
            m.unmapMemory(h);
            return null;
        });
        paused.awaitArrival();
        CompletableFuture<Void> other = start("allocate", () -> {
            m.deallocate(m.allocate(1000, GPU));
            return null;
        });
        try {
            // The timeout is only the failure signal: before the fix the allocation waited for the lock.
            other.get(10, TimeUnit.SECONDS);
            assertThrows(IllegalStateException.class, () -> view.set(ValueLayout.JAVA_BYTE, 0, (byte) 9),
                    "a view wrote the staging copy while it was written back");
        } catch (TimeoutException e) {
            throw new AssertionError("an allocation of the pool waited for the write-back of another block", e);
        } finally {
            paused.release();
        }
        unmap.get(30, TimeUnit.SECONDS);
        assertEquals(7, firstByte(m, h), "the staging copy was written back");
        assertFalse(up.writtenBack.get(0).scope().isAlive(), "the staging copy was not freed");
    }

    /**
     * A mapping while the block's staging copy is written back must not copy the device's bytes
     * before the write-back made them: it waits for the write-back's end and sees its bytes.
     */
    @Test
    void aMappingDuringAWriteBackSeesTheWrittenBackBytes() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = manager(up);
        MemoryHandle h = m.allocate(1000, GPU);
        m.mapMemory(h, MemoryAccess.READ_WRITE).fill((byte) 7);
        Pause paused = up.pauseNextWriteBack();
        CompletableFuture<Void> unmap = start("unmap", () -> {
            m.unmapMemory(h);
            return null;
        });
        paused.awaitArrival();
        CompletableFuture<Byte> mapping = start("map", () -> m.mapMemory(h, MemoryAccess.READ_ONLY).get(ValueLayout.JAVA_BYTE, 0));
        try {
            // Parked in map, waiting for the write-back; a mapping that copied the device's old bytes is done.
            awaitParkedInOrDone(threads.get(threads.size() - 1), "Mappings", "map", mapping);
        } finally {
            paused.release();
        }
        unmap.get(30, TimeUnit.SECONDS);
        assertEquals((byte) 7, (byte) mapping.get(30, TimeUnit.SECONDS), "a mapping copied the device's bytes older than the write-back");
        m.unmapMemory(h);
        assertEquals(1024, m.memoryInfo().usedBytes(), "one block in use");
    }

    /**
     * While the write-back runs the block is unmapped for every caller: a second unmap finds nothing
     * mapped, and a free of the block is done once the write-back ends (its pin keeps the memory
     * until then, and the memory goes back once).
     */
    @Test
    void aSecondUnmapOrAFreeDuringAWriteBackWaitForNothingAndReleaseOnce() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = manager(up);
        MemoryHandle h = m.allocate(1000, GPU);
        m.mapMemory(h, MemoryAccess.READ_WRITE).fill((byte) 7);
        Pause paused = up.pauseNextWriteBack();
        CompletableFuture<Void> unmap = start("unmap", () -> {
            m.unmapMemory(h);
            return null;
        });
        paused.awaitArrival();
        CompletableFuture<Void> again = start("unmap again", () -> {
            m.unmapMemory(h);
            return null;
        });
        CompletableFuture<Void> free = new CompletableFuture<>();
        try {
            // The timeouts are only the failure signal: before the fix both waited for the lock.
            ExecutionException notMapped = assertThrows(ExecutionException.class, () -> again.get(10, TimeUnit.SECONDS));
            assertTrue(notMapped.getCause() instanceof InvalidMemoryRequestException, "second unmap: " + notMapped.getCause());
            free = start("free", () -> {
                m.deallocate(h);
                return null;
            });
            free.get(10, TimeUnit.SECONDS);
            assertEquals(1024, m.memoryInfo().usedBytes(), "the block went back under its write-back");
        } finally {
            paused.release();
        }
        unmap.get(30, TimeUnit.SECONDS);
        free.get(30, TimeUnit.SECONDS);
        assertEquals(0, m.memoryInfo().usedBytes(), "the freed block did not go back once written back");
        assertEquals(0, m.memoryInfo().activeAllocations());
        assertThrows(InvalidHandleException.class, () -> m.mapMemory(h, MemoryAccess.READ_ONLY));
        assertFalse(up.writtenBack.get(0).scope().isAlive(), "the staging copy was not freed");
        MemoryHandle next = m.allocate(1000, GPU);
        MemoryHandle more = m.allocate(1000, GPU);
        assertEquals(2048, m.memoryInfo().usedBytes(), "the block was released twice");
        m.deallocate(next);
        m.deallocate(more);
        m.close();
        assertEquals(0, up.memory.liveBytes(), "native bytes left after close");
    }

    /**
     * A write-back the upstream fails: the unmap throws what the upstream threw, the views are
     * closed, and the staging copy stays the block's mapping: the next mapping sees the bytes the
     * views wrote and the next unmap writes them back. A free then drops nothing twice.
     */
    @Test
    void aFailedWriteBackKeepsTheStagingCopyMappedAndFreeable() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = manager(up);
        MemoryHandle h = m.allocate(1000, GPU);
        MemorySegment view = m.mapMemory(h, MemoryAccess.READ_WRITE);
        view.fill((byte) 7);
        RuntimeException lost = new IllegalStateException("device lost");
        up.failNextWriteBack(lost);
        assertSame(lost, assertThrows(RuntimeException.class, () -> m.unmapMemory(h)));
        assertThrows(IllegalStateException.class, () -> view.get(ValueLayout.JAVA_BYTE, 0), "a view outlived its unmap");
        assertTrue(up.writtenBack.get(0).scope().isAlive(), "the staging copy of a failed write-back was dropped");
        assertEquals(1024, m.memoryInfo().usedBytes());
        assertEquals(1, m.memoryInfo().activeAllocations());
        MemorySegment kept = m.mapMemory(h, MemoryAccess.READ_ONLY);
        assertEquals(7, kept.get(ValueLayout.JAVA_BYTE, 999), "the views' bytes are not the mapping's");
        m.unmapMemory(h);
        assertEquals(7, firstByte(m, h), "the second unmap did not write the copy back");
        assertFalse(up.writtenBack.get(1).scope().isAlive(), "the staging copy was not freed");

        // Failed again, then freed: the copy goes with the block.
        m.mapMemory(h, MemoryAccess.READ_WRITE).fill((byte) 8);
        up.failNextWriteBack(new IllegalStateException("device lost"));
        assertThrows(IllegalStateException.class, () -> m.unmapMemory(h));
        MemorySegment staging = up.writtenBack.get(2);
        m.deallocate(h);
        assertFalse(staging.scope().isAlive(), "the staging copy of a freed block was not freed");
        assertEquals(0, m.memoryInfo().usedBytes());
        assertEquals(0, m.memoryInfo().activeAllocations());
        m.close();
        assertEquals(0, up.memory.liveBytes(), "native bytes left after close");
    }

    /**
     * A mapping whose staging copy is overtaken by a mapping published and unmapped meanwhile made
     * its copy again, each time: a thread mapping and unmapping the block in a loop starved it for
     * ever. Here each of its copies lets another thread map, write and unmap the block before it
     * ends (for 5 rounds, so that the test ends): the mapping copies the block once.
     */
    @Test
    void aMappingIsNotStarvedByAnotherMappingAndUnmappingTheBlock() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = manager(up);
        MemoryHandle h = m.allocate(1000, GPU);
        AtomicInteger copies = new AtomicInteger();
        AtomicInteger rounds = new AtomicInteger();
        up.afterCopy = () -> {
            Thread victim = threads.get(0);
            if (Thread.currentThread() != victim) {
                return;
            }
            copies.incrementAndGet();
            int round = rounds.incrementAndGet();
            if (round > 5) {
                return;
            }
            CompletableFuture<Void> other = start("map and unmap " + round, () -> {
                m.mapMemory(h, MemoryAccess.READ_WRITE).set(ValueLayout.JAVA_BYTE, round, (byte) round);
                m.unmapMemory(h);
                return null;
            });
            // Done (overtaking this copy), or waiting in map for it.
            awaitParkedInOrDone(threads.get(threads.size() - 1), "Mappings", "map", other);
        };
        start("map", () -> m.mapMemory(h, MemoryAccess.READ_ONLY)).get(30, TimeUnit.SECONDS);
        for (int i = 1; i < threads.size(); i++) {
            threads.get(i).join(TimeUnit.SECONDS.toMillis(30));
        }
        assertEquals(1, copies.get(), "the mapping copied the block again each time another mapped and unmapped it");
        byte[] head = new byte[2];
        m.read(h, 0, MemorySegment.ofArray(head));
        assertEquals(1, head[1], "the other thread's write was lost");
    }

    /**
     * A second mapping while the first one's staging copy is made outside the lock waits for that
     * copy and shares it (before, it made a copy of its own, and the later of the two was dropped or
     * made again); an unmap meanwhile finds nothing mapped.
     */
    @Test
    void aMappingDuringAStagingCopyWaitsForItAndSharesIt() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = manager(up);
        MemoryHandle h = m.allocate(1000, GPU);
        m.mapMemory(h, MemoryAccess.WRITE_ONLY).fill((byte) 5);
        m.unmapMemory(h);
        Pause paused = new Pause();
        up.afterCopy = () -> {
            up.afterCopy = null;
            paused.hold(); // copied, then paused
        };
        CompletableFuture<MemorySegment> first = start("first", () -> m.mapMemory(h, MemoryAccess.READ_WRITE));
        CompletableFuture<MemorySegment> second;
        try {
            paused.awaitArrival();
            assertThrows(InvalidMemoryRequestException.class, () -> m.unmapMemory(h), "unmapped a mapping still being made");
            second = start("second", () -> m.mapMemory(h, MemoryAccess.READ_WRITE));
            awaitParkedInOrDone(threads.get(1), "Mappings", "map", second);
            assertFalse(second.isDone(), "a second mapping made a copy of its own while the first was made");
        } finally {
            paused.release();
        }
        MemorySegment a = first.get(30, TimeUnit.SECONDS);
        MemorySegment b = second.get(30, TimeUnit.SECONDS);
        a.set(ValueLayout.JAVA_BYTE, 0, (byte) 88);
        assertEquals(88, b.get(ValueLayout.JAVA_BYTE, 0), "the two mappings are not one");
        assertEquals(5, b.get(ValueLayout.JAVA_BYTE, 999));
        m.unmapMemory(h);
        assertThrows(IllegalStateException.class, () -> b.get(ValueLayout.JAVA_BYTE, 0), "one unmap closes both");
        assertEquals(88, firstByte(m, h), "the shared copy was not written back");
    }

    /** A close waits for a staging copy under way (it pins the block), then drops its mapping: no byte is left. */
    @Test
    void aCloseDuringAStagingCopyWaitsForItAndLeaksNothing() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = manager(up);
        MemoryHandle h = m.allocate(1000, GPU);
        Pause paused = up.pauseNextCopy();
        CompletableFuture<MemorySegment> mapping = start("map", () -> m.mapMemory(h, MemoryAccess.READ_WRITE));
        paused.awaitArrival();
        CompletableFuture<Void> close = start("close", () -> {
            m.close();
            return null;
        });
        try {
            awaitParkedInOrDone(threads.get(1), "Lifecycle", "awaitIdle", close);
            assertFalse(close.isDone(), "the close did not wait for the staging copy");
        } finally {
            paused.release();
        }
        close.get(30, TimeUnit.SECONDS);
        ExecutionException refused = assertThrows(ExecutionException.class, () -> mapping.get(30, TimeUnit.SECONDS));
        assertTrue(refused.getCause() instanceof DeviceUnavailableException, "refused: " + refused.getCause());
        assertEquals(0, up.memory.liveBytes(), "native bytes left after close");
        assertFalse(up.copiedTo.get(0).scope().isAlive(), "the staging copy was not freed");
    }

    /**
     * A close whose wait is cut short (interrupted) while a staging copy runs leaves the pool's
     * chunks to the copy's end: the copy never touches released memory, and then the chunks go.
     */
    @Test
    void aCloseCutShortDuringAStagingCopyReleasesTheChunksAfterIt() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = manager(up);
        MemoryHandle h = m.allocate(1000, GPU);
        Pause paused = up.pauseNextCopy();
        CompletableFuture<MemorySegment> mapping = start("map", () -> m.mapMemory(h, MemoryAccess.READ_WRITE));
        paused.awaitArrival();
        CompletableFuture<Void> close = start("close", () -> {
            m.close();
            return null;
        });
        try {
            awaitParkedInOrDone(threads.get(1), "Lifecycle", "awaitIdle", close);
            threads.get(1).interrupt();
            close.get(30, TimeUnit.SECONDS);
            assertEquals(MiB, up.memory.liveBytes(), "the chunk went back under the staging copy");
        } finally {
            paused.release();
        }
        ExecutionException refused = assertThrows(ExecutionException.class, () -> mapping.get(30, TimeUnit.SECONDS));
        assertTrue(refused.getCause() instanceof DeviceUnavailableException, "refused: " + refused.getCause());
        assertEquals(0, up.memory.liveBytes(), "the copy's end did not release the closed pool's chunk");
        assertFalse(up.copiedTo.get(0).scope().isAlive(), "the staging copy was not freed");
    }

    /** A close waits for a write-back under way (it pins the block), which completes: no byte is left. */
    @Test
    void aCloseDuringAWriteBackWaitsForItAndLeaksNothing() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = manager(up);
        MemoryHandle h = m.allocate(1000, GPU);
        m.mapMemory(h, MemoryAccess.READ_WRITE).fill((byte) 7);
        Pause paused = up.pauseNextWriteBack();
        CompletableFuture<Void> unmap = start("unmap", () -> {
            m.unmapMemory(h);
            return null;
        });
        paused.awaitArrival();
        CompletableFuture<Void> close = start("close", () -> {
            m.close();
            return null;
        });
        try {
            awaitParkedInOrDone(threads.get(1), "Lifecycle", "awaitIdle", close);
            assertFalse(close.isDone(), "the close did not wait for the write-back");
        } finally {
            paused.release();
        }
        close.get(30, TimeUnit.SECONDS);
        unmap.get(30, TimeUnit.SECONDS);
        assertEquals(0, up.memory.liveBytes(), "native bytes left after close");
        assertFalse(up.writtenBack.get(0).scope().isAlive(), "the staging copy was not freed");
    }

    /** As {@link #aCloseCutShortDuringAStagingCopyReleasesTheChunksAfterIt}, for a write-back. */
    @Test
    void aCloseCutShortDuringAWriteBackReleasesTheChunksAfterIt() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = manager(up);
        MemoryHandle h = m.allocate(1000, GPU);
        m.mapMemory(h, MemoryAccess.READ_WRITE).fill((byte) 7);
        Pause paused = up.pauseNextWriteBack();
        CompletableFuture<Void> unmap = start("unmap", () -> {
            m.unmapMemory(h);
            return null;
        });
        paused.awaitArrival();
        CompletableFuture<Void> close = start("close", () -> {
            m.close();
            return null;
        });
        try {
            awaitParkedInOrDone(threads.get(1), "Lifecycle", "awaitIdle", close);
            threads.get(1).interrupt();
            close.get(30, TimeUnit.SECONDS);
            assertEquals(MiB, up.memory.liveBytes(), "the chunk went back under the write-back");
        } finally {
            paused.release();
        }
        unmap.get(30, TimeUnit.SECONDS);
        assertEquals(0, up.memory.liveBytes(), "the write-back's end did not release the closed pool's chunk");
        assertFalse(up.writtenBack.get(0).scope().isAlive(), "the staging copy was not freed");
    }

    /** Defragmentation moves no block whose staging copy is made or written back outside the lock. */
    @Test
    void defragmentationMovesNoBlockUnderAStagingCopyOrAWriteBack() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = manager(up);
        MemoryHandle hole = m.allocate(1000, GPU);
        MemoryHandle h = m.allocate(1000, GPU);
        fill(m, h, (byte) 5);
        m.deallocate(hole);
        Pause copying = up.pauseNextCopy();
        CompletableFuture<MemorySegment> mapping = start("map", () -> m.mapMemory(h, MemoryAccess.READ_WRITE));
        try {
            copying.awaitArrival();
            assertEquals(0, m.defragment(GPU).toCompletableFuture().get(30, TimeUnit.SECONDS).blocksMoved(),
                    "a block moved under its staging copy");
        } finally {
            copying.release();
        }
        MemorySegment view = mapping.get(30, TimeUnit.SECONDS);
        assertEquals(5, view.get(ValueLayout.JAVA_BYTE, 999));
        view.set(ValueLayout.JAVA_BYTE, 0, (byte) 9);
        Pause writing = up.pauseNextWriteBack();
        CompletableFuture<Void> unmap = start("unmap", () -> {
            m.unmapMemory(h);
            return null;
        });
        try {
            writing.awaitArrival();
            assertEquals(0, m.defragment(GPU).toCompletableFuture().get(30, TimeUnit.SECONDS).blocksMoved(),
                    "a block moved under its write-back");
        } finally {
            writing.release();
        }
        unmap.get(30, TimeUnit.SECONDS);
        assertEquals(9, firstByte(m, h), "the write-back was lost");
        assertEquals(1, m.defragment(GPU).toCompletableFuture().get(30, TimeUnit.SECONDS).blocksMoved(),
                "the block does move once nothing runs on it");
        assertEquals(9, firstByte(m, h));
    }

    /**
     * A write-back that fails while a free or a close of the block waits for it: the staging copy it
     * would keep mapped goes with the block (the free's, the close's), and nothing is left.
     */
    @Test
    void aFailedWriteBackUnderAFreeOrACloseLeavesNothing() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = manager(up);
        MemoryHandle h = m.allocate(1000, GPU);
        m.mapMemory(h, MemoryAccess.READ_WRITE).fill((byte) 7);
        Pause paused = up.pauseNextWriteBack();
        up.failNextWriteBack(new IllegalStateException("device lost"));
        CompletableFuture<Void> unmap = start("unmap", () -> {
            m.unmapMemory(h);
            return null;
        });
        try {
            paused.awaitArrival();
            m.deallocate(h);
        } finally {
            paused.release();
        }
        ExecutionException failed = assertThrows(ExecutionException.class, () -> unmap.get(30, TimeUnit.SECONDS));
        assertTrue(failed.getCause() instanceof IllegalStateException, "unmap: " + failed.getCause());
        assertFalse(up.writtenBack.get(0).scope().isAlive(), "the staging copy of a freed block was kept");
        assertEquals(0, m.memoryInfo().usedBytes(), "the freed block did not go back");
        assertEquals(0, m.memoryInfo().activeAllocations());

        MemoryHandle k = m.allocate(1000, GPU);
        m.mapMemory(k, MemoryAccess.READ_WRITE).fill((byte) 8);
        Pause again = up.pauseNextWriteBack();
        up.failNextWriteBack(new IllegalStateException("device lost"));
        CompletableFuture<Void> unmapK = start("unmap k", () -> {
            m.unmapMemory(k);
            return null;
        });
        CompletableFuture<Void> close;
        try {
            again.awaitArrival();
            close = start("close", () -> {
                m.close();
                return null;
            });
            awaitParkedInOrDone(threads.getLast(), "Lifecycle", "awaitIdle", close);
        } finally {
            again.release();
        }
        assertThrows(ExecutionException.class, () -> unmapK.get(30, TimeUnit.SECONDS));
        close.get(30, TimeUnit.SECONDS);
        assertFalse(up.writtenBack.get(1).scope().isAlive(), "the staging copy kept by a failed write-back outlived the close");
        assertEquals(0, up.memory.liveBytes(), "native bytes left after close");
    }

    /**
     * A mapping across two GPUs' managers, unmapped through the alias the peer issued: the write-back
     * goes into the owner's chunk through the owner's upstream, outside its pool's lock, pinned in
     * the owner's pool; a free of the alias meanwhile leaves the block to the other handle, and once
     * both are freed and both managers closed nothing is left.
     */
    @Test
    void anUnmapThroughAPeersAliasWritesBackIntoTheOwnersChunk() throws Exception {
        Map<Device, PooledMemoryManager> running = new ConcurrentHashMap<>();
        PoolSettings settings = PoolSettings.defaults().withPeers(running::get);
        StagedUpstream up0 = new StagedUpstream();
        ArenaUpstream up1 = new ArenaUpstream(Device.cuda(1), 64 * MiB, false);
        PooledMemoryManager owner = manager(up0, config(pool(MiB, MiB, 256)), settings, null);
        PooledMemoryManager peer = manager(up1, config(pool(MiB, MiB, 256)), settings, null);
        running.put(GPU, owner);
        running.put(Device.cuda(1), peer);
        MemoryMapping mapping = owner.createMapping(GPU, Device.cuda(1), 4096);
        peer.mapMemory(mapping.target(), MemoryAccess.READ_WRITE).fill((byte) 6);
        Pause paused = up0.pauseNextWriteBack();
        CompletableFuture<Void> unmap = start("unmap alias", () -> {
            peer.unmapMemory(mapping.target());
            return null;
        });
        try {
            paused.awaitArrival();
            CompletableFuture<Void> other = start("allocate", () -> {
                owner.deallocate(owner.allocate(1000, MemoryType.MAPPED, GPU));
                return null;
            });
            other.get(10, TimeUnit.SECONDS); // the timeout is only the failure signal
            peer.deallocate(mapping.target());
        } finally {
            paused.release();
        }
        unmap.get(30, TimeUnit.SECONDS);
        assertEquals(6, firstByte(owner, mapping.source()), "the alias's write-back did not reach the owner's chunk");
        owner.deallocate(mapping.source());
        assertEquals(0, owner.memoryInfo().usedBytes());
        assertFalse(up0.writtenBack.get(0).scope().isAlive(), "the staging copy was not freed");
        peer.close();
        owner.close();
        assertEquals(0, up0.memory.liveBytes(), "native bytes left after close");
        assertEquals(0, up1.liveBytes());
    }

    /**
     * A mapping whose handle is freed while its staging copy is made, the block still named by the
     * mapping's other handle: the map is refused (the handle is gone), and it must leave nothing
     * mapped. Before, it kept its copy as the block's mapping, which no one had a view of: every read,
     * write and copy through the other handle was refused as staged, and the block showed as mapped.
     */
    @Test
    void aMappingWhoseHandleIsFreedDuringItsCopyLeavesTheBlockUnmapped() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = manager(up);
        MemoryMapping mapping = m.createMapping(GPU, GPU, 4096);
        m.write(mapping.source(), 0, MemorySegment.ofArray(new byte[] {3}));
        Pause copying = up.pauseNextCopy();
        CompletableFuture<MemorySegment> map = start("map", () -> m.mapMemory(mapping.target(), MemoryAccess.READ_WRITE));
        try {
            copying.awaitArrival();
            m.deallocate(mapping.target());
        } finally {
            copying.release();
        }
        ExecutionException refused = assertThrows(ExecutionException.class, () -> map.get(30, TimeUnit.SECONDS));
        assertTrue(refused.getCause() instanceof InvalidHandleException, "refused: " + refused.getCause());
        assertFalse(m.handleInfo(mapping.source()).orElseThrow().mapped(), "a refused mapping left the block mapped");
        assertEquals(3, firstByte(m, mapping.source()), "the block's other handle cannot read it");
        assertFalse(up.copiedTo.get(0).scope().isAlive(), "the refused mapping's staging copy was not freed");
        m.deallocate(mapping.source());
        m.close();
        assertEquals(0, up.memory.liveBytes(), "native bytes left after close");
    }

    /**
     * As {@link #aMappingWhoseHandleIsFreedDuringItsCopyLeavesTheBlockUnmapped}, with a mapping through
     * the other handle waiting for that copy: the refused mapping's pin goes before its filling mapping
     * does, so the waiting one never takes that pin for another call under way; it makes its own copy.
     */
    @Test
    void aMappingWaitingForAnotherHandlesRefusedCopyMakesItsOwn() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = manager(up);
        MemoryMapping mapping = m.createMapping(GPU, GPU, 4096);
        m.write(mapping.source(), 0, MemorySegment.ofArray(new byte[] {3}));
        Pause copying = up.pauseNextCopy();
        CompletableFuture<MemorySegment> refused = start("map", () -> m.mapMemory(mapping.target(), MemoryAccess.READ_WRITE));
        CompletableFuture<MemorySegment> waiting;
        try {
            copying.awaitArrival();
            waiting = start("map other", () -> m.mapMemory(mapping.source(), MemoryAccess.READ_ONLY));
            awaitParkedInOrDone(threads.get(1), "Mappings", "map", waiting);
            assertFalse(waiting.isDone(), "the second mapping did not wait for the first one's copy");
            m.deallocate(mapping.target());
        } finally {
            copying.release();
        }
        ExecutionException failed = assertThrows(ExecutionException.class, () -> refused.get(30, TimeUnit.SECONDS));
        assertTrue(failed.getCause() instanceof InvalidHandleException, "refused: " + failed.getCause());
        assertEquals(3, waiting.get(30, TimeUnit.SECONDS).get(ValueLayout.JAVA_BYTE, 0), "the waiting mapping's own copy");
        m.unmapMemory(mapping.source());
        assertEquals(2, up.copiedTo.size(), "the refused copy and the waiting mapping's own");
        m.deallocate(mapping.source());
        m.close();
        assertEquals(0, up.memory.liveBytes(), "native bytes left after close");
    }
}
