package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.StagingConflictException;
import io.ferrum.memory.pool.HookedUpstream.Pause;
import io.ferrum.memory.pool.StagingRacesTest.StagedUpstream;

/**
 * Attacks on a staged {@code withMapped} action's hold of its block (memory the CPU cannot address)
 * from the calls that do not move its bytes: a close, a mapping, a defragmentation. They found
 * nothing to fix; they keep the hold honest: a close waits for the action's write-back and leaves no
 * native byte, a close made by the action itself leaves the release to the action's end, and a
 * mapping or defragmentation during the action changes nothing.
 */
class StagedActionAttackTest extends RaceHarness {
    static final Device GPU = StagingRacesTest.GPU;

    PooledMemoryManager gpu(StagedUpstream up) {
        return manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults(), null);
    }

    static byte first(PooledMemoryManager m, MemoryHandle h) {
        byte[] one = new byte[1];
        m.read(h, 0, MemorySegment.ofArray(one));
        return one[0];
    }

    /** A close from another thread while the action's write-back is paused waits for it; nothing leaks. */
    @Test
    void aCloseDuringAnActionsWriteBackWaitsForItAndLeaksNothing() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up);
        MemoryHandle h = m.allocate(1000, GPU);
        Pause writeBack = up.pauseNextWriteBack();
        CompletableFuture<Object> action = start("action", () -> m.withMapped(h, MemoryAccess.READ_WRITE, v -> {
            v.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
            return null;
        }));
        writeBack.awaitArrival();
        CompletableFuture<Void> close = start("close", () -> {
            m.close();
            return null;
        });
        try {
            awaitParkedInOrDone(threads.get(1), "Lifecycle", "awaitIdle", close);
            assertFalse(close.isDone(), "the close did not wait for the action's write-back");
        } finally {
            writeBack.release();
        }
        action.get(30, TimeUnit.SECONDS);
        close.get(30, TimeUnit.SECONDS);
        assertEquals(0, up.memory.liveBytes(), "native bytes left after close");
        assertFalse(up.writtenBack.get(0).scope().isAlive(), "the action's staging copy was not freed");
    }

    /** The action closes its own manager: the close does not wait, the write-back runs, then all goes. */
    @Test
    void aCloseMadeByTheActionLeavesTheReleaseToItsEnd() {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up);
        MemoryHandle h = m.allocate(1000, GPU);
        m.withMapped(h, MemoryAccess.READ_WRITE, v -> {
            v.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
            m.close();
            return null;
        });
        assertEquals(1, up.writtenBack.size(), "the action's copy was not written back");
        assertEquals(0, up.memory.liveBytes(), "native bytes left after the action's end");
    }

    /**
     * During another thread's action a mapping of the block is refused and leaves it unmapped, and a
     * defragmentation moves it not; afterwards a mapping shows the action's bytes.
     */
    @Test
    void aMappingOrDefragmentationDuringAnActionChangesNothing() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up);
        MemoryHandle hole = m.allocate(1000, GPU);
        MemoryHandle h = m.allocate(1000, GPU);
        m.deallocate(hole);
        CountDownLatch inside = new CountDownLatch(1);
        CountDownLatch go = new CountDownLatch(1);
        CompletableFuture<Object> action = start("action", () -> m.withMapped(h, MemoryAccess.READ_WRITE, v -> {
            v.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
            inside.countDown();
            StagedActionExclusionTest.await(go);
            return null;
        }));
        assertTrue(inside.await(30, TimeUnit.SECONDS));
        try {
            assertThrows(StagingConflictException.class, () -> m.mapMemory(h, MemoryAccess.READ_WRITE));
            assertFalse(m.handleInfo(h).orElseThrow().mapped(), "a refused mapping left the block mapped");
            assertEquals(0, m.defragment(GPU).toCompletableFuture().get(30, TimeUnit.SECONDS).blocksMoved(),
                    "a block moved under the action");
        } finally {
            go.countDown();
        }
        action.get(30, TimeUnit.SECONDS);
        MemorySegment view = m.mapMemory(h, MemoryAccess.READ_ONLY);
        assertEquals(1, view.get(ValueLayout.JAVA_BYTE, 0), "the mapping missed the action's byte");
        m.unmapMemory(h);
        assertEquals(1, first(m, h));
    }
}
