package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.reflect.Field;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.ReentrantLock;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.StagingConflictException;
import io.ferrum.memory.api.StreamHandle;
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

    /**
     * Sets (or, with null, clears) a tests-only hook of the engine: the static field {@code field} of
     * its package-private class {@code simpleName}, read by reflection as {@link #poolLock} reads.
     */
    static void engineHook(String simpleName, String field, Runnable hook) throws ReflectiveOperationException {
        Field f = Class.forName("io.ferrum.memory.pool.internal." + simpleName).getDeclaredField(field);
        f.setAccessible(true);
        f.set(null, hook);
    }

    /** Sets the engine's hook run by a staged action refused as busy ({@code DataPath.busyForTests}). */
    static void onBusyAction(Runnable hook) throws ReflectiveOperationException {
        engineHook("DataPath", "busyForTests", hook);
    }

    /**
     * An action and an async copy of its block that start at the same moment: one of the two must go
     * on. The copy pins the block, then (paused on the other block's pool lock, which the test holds)
     * has yet to look for an action's hold; the action sees the pin and is refused, and the copy then
     * goes on as the refusal is made. Before, the action took its hold first and let it go only once
     * refused: the copy, looking meanwhile, saw the hold and was refused too, and neither ran.
     */
    @Test
    void anActionAndAnAsyncCopyStartingTogetherAreNotBothRefused() throws Exception {
        StagedUpstream up = new StagedUpstream();
        HostStreamManager streams = new HostStreamManager(GPU);
        toClose.add(streams);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults(), streams);
        MemoryHandle h = m.allocate(1000, GPU);
        MemoryHandle d = m.allocate(1000, MemoryType.CACHE, GPU);
        m.write(h, 0, MemorySegment.ofArray(new byte[] {3}));
        StreamHandle dflt = streams.defaultStream(GPU);
        ReentrantLock otherPool = poolLock(m, MemoryType.CACHE);
        CountDownLatch refusing = new CountDownLatch(1);
        CompletableFuture<Object> copy;
        CompletableFuture<Object> action;
        otherPool.lock();
        try {
            // Pinned the block, then queued for the destination's pool: it has yet to look for a hold.
            copy = start("copyAsync", () -> m.copyAsync(new MemoryTransfer(h, d, 1000, 0, 0), dflt)
                    .toCompletableFuture().get(30, TimeUnit.SECONDS));
            awaitQueued(otherPool, threads.get(0));
            CompletableFuture<Object> theCopy = copy;
            onBusyAction(() -> {
                refusing.countDown();
                // The copy looks for a hold meanwhile, and ends.
                StagedActionExclusionTest.outcome(() -> theCopy.get(30, TimeUnit.SECONDS));
            });
            action = start("action", () -> m.withMapped(h, MemoryAccess.READ_WRITE, v -> {
                v.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
                return null;
            }));
            assertTrue(refusing.await(30, TimeUnit.SECONDS), "the action was not refused for the copy's pin");
        } finally {
            otherPool.unlock();
        }
        Throwable copied;
        Throwable acted;
        try {
            copied = StagedActionExclusionTest.outcome(() -> copy.get(30, TimeUnit.SECONDS));
            acted = StagedActionExclusionTest.outcome(() -> action.get(30, TimeUnit.SECONDS));
        } finally {
            onBusyAction(null);
        }
        assertFalse(copied != null && acted != null, "both were refused: the copy with " + copied
                + ", the action with " + acted);
        assertTrue(acted.getCause() instanceof StagingConflictException, "the action, started later: " + acted);
        assertEquals(3, first(m, d), "the copy that went on did not copy");
        assertEquals(3, first(m, h), "the refused action changed the block");
    }

    /** Sets the engine's hook run by a staged mapping once it is published as filling ({@code Mappings.fillingForTests}). */
    static void onFillingMapping(Runnable hook) throws ReflectiveOperationException {
        engineHook("Mappings", "fillingForTests", hook);
    }

    /**
     * A mapping made during another thread's action is refused (the later of the two), and must not
     * refuse the action's own nested calls on the way. Before, the mapping published itself as filling,
     * then waited a few microseconds for the action's scope to leave before it was refused: a read
     * nested in the action meanwhile found the block mapped and was refused. The test makes that read
     * inside the wait (a hook where the filling mapping is published).
     */
    @Test
    void aMappingRefusedForAnActionDoesNotRefuseTheActionsNestedCalls() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up);
        MemoryHandle h = m.allocate(1000, GPU);
        m.write(h, 0, MemorySegment.ofArray(new byte[1000]));
        CountDownLatch inside = new CountDownLatch(1);
        CountDownLatch goRead = new CountDownLatch(1);
        CountDownLatch readDone = new CountDownLatch(1);
        AtomicReference<Throwable> nested = new AtomicReference<>();
        CompletableFuture<Object> action = start("action", () -> m.withMapped(h, MemoryAccess.READ_WRITE, v -> {
            v.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
            inside.countDown();
            StagedActionExclusionTest.await(goRead);
            nested.set(StagedActionExclusionTest.outcome(() -> m.read(h, 0, MemorySegment.ofArray(new byte[1]))));
            readDone.countDown();
            return null;
        }));
        assertTrue(inside.await(30, TimeUnit.SECONDS));
        Throwable mapped;
        onFillingMapping(() -> {
            goRead.countDown(); // the action reads while the mapping stands published
            StagedActionExclusionTest.await(readDone);
        });
        try {
            mapped = StagedActionExclusionTest.outcome(() -> m.mapMemory(h, MemoryAccess.READ_WRITE));
        } finally {
            onFillingMapping(null);
            goRead.countDown(); // the mapping was refused before it published anything
        }
        action.get(30, TimeUnit.SECONDS);
        assertNull(nested.get(), "the action's nested read was refused by a mapping that came after the action");
        assertTrue(mapped instanceof StagingConflictException, "the mapping during the action: " + mapped);
        assertFalse(m.handleInfo(h).orElseThrow().mapped(), "a refused mapping left the block mapped");
        assertEquals(1, first(m, h), "the action's byte");
    }
}
