package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.StagingConflictException;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.pool.HookedUpstream.Pause;
import io.ferrum.memory.pool.StagingRacesTest.StagedUpstream;

/**
 * A {@code withMapped} action on memory the CPU cannot address (a GPU's) works on a host staging
 * copy of the whole block, written back after the action: for its duration that copy holds the
 * block's bytes, as a {@code mapMemory} mapping's does. Before, another thread's write, copy or
 * action landing on the device during the action (or during its write-back) was overwritten by the
 * write-back: lost, though the call had returned. Now the action holds the block for its thread:
 * the thread's own nested calls share the copy, every other thread's data path on the block is
 * refused with {@link StagingConflictException}, changing nothing, and an action that would make
 * the copy while another call on the block is under way is refused before it runs. Each test forces
 * its interleaving with latches inside the action or a paused upstream copy.
 */
class StagedActionExclusionTest extends RaceHarness {
    static final Device GPU = StagingRacesTest.GPU;

    PooledMemoryManager gpu(StagedUpstream up, HostStreamManager streams) {
        return manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults(), streams);
    }

    static byte[] bytes(PooledMemoryManager m, MemoryHandle h, int n) {
        byte[] out = new byte[n];
        m.read(h, 0, MemorySegment.ofArray(out));
        return out;
    }

    /** An action that writes {@code value} at {@code offset} of its view. */
    static Function<MemorySegment, Object> setting(long offset, int value) {
        return v -> {
            v.set(ValueLayout.JAVA_BYTE, offset, (byte) value);
            return null;
        };
    }

    static MemorySegment one(int value) {
        return MemorySegment.ofArray(new byte[] {(byte) value});
    }

    /** An action of another thread, held inside until {@link #release}: it writes 1 at offset 0 first. */
    final class HeldAction {
        final CountDownLatch inside = new CountDownLatch(1);
        final CountDownLatch go = new CountDownLatch(1);
        final CompletableFuture<Object> done;

        HeldAction(PooledMemoryManager m, MemoryHandle h, MemoryAccess access) throws InterruptedException {
            done = start("action", () -> m.withMapped(h, access, v -> {
                if (access != MemoryAccess.READ_ONLY) {
                    v.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
                }
                inside.countDown();
                await(go);
                return null;
            }));
            if (!inside.await(30, TimeUnit.SECONDS)) {
                throw new AssertionError("the action never ran: " + done);
            }
        }

        void release() throws Exception {
            go.countDown();
            done.get(30, TimeUnit.SECONDS);
        }
    }

    static void await(CountDownLatch latch) {
        try {
            if (!latch.await(30, TimeUnit.SECONDS)) {
                throw new AssertionError("never let go");
            }
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
    }

    /** Runs {@code call}: null if it returned, else what it threw. */
    static Throwable outcome(Executable call) {
        try {
            call.execute();
            return null;
        } catch (Throwable t) {
            return t;
        }
    }

    static void assertRefusedNaming(MemoryHandle h, Throwable t, String what) {
        StagingConflictException e = assertInstanceOf(StagingConflictException.class, t, what);
        assertEquals(h, e.handle(), what + ": " + e.getMessage());
        assertTrue(e.getMessage().contains(h.toString()), e.getMessage());
    }

    /**
     * The reported gap: a {@code write} of another thread during a READ_WRITE action returned, and
     * the action's write-back then put the copy's old byte over it. It is refused now, and the block
     * holds the action's bytes.
     */
    @Test
    void anotherThreadsWriteDuringAReadWriteActionIsNotLost() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle h = m.allocate(1000, GPU);
        m.write(h, 0, MemorySegment.ofArray(new byte[1000]));
        HeldAction action = new HeldAction(m, h, MemoryAccess.READ_WRITE);
        Throwable write = outcome(() -> m.write(h, 500, one(9)));
        action.release();
        byte[] after = bytes(m, h, 1000);
        if (write == null) {
            assertEquals(9, after[500], "the write returned, then the action's write-back overwrote it");
        }
        assertRefusedNaming(h, write, "a write during another thread's action");
        assertEquals(1, after[0], "the action's byte");
        assertEquals(0, after[500], "the refused write changed the block");
    }

    /** The same during the action's write-back (paused before it copies): the write is refused, not lost. */
    @Test
    void anotherThreadsWriteDuringTheActionsWriteBackIsNotLost() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle h = m.allocate(1000, GPU);
        m.write(h, 0, MemorySegment.ofArray(new byte[1000]));
        Pause writeBack = up.pauseNextWriteBack();
        CompletableFuture<Object> action = start("action", () -> m.withMapped(h, MemoryAccess.READ_WRITE,
                setting(0, 1)));
        writeBack.awaitArrival();
        Throwable write = outcome(() -> m.write(h, 500, one(9)));
        writeBack.release();
        action.get(30, TimeUnit.SECONDS);
        byte[] after = bytes(m, h, 1000);
        if (write == null) {
            assertEquals(9, after[500], "the write returned, then the action's write-back overwrote it");
        }
        assertRefusedNaming(h, write, "a write during another thread's write-back");
        assertEquals(1, after[0]);
    }

    /**
     * Two threads' READ_WRITE actions on one block: each wrote back its whole copy, so the later
     * write-back erased the earlier action's byte. The second action is refused and does not run.
     */
    @Test
    void aSecondThreadsActionOnTheBlockIsRefusedNotLost() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle h = m.allocate(1000, GPU);
        m.write(h, 0, MemorySegment.ofArray(new byte[1000]));
        HeldAction action = new HeldAction(m, h, MemoryAccess.READ_WRITE);
        AtomicBoolean ran = new AtomicBoolean();
        Throwable second = outcome(() -> m.withMapped(h, MemoryAccess.READ_WRITE, v -> {
            ran.set(true);
            v.set(ValueLayout.JAVA_BYTE, 1, (byte) 2);
            return null;
        }));
        action.release();
        byte[] after = bytes(m, h, 1000);
        if (second == null) {
            assertEquals(2, after[1], "the second action's byte was erased by the first one's write-back");
        }
        assertRefusedNaming(h, second, "a second thread's action");
        assertFalse(ran.get(), "the refused action ran");
        assertEquals(1, after[0]);
        assertEquals(0, after[1]);
    }

    /**
     * A READ_ONLY action around a nested view that writes is written back whole too, so it holds the
     * block as a writer does: another thread's write meanwhile was lost. A read and a READ_ONLY
     * action of another thread are refused as well (the rule is per block, whatever the access).
     */
    @Test
    void aReadOnlyActionHoldsTheBlockSinceANestedViewMayWriteItBack() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle h = m.allocate(1000, GPU);
        m.write(h, 0, MemorySegment.ofArray(new byte[1000]));
        CountDownLatch inside = new CountDownLatch(1);
        CountDownLatch go = new CountDownLatch(1);
        CompletableFuture<Object> action = start("action", () -> m.withMapped(h, MemoryAccess.READ_ONLY, outer -> {
            m.withMapped(h, MemoryAccess.READ_WRITE, setting(700, 5));
            inside.countDown();
            await(go);
            return null;
        }));
        assertTrue(inside.await(30, TimeUnit.SECONDS));
        Throwable write = outcome(() -> m.write(h, 500, one(9)));
        Throwable read = outcome(() -> bytes(m, h, 1));
        Throwable view = outcome(() -> m.withMapped(h, MemoryAccess.READ_ONLY, v -> null));
        go.countDown();
        action.get(30, TimeUnit.SECONDS);
        byte[] after = bytes(m, h, 1000);
        if (write == null) {
            assertEquals(9, after[500], "the write returned, then the READ_ONLY action's write-back overwrote it");
        }
        assertRefusedNaming(h, write, "a write during a READ_ONLY action");
        assertRefusedNaming(h, read, "a read during a READ_ONLY action");
        assertRefusedNaming(h, view, "a READ_ONLY action during another's");
        assertEquals(5, after[700], "the nested view's byte");
    }

    /**
     * Copies of another thread into the block during an action (a synchronous copy, an async copy,
     * an async write on the default stream, which runs at once): each was overwritten by the
     * write-back. Each is refused now; so is a copy out of the block (it would read the device's
     * bytes, older than the action's) and a peer copy with the manager as target.
     */
    @Test
    void anotherThreadsCopiesDuringAnActionAreRefused() throws Exception {
        StagedUpstream up = new StagedUpstream();
        HostStreamManager streams = new HostStreamManager(GPU);
        toClose.add(streams);
        PooledMemoryManager m = gpu(up, streams);
        MemoryHandle other = m.allocate(1000, GPU);
        MemoryHandle h = m.allocate(1000, GPU);
        m.write(h, 0, MemorySegment.ofArray(new byte[1000]));
        byte[] nines = new byte[1000];
        java.util.Arrays.fill(nines, (byte) 9);
        m.write(other, 0, MemorySegment.ofArray(nines));
        StreamHandle dflt = streams.defaultStream(GPU);
        HeldAction action = new HeldAction(m, h, MemoryAccess.READ_WRITE);
        Throwable copy = outcome(() -> m.copy(other, h, 10, 0, 100));
        Throwable copyAsync = outcome(() -> m.copyAsync(new MemoryTransfer(other, h, 10, 0, 200), dflt)
                .toCompletableFuture().get(30, TimeUnit.SECONDS));
        Throwable writeAsync = outcome(() -> m.writeAsync(h, 300, one(9), dflt)
                .toCompletableFuture().get(30, TimeUnit.SECONDS));
        Throwable peer = outcome(() -> m.copyToPeer(new MemoryTransfer(other, h, 10, 0, 400), m));
        Throwable out = outcome(() -> m.copy(h, other, 1, 0, 0));
        Throwable readAsync = outcome(() -> m.readAsync(h, 0, MemorySegment.ofArray(new byte[1]), dflt)
                .toCompletableFuture().get(30, TimeUnit.SECONDS));
        action.release();
        byte[] after = bytes(m, h, 1000);
        if (copy == null) {
            assertEquals(9, after[100], "the copy returned, then the action's write-back overwrote it");
        }
        if (copyAsync == null) {
            assertEquals(9, after[200], "the async copy ran, then the action's write-back overwrote it");
        }
        if (writeAsync == null) {
            assertEquals(9, after[300], "the async write ran, then the action's write-back overwrote it");
        }
        if (peer == null) {
            assertEquals(9, after[400], "the peer copy returned, then the action's write-back overwrote it");
        }
        assertRefusedNaming(h, copy, "copy into the block");
        assertRefusedNaming(h, copyAsync, "copyAsync into the block");
        assertRefusedNaming(h, writeAsync, "writeAsync");
        assertRefusedNaming(h, peer, "copyToPeer into the block");
        assertRefusedNaming(h, out, "copy out of the block");
        assertRefusedNaming(h, readAsync, "readAsync");
        assertEquals(9, bytes(m, other, 1)[0], "a refused copy changed the other block");
        assertEquals(1, after[0]);
    }

    /**
     * A copy into the block made by the action's own thread, nested in it, went to the device and
     * the write-back erased it (the documented behaviour, a lost write all the same). It is refused
     * now; the thread's nested {@code write} keeps working on the shared copy.
     */
    @Test
    void aCopyNestedInTheActionIntoItsBlockIsRefusedNotLost() {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle other = m.allocate(1000, GPU);
        MemoryHandle h = m.allocate(1000, GPU);
        m.write(h, 0, MemorySegment.ofArray(new byte[1000]));
        m.write(other, 0, one(9));
        AtomicReference<Throwable> copy = new AtomicReference<>();
        m.withMapped(h, MemoryAccess.READ_WRITE, v -> {
            copy.set(outcome(() -> m.copy(other, h, 1, 0, 100)));
            m.write(h, 200, one(7));
            return null;
        });
        byte[] after = bytes(m, h, 1000);
        if (copy.get() == null) {
            assertEquals(9, after[100], "the nested copy returned, then the action's write-back overwrote it");
        }
        assertRefusedNaming(h, copy.get(), "a nested copy into the action's block");
        assertEquals(7, after[200], "the nested write");
    }

    /**
     * An action that starts while another thread's write is under way on the block (paused before it
     * copies to the device): its copy missed the write, which then landed during the action and was
     * overwritten by the write-back. The action is refused now and does not run; the write lands.
     */
    @Test
    void anActionWhileAnotherThreadsWriteIsUnderWayIsRefused() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle h = m.allocate(1000, GPU);
        m.write(h, 0, MemorySegment.ofArray(new byte[1000]));
        Pause write = up.pauseNextWriteBack(); // the next copy to the device: the write's
        CompletableFuture<Object> writer = start("writer", () -> {
            m.write(h, 500, one(9));
            return null;
        });
        write.awaitArrival();
        AtomicBoolean ran = new AtomicBoolean();
        Throwable action = outcome(() -> m.withMapped(h, MemoryAccess.READ_WRITE, v -> {
            ran.set(true);
            write.release(); // the write lands on the device during the action
            try {
                writer.get(30, TimeUnit.SECONDS);
            } catch (Exception e) {
                throw new AssertionError(e);
            }
            v.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
            return null;
        }));
        write.release();
        writer.get(30, TimeUnit.SECONDS);
        byte[] after = bytes(m, h, 1000);
        if (action == null) {
            assertEquals(9, after[500], "the write landed during the action, whose write-back overwrote it");
        }
        assertRefusedNaming(h, action, "an action during another thread's write");
        assertFalse(ran.get(), "the refused action ran");
        assertEquals(9, after[500]);
        assertEquals(0, after[0]);
    }

    /**
     * An action that starts while an async write into the block is accepted and not yet run (its
     * stream busy): the action's copy missed it, and its write-back overwrote it once it ran. The
     * action is refused now; the async write lands.
     */
    @Test
    void anActionWhileAnAsyncWriteIsPendingIsRefused() throws Exception {
        StagedUpstream up = new StagedUpstream();
        HostStreamManager streams = new HostStreamManager(GPU);
        toClose.add(streams);
        PooledMemoryManager m = gpu(up, streams);
        MemoryHandle h = m.allocate(1000, GPU);
        m.write(h, 0, MemorySegment.ofArray(new byte[1000]));
        StreamHandle s = streams.createStream(GPU);
        CountDownLatch busy = new CountDownLatch(1);
        streams.submit(s, () -> await(busy));
        CompletableFuture<Void> pending = m.writeAsync(h, 500, one(9), s).toCompletableFuture();
        AtomicBoolean ran = new AtomicBoolean();
        Throwable action = outcome(() -> m.withMapped(h, MemoryAccess.READ_WRITE, v -> {
            ran.set(true);
            busy.countDown(); // the async write runs during the action
            pending.join();
            v.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
            return null;
        }));
        busy.countDown();
        pending.get(30, TimeUnit.SECONDS);
        byte[] after = bytes(m, h, 1000);
        if (action == null) {
            assertEquals(9, after[500], "the async write ran during the action, whose write-back overwrote it");
        }
        assertRefusedNaming(h, action, "an action during a pending async write");
        assertFalse(ran.get());
        assertEquals(9, after[500]);
    }

    /**
     * Whatever ends an action (it throws, the device fails its staging copy, or fails its
     * write-back), the block is held no longer: another thread's write and action work again, the
     * block moves, and the manager closes with no native byte left.
     */
    @Test
    void noEndOfAnActionLeavesTheBlockHeld() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle hole = m.allocate(1000, GPU);
        MemoryHandle h = m.allocate(1000, GPU);
        m.write(h, 0, MemorySegment.ofArray(new byte[1000]));
        IllegalStateException thrown = new IllegalStateException("the action's own");
        assertEquals(thrown, assertThrows(IllegalStateException.class,
                () -> m.withMapped(h, MemoryAccess.READ_WRITE, v -> {
                    throw thrown;
                })));
        assertWorksOnAnotherThread(m, h, 1);
        up.failNextCopy(new IllegalStateException("staging copy failed"));
        assertThrows(IllegalStateException.class, () -> m.withMapped(h, MemoryAccess.READ_WRITE, v -> null));
        assertWorksOnAnotherThread(m, h, 2);
        up.failNextWriteBack(new IllegalStateException("write-back failed"));
        assertThrows(IllegalStateException.class, () -> m.withMapped(h, MemoryAccess.READ_WRITE,
                setting(0, 3)));
        assertWorksOnAnotherThread(m, h, 4);
        m.deallocate(hole);
        assertEquals(1, m.defragment(GPU).toCompletableFuture().get(30, TimeUnit.SECONDS).blocksMoved(),
                "an action left its block held");
        m.deallocate(h);
        m.close();
        assertEquals(0, up.memory.liveBytes(), "native bytes left after close");
    }

    private void assertWorksOnAnotherThread(PooledMemoryManager m, MemoryHandle h, int value) throws Exception {
        assertNull(start("other", () -> {
            m.write(h, 0, one(value));
            return m.withMapped(h, MemoryAccess.READ_WRITE, v -> {
                assertEquals(value, v.get(ValueLayout.JAVA_BYTE, 0));
                return null;
            });
        }).get(30, TimeUnit.SECONDS));
        assertArrayEquals(new byte[] {(byte) value}, bytes(m, h, 1));
    }
}
