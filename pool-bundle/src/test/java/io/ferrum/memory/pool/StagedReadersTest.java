package io.ferrum.memory.pool;

import static io.ferrum.memory.pool.StagedActionExclusionTest.assertRefusedNaming;
import static io.ferrum.memory.pool.StagedActionExclusionTest.await;
import static io.ferrum.memory.pool.StagedActionExclusionTest.bytes;
import static io.ferrum.memory.pool.StagedActionExclusionTest.one;
import static io.ferrum.memory.pool.StagedActionExclusionTest.outcome;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Function;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.StagingConflictException;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.pool.HookedUpstream.Pause;
import io.ferrum.memory.pool.StagingRacesTest.StagedUpstream;

/**
 * READ_ONLY {@code withMapped} actions of several threads on one block of memory the CPU cannot
 * address (a GPU's): each reads a host staging copy of its own, none is written back, so they
 * share the block. Before, the later of two was refused with {@link StagingConflictException}
 * (every staged action held its block alone, whatever its access): two threads reading a model's
 * weights could not. Now a READ_ONLY outermost action takes a shared hold that other READ_ONLY
 * actions and {@code read}s join; writers (a {@code write}, a READ_WRITE or WRITE_ONLY action, a
 * copy into the block), every copy and async call with the block, a mapping and a free are refused
 * as before, and a nested writer of a reader (a view that may write, a {@code write}) makes its hold
 * exclusive when it is the only reader, and is refused while another thread's reader shares it.
 * Each test holds its readers inside with latches, or pauses an upstream copy.
 */
class StagedReadersTest extends RaceHarness {
    static final Device GPU = StagingRacesTest.GPU;

    /** A test upstream whose next device-to-device copy can be paused before it copies. */
    static final class CopyPausing extends ForwardingUpstream {
        final StagedUpstream staged;
        private final AtomicReference<Pause> copy = new AtomicReference<>();

        CopyPausing(StagedUpstream staged) {
            super(staged);
            this.staged = staged;
        }

        Pause pauseNextDeviceCopy() {
            Pause p = new Pause();
            copy.set(p);
            return p;
        }

        @Override
        public void copy(DeviceChunk src, long srcOffset, DeviceChunk dst, long dstOffset, long bytes) {
            Pause p = copy.getAndSet(null);
            if (p != null) {
                p.hold();
            }
            super.copy(src, srcOffset, dst, dstOffset, bytes);
        }
    }

    PooledMemoryManager gpu(DeviceUpstream up, HostStreamManager streams) {
        return manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults(), streams);
    }

    /**
     * A READ_ONLY action of another thread, held inside until {@link #release}; meanwhile it runs, on
     * its own thread, the steps the test gives it ({@link #inside}).
     */
    final class Reader {
        final CountDownLatch entered = new CountDownLatch(1);
        final BlockingQueue<Function<MemorySegment, Object>> steps = new LinkedBlockingQueue<>();
        final BlockingQueue<Object> answers = new LinkedBlockingQueue<>();
        final CompletableFuture<Object> done;
        /** The first byte the action saw in its view. */
        volatile byte seen = -1;

        Reader(PooledMemoryManager m, MemoryHandle h, String name) throws InterruptedException {
            done = start(name, () -> m.withMapped(h, MemoryAccess.READ_ONLY, v -> {
                seen = v.get(ValueLayout.JAVA_BYTE, 0);
                entered.countDown();
                while (true) {
                    Function<MemorySegment, Object> step;
                    try {
                        step = steps.poll(30, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        throw new AssertionError(e);
                    }
                    if (step == null) {
                        throw new AssertionError("never let go");
                    }
                    if (step == LEAVE) {
                        return "read";
                    }
                    Object answer;
                    try {
                        answer = step.apply(v);
                    } catch (Throwable t) {
                        answer = t;
                    }
                    answers.add(answer == null ? NOTHING : answer);
                }
            }));
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!entered.await(1, TimeUnit.MILLISECONDS)) {
                if (done.isCompletedExceptionally()) {
                    // Refused, or failed: what the action's call threw, for the test to look at.
                    Throwable t = outcome(done::join);
                    if (t.getCause() instanceof RuntimeException e) {
                        throw e;
                    }
                    throw new AssertionError(name + " failed", t);
                }
                if (System.nanoTime() > deadline) {
                    throw new AssertionError(name + " never ran");
                }
            }
        }

        /** Runs {@code step} inside the action, on its thread. @return what it returned or threw (null for null) */
        Object inside(Function<MemorySegment, Object> step) throws InterruptedException {
            steps.add(step);
            return answer();
        }

        /** @return what the step given last returned or threw (null for null), once it ended */
        Object answer() throws InterruptedException {
            Object answer = answers.poll(30, TimeUnit.SECONDS);
            if (answer == null) {
                throw new AssertionError("the step never ended");
            }
            return answer == NOTHING ? null : answer;
        }

        /** Lets the action return. @return what it returned */
        Object release() throws Exception {
            steps.add(LEAVE);
            return done.get(30, TimeUnit.SECONDS);
        }
    }

    static final Function<MemorySegment, Object> LEAVE = v -> null;
    static final Object NOTHING = new Object();

    static MemoryHandle block(PooledMemoryManager m, int first) {
        MemoryHandle h = m.allocate(1000, GPU);
        byte[] b = new byte[1000];
        b[0] = (byte) first;
        m.write(h, 0, MemorySegment.ofArray(b));
        return h;
    }

    /**
     * The reported limit: two threads' READ_ONLY actions on one block. The second was refused; now
     * both are inside at once, each sees the block's bytes, and a third thread's {@code read} goes on.
     */
    @Test
    void twoThreadsReadOnlyActionsOnOneBlockAreInsideAtOnce() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle h = block(m, 7);
        Reader first = new Reader(m, h, "first reader");
        Reader second;
        try {
            second = new Reader(m, h, "second reader");
        } catch (StagingConflictException refused) {
            first.release();
            throw new AssertionError("the second READ_ONLY action was refused while the first was inside: "
                    + refused.getMessage(), refused);
        }
        assertFalse(first.done.isDone(), "the first reader left");
        assertEquals(7, first.seen);
        assertEquals(7, second.seen);
        assertEquals(7, bytes(m, h, 1)[0], "a read during two readers");
        assertEquals((byte) 7, second.inside(v -> m.withMapped(h, MemoryAccess.READ_ONLY,
                nested -> nested.get(ValueLayout.JAVA_BYTE, 0))), "a reader's nested READ_ONLY view");
        assertEquals("read", first.release());
        assertEquals("read", second.release());
        assertEquals(1, up.writtenBack.size(), "a READ_ONLY action was written back");
    }

    /**
     * During two readers every call that would change the block, or needs it alone, is refused and
     * changes nothing: a write, READ_WRITE and WRITE_ONLY actions, copies with the block on either
     * side (synchronous, async, peer), async writes and reads, a mapping, a free; a defragmentation
     * moves nothing.
     */
    @Test
    void aWriterArrivingDuringTwoReadersIsRefusedAndChangesNothing() throws Exception {
        StagedUpstream up = new StagedUpstream();
        HostStreamManager streams = new HostStreamManager(GPU);
        toClose.add(streams);
        PooledMemoryManager m = gpu(up, streams);
        MemoryHandle other = block(m, 9);
        MemoryHandle hole = m.allocate(1000, GPU);
        MemoryHandle h = block(m, 7);
        m.deallocate(hole);
        StreamHandle dflt = streams.defaultStream(GPU);
        Reader first = new Reader(m, h, "first reader");
        Reader second = new Reader(m, h, "second reader");
        AtomicBoolean ran = new AtomicBoolean();
        Throwable write = outcome(() -> m.write(h, 0, one(1)));
        Throwable readWrite = outcome(() -> m.withMapped(h, MemoryAccess.READ_WRITE, v -> {
            ran.set(true);
            v.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
            return null;
        }));
        Throwable writeOnly = outcome(() -> m.withMapped(h, MemoryAccess.WRITE_ONLY, v -> {
            ran.set(true);
            return null;
        }));
        Throwable copyInto = outcome(() -> m.copy(other, h, 1, 0, 0));
        Throwable copyOut = outcome(() -> m.copy(h, other, 1, 0, 0));
        Throwable copyAsync = outcome(() -> m.copyAsync(new MemoryTransfer(other, h, 1, 0, 0), dflt)
                .toCompletableFuture().get(30, TimeUnit.SECONDS));
        Throwable peer = outcome(() -> m.copyToPeer(new MemoryTransfer(other, h, 1, 0, 0), m));
        Throwable writeAsync = outcome(() -> m.writeAsync(h, 0, one(1), dflt).toCompletableFuture()
                .get(30, TimeUnit.SECONDS));
        Throwable readAsync = outcome(() -> m.readAsync(h, 0, MemorySegment.ofArray(new byte[1]), dflt)
                .toCompletableFuture().get(30, TimeUnit.SECONDS));
        Throwable map = outcome(() -> m.mapMemory(h, MemoryAccess.READ_ONLY));
        Throwable free = outcome(() -> m.deallocate(h));
        long moved = m.defragment(GPU).toCompletableFuture().get(30, TimeUnit.SECONDS).blocksMoved();
        first.release();
        second.release();
        byte[] after = bytes(m, h, 1000);
        if (write == null || readWrite == null || copyInto == null || copyAsync == null || peer == null
                || writeAsync == null) {
            assertEquals(7, after[0], "a writer returned during two readers");
        }
        assertRefusedNaming(h, write, "a write during two readers");
        assertRefusedNaming(h, readWrite, "a READ_WRITE action during two readers");
        assertRefusedNaming(h, writeOnly, "a WRITE_ONLY action during two readers");
        assertFalse(ran.get(), "a refused action ran");
        assertRefusedNaming(h, copyInto, "a copy into the block");
        assertRefusedNaming(h, copyOut, "a copy out of the block");
        assertRefusedNaming(h, copyAsync, "copyAsync into the block");
        assertRefusedNaming(h, peer, "copyToPeer into the block");
        assertRefusedNaming(h, writeAsync, "writeAsync");
        assertRefusedNaming(h, readAsync, "readAsync");
        assertTrue(write.getMessage().contains("READ_ONLY"), "the refusal names the readers: " + write.getMessage());
        assertInstanceOf(StagingConflictException.class, map, "a mapping during two readers");
        assertInstanceOf(InvalidMemoryRequestException.class, free, "a free during two readers");
        assertEquals(0, moved, "a block moved under two readers");
        assertFalse(m.handleInfo(h).orElseThrow().mapped(), "a refused mapping left the block mapped");
        assertEquals(7, after[0], "the block changed");
        assertEquals(9, bytes(m, other, 1)[0], "a refused copy changed the other block");
        assertEquals(0, after[1]);
    }

    /**
     * A reader's nested writer (a view that may write, a {@code write}) while another thread's reader
     * shares the block: the nested writer's bytes would be written back over a block the other reader
     * copied, and made it a writer under a reader. It is refused, saying what to do; nothing changes.
     */
    @Test
    void aReadersNestedWriterWhileAnotherReaderHoldsIsRefused() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle h = block(m, 7);
        Reader first = new Reader(m, h, "first reader");
        Reader second = new Reader(m, h, "second reader");
        AtomicBoolean ran = new AtomicBoolean();
        Object view = first.inside(v -> m.withMapped(h, MemoryAccess.READ_WRITE, nested -> {
            ran.set(true);
            nested.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
            return null;
        }));
        Object write = first.inside(v -> {
            m.write(h, 0, one(2));
            return null;
        });
        Object seen = first.inside(v -> v.get(ValueLayout.JAVA_BYTE, 0));
        first.release();
        second.release();
        assertRefusedNaming(h, (Throwable) view, "a reader's nested READ_WRITE view while another reads");
        assertFalse(ran.get(), "the refused nested view ran");
        assertRefusedNaming(h, (Throwable) write, "a reader's nested write while another reads");
        assertTrue(((Throwable) write).getMessage().contains("READ_WRITE"), "says what to do: "
                + ((Throwable) write).getMessage());
        assertEquals((byte) 7, seen, "the reader's copy changed");
        assertEquals(7, bytes(m, h, 1)[0], "the block changed");
        assertEquals(1, up.writtenBack.size(), "a reader's copy was written back");
    }

    /**
     * The last reader leaving lets a writer in; a reader left alone may write through a nested view
     * (its hold becomes its own, as a READ_WRITE action's), and readers arriving after that are
     * refused until its write-back ended.
     */
    @Test
    void theLastReaderLeavingLetsAWriterInAndASoleReaderMayWrite() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle h = block(m, 7);
        Reader first = new Reader(m, h, "first reader");
        Reader second = new Reader(m, h, "second reader");
        first.release();
        assertRefusedNaming(h, outcome(() -> m.write(h, 1, one(3))), "a write while a reader is left");
        assertNull(second.inside(v -> m.withMapped(h, MemoryAccess.READ_WRITE, nested -> {
            nested.set(ValueLayout.JAVA_BYTE, 0, (byte) 5);
            return null;
        })), "the sole reader's nested writer");
        assertNull(second.inside(v -> {
            m.write(h, 2, one(6));
            return null;
        }), "the sole reader's nested write");
        // Its hold is its own now: a reader or a read meanwhile would miss the nested view's byte.
        assertRefusedNaming(h, outcome(() -> new Reader(m, h, "late reader")), "a reader after the upgrade");
        assertRefusedNaming(h, outcome(() -> bytes(m, h, 1)), "a read after the upgrade");
        second.release();
        assertArrayEquals(new byte[] {5, 0, 6}, Arrays.copyOf(bytes(m, h, 1000), 3),
                "the sole reader's nested bytes");
        assertNull(outcome(() -> m.write(h, 1, one(3))), "a write once the readers left");
        assertNull(outcome(() -> m.withMapped(h, MemoryAccess.READ_WRITE, v -> v.get(ValueLayout.JAVA_BYTE, 1))));
        assertEquals(3, bytes(m, h, 2)[1]);
    }

    /** A close made while two readers are inside waits for them; afterwards no native byte or staging copy is left. */
    @Test
    void aCloseWhileTwoReadersAreInsideWaitsAndLeaksNothing() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle h = block(m, 7);
        Reader first = new Reader(m, h, "first reader");
        Reader second = new Reader(m, h, "second reader");
        CompletableFuture<Void> close = start("close", () -> {
            m.close();
            return null;
        });
        Thread closer = threads.get(threads.size() - 1);
        try {
            awaitParkedInOrDone(closer, "Lifecycle", "awaitIdle", close);
            assertFalse(close.isDone(), "the close did not wait for the readers");
            assertEquals((byte) 7, first.inside(v -> v.get(ValueLayout.JAVA_BYTE, 0)), "a view under the close");
        } finally {
            first.release();
            assertFalse(close.isDone(), "the close did not wait for the second reader");
            second.release();
        }
        close.get(30, TimeUnit.SECONDS);
        assertEquals(0, up.memory.liveBytes(), "native bytes left after close");
        assertEquals(up.memory.reserves.get(), up.memory.releases.get(), "chunks reserved and released");
        for (MemorySegment s : up.copiedTo) {
            if (s.isNative()) {
                assertFalse(s.scope().isAlive(), "a reader's staging copy was left");
            }
        }
    }

    /**
     * A READ_ONLY action while another thread's read is under way (paused before its device copy):
     * the read changes nothing, so the action goes on. Before, it was refused as busy.
     */
    @Test
    void aReadOnlyActionDuringAnotherThreadsReadGoesOn() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle h = block(m, 7);
        Pause read = up.pauseNextCopy();
        CompletableFuture<byte[]> reader = start("read", () -> bytes(m, h, 1));
        read.awaitArrival();
        Throwable action;
        AtomicReference<Byte> seen = new AtomicReference<>();
        try {
            action = outcome(() -> m.withMapped(h, MemoryAccess.READ_ONLY,
                    v -> {
                        seen.set(v.get(ValueLayout.JAVA_BYTE, 0));
                        return null;
                    }));
        } finally {
            read.release();
        }
        assertEquals(7, reader.get(30, TimeUnit.SECONDS)[0]);
        assertNull(action, "a READ_ONLY action during another thread's read");
        assertEquals((byte) 7, seen.get());
    }

    /**
     * A READ_ONLY action while another thread's write is under way (paused before it reaches the
     * device): the action's copy would miss it, and a nested writer's write-back overwrite it once it
     * landed. The action is refused and not run, however the readers' hold is taken; the write lands.
     */
    @Test
    void aReadOnlyActionWhileAnotherThreadsWriteIsUnderWayIsRefused() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle h = block(m, 7);
        Pause write = up.pauseNextWriteBack(); // the next copy to the device: the write's
        CompletableFuture<Object> writer = start("writer", () -> {
            m.write(h, 500, one(9));
            return null;
        });
        write.awaitArrival();
        AtomicBoolean ran = new AtomicBoolean();
        Throwable action = outcome(() -> m.withMapped(h, MemoryAccess.READ_ONLY, v -> {
            ran.set(true);
            write.release(); // the write lands on the device during the action
            StagedActionExclusionTest.outcome(() -> writer.get(30, TimeUnit.SECONDS));
            m.withMapped(h, MemoryAccess.READ_WRITE, nested -> {
                nested.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
                return null;
            });
            return null;
        }));
        write.release();
        writer.get(30, TimeUnit.SECONDS);
        byte[] after = bytes(m, h, 1000);
        if (action == null) {
            assertEquals(9, after[500], "the write landed during the READ_ONLY action, whose nested writer's"
                    + " write-back overwrote it");
        }
        assertRefusedNaming(h, action, "a READ_ONLY action during another thread's write");
        assertFalse(ran.get(), "the refused action ran");
        assertEquals(9, after[500]);
        assertEquals(7, after[0]);
    }

    /** The same for another thread's copy into the block, paused before the device copies. */
    @Test
    void aReadOnlyActionWhileACopyIntoTheBlockIsUnderWayIsRefused() throws Exception {
        CopyPausing up = new CopyPausing(new StagedUpstream());
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle other = block(m, 9);
        MemoryHandle h = block(m, 7);
        Pause copy = up.pauseNextDeviceCopy();
        CompletableFuture<Object> copier = start("copier", () -> {
            m.copy(other, h, 1, 0, 500);
            return null;
        });
        copy.awaitArrival();
        AtomicBoolean ran = new AtomicBoolean();
        Throwable action = outcome(() -> m.withMapped(h, MemoryAccess.READ_ONLY, v -> {
            ran.set(true);
            copy.release();
            StagedActionExclusionTest.outcome(() -> copier.get(30, TimeUnit.SECONDS));
            m.withMapped(h, MemoryAccess.READ_WRITE, nested -> {
                nested.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
                return null;
            });
            return null;
        }));
        copy.release();
        copier.get(30, TimeUnit.SECONDS);
        byte[] after = bytes(m, h, 1000);
        if (action == null) {
            assertEquals(9, after[500], "the copy landed during the READ_ONLY action, whose nested writer's"
                    + " write-back overwrote it");
        }
        assertRefusedNaming(h, action, "a READ_ONLY action during another thread's copy into the block");
        assertFalse(ran.get(), "the refused action ran");
        assertEquals(9, after[500]);
    }

    /**
     * Whatever ends a READ_ONLY action (it throws, the device fails its staging copy), its share of
     * the hold goes: another thread's write and READ_WRITE action work again.
     */
    @Test
    void noEndOfAReadOnlyActionLeavesTheBlockShared() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle h = block(m, 7);
        IllegalStateException thrown = new IllegalStateException("the action's own");
        assertEquals(thrown, assertThrows(IllegalStateException.class,
                () -> m.withMapped(h, MemoryAccess.READ_ONLY, v -> {
                    throw thrown;
                })));
        assertWritable(m, h, 1);
        up.failNextCopy(new IllegalStateException("staging copy failed"));
        assertThrows(IllegalStateException.class, () -> m.withMapped(h, MemoryAccess.READ_ONLY, v -> null));
        assertWritable(m, h, 2);
        Reader reader = new Reader(m, h, "reader");
        reader.release();
        assertWritable(m, h, 3);
    }

    /**
     * Attack: a sole reader's nested writer and a second reader arriving at the same moment, both
     * queued for the pool's lock (held by the test). Whichever takes it first, the two are never both
     * admitted: a writer's copy written back under a reader's.
     */
    @Test
    void aSoleReadersNestedWriterAndASecondReaderArrivingAtOnceAreNotBothAdmitted() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle h = block(m, 7);
        Reader first = new Reader(m, h, "first reader");
        ReentrantLock lock = poolLock(m, MemoryType.GENERAL);
        CountDownLatch secondInside = new CountDownLatch(1);
        CountDownLatch secondGo = new CountDownLatch(1);
        CompletableFuture<Object> second;
        lock.lock();
        try {
            first.steps.add(v -> m.withMapped(h, MemoryAccess.READ_WRITE, nested -> {
                nested.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
                return null;
            }));
            awaitQueued(lock, threads.get(0));
            second = start("second reader", () -> m.withMapped(h, MemoryAccess.READ_ONLY, v -> {
                secondInside.countDown();
                await(secondGo);
                return v.get(ValueLayout.JAVA_BYTE, 0);
            }));
            awaitQueued(lock, threads.get(1));
        } finally {
            lock.unlock();
        }
        Object nested = first.answer();
        // The second reader is inside (held there) or refused (done): wait for whichever comes.
        while (secondInside.getCount() > 0 && !second.isDone()) {
            Thread.onSpinWait();
        }
        boolean secondIn = secondInside.getCount() == 0;
        secondGo.countDown();
        Throwable secondOutcome = outcome(() -> second.get(30, TimeUnit.SECONDS));
        first.release();
        assertFalse(nested == null && secondOutcome == null, "both the nested writer and the second reader went on");
        assertTrue(nested == null || secondOutcome == null, "both were refused: " + nested + ", " + secondOutcome);
        if (nested == null) {
            assertRefusedNaming(h, secondOutcome.getCause(), "the reader after the upgrade");
            assertEquals(1, bytes(m, h, 1)[0], "the nested writer's byte");
        } else {
            assertTrue(secondIn, "the second reader never ran");
            assertRefusedNaming(h, (Throwable) nested, "the nested writer among two readers");
            assertEquals(7, bytes(m, h, 1)[0]);
        }
    }

    /**
     * Attack: a reader closes the manager while another reader is inside. The close does not wait (it
     * is made inside an action), the other reader's nested read is refused as closed, and the last
     * reader's end releases everything.
     */
    @Test
    void aCloseMadeByOneReaderWhileAnotherIsInsideLeavesTheReleaseToTheLast() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle h = block(m, 7);
        Reader first = new Reader(m, h, "first reader");
        Reader second = new Reader(m, h, "second reader");
        assertNull(first.inside(v -> {
            m.close();
            return null;
        }), "the close inside a reader");
        assertEquals((byte) 7, second.inside(v -> v.get(ValueLayout.JAVA_BYTE, 0)), "the other reader's view after the close");
        assertInstanceOf(DeviceUnavailableException.class,
                second.inside(v -> bytes(m, h, 1)), "a nested read after the close");
        first.release();
        assertTrue(up.memory.liveBytes() > 0, "a chunk went back under a reader");
        second.release();
        assertEquals(0, up.memory.liveBytes(), "native bytes left after the last reader");
        assertTrue(up.memory.closed, "the upstream was not closed");
    }

    /**
     * Attack: the pool's maintenance under two readers, every zeroing policy: a trim, a live
     * reconfiguration, allocations and frees of other blocks (their fills), a defragmentation. The
     * block keeps its place and bytes, the readers their views.
     */
    @Test
    void maintenanceUnderTwoReadersChangesNothing() throws Exception {
        for (ZeroingPolicy zeroing : ZeroingPolicy.values()) {
            StagedUpstream up = new StagedUpstream();
            MemoryPoolConfig general = pool(MiB, MiB, 256);
            PooledMemoryManager m = manager(up, config(general), PoolSettings.defaults().withZeroing(zeroing), null);
            MemoryHandle hole = m.allocate(1000, GPU);
            MemoryHandle h = block(m, 7);
            m.deallocate(hole);
            Reader first = new Reader(m, h, "first reader");
            Reader second = new Reader(m, h, "second reader");
            m.trim();
            m.configurePool(GPU, MemoryType.GENERAL, general.toBuilder().growthIncrement(2 * MiB)
                    .maxSize(4 * MiB).alignment(512).build());
            m.deallocate(m.allocate(1000, GPU));
            m.deallocate(m.allocate(2 * MiB, GPU));
            assertEquals(0, m.defragment(GPU).toCompletableFuture().get(30, TimeUnit.SECONDS).blocksMoved(),
                    zeroing + ": a block moved under two readers");
            assertEquals((byte) 7, first.inside(v -> v.get(ValueLayout.JAVA_BYTE, 0)), zeroing + ": a reader's view");
            first.release();
            second.release();
            assertEquals(7, bytes(m, h, 1)[0], zeroing + ": the block's bytes");
            m.deallocate(h);
            m.close();
            assertEquals(0, up.memory.liveBytes(), zeroing + ": native bytes left after close");
        }
    }

    /**
     * Attack: a READ_ONLY action while a mapping of the block fills its copy (paused), and while an
     * async write into it waits on a busy stream. Each is refused and not run: the mapping's
     * write-back, or the async write, would land under its copy; the other call goes on.
     */
    @Test
    void aReaderWhileAMappingFillsOrAnAsyncWriteIsPendingIsRefused() throws Exception {
        StagedUpstream up = new StagedUpstream();
        HostStreamManager streams = new HostStreamManager(GPU);
        toClose.add(streams);
        PooledMemoryManager m = gpu(up, streams);
        MemoryHandle h = block(m, 7);
        Pause filling = up.pauseNextCopy();
        CompletableFuture<Object> mapper = start("map", () -> {
            m.mapMemory(h, MemoryAccess.READ_WRITE).set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
            m.unmapMemory(h);
            return null;
        });
        filling.awaitArrival();
        AtomicBoolean ran = new AtomicBoolean();
        Throwable duringFill;
        try {
            duringFill = outcome(() -> m.withMapped(h, MemoryAccess.READ_ONLY, v -> {
                ran.set(true);
                return null;
            }));
        } finally {
            filling.release();
        }
        mapper.get(30, TimeUnit.SECONDS);
        assertRefusedNaming(h, duringFill, "a reader while a mapping fills");
        StreamHandle s = streams.createStream(GPU);
        CountDownLatch busy = new CountDownLatch(1);
        streams.submit(s, () -> await(busy));
        CompletableFuture<Void> pending = m.writeAsync(h, 0, one(2), s).toCompletableFuture();
        Throwable duringAsync = outcome(() -> m.withMapped(h, MemoryAccess.READ_ONLY, v -> {
            ran.set(true);
            return null;
        }));
        busy.countDown();
        pending.get(30, TimeUnit.SECONDS);
        assertRefusedNaming(h, duringAsync, "a reader while an async write is pending");
        assertFalse(ran.get(), "a refused reader ran");
        assertEquals(2, bytes(m, h, 1)[0]);
    }

    private void assertWritable(PooledMemoryManager m, MemoryHandle h, int value) throws Exception {
        assertNull(start("writer", () -> {
            m.write(h, 0, one(value));
            return m.withMapped(h, MemoryAccess.READ_WRITE, v -> {
                assertEquals(value, v.get(ValueLayout.JAVA_BYTE, 0));
                return null;
            });
        }).get(30, TimeUnit.SECONDS));
        assertEquals(value, bytes(m, h, 1)[0]);
    }

    /**
     * A READ_ONLY action while a {@code readAsync} of the block waits on its stream is refused as busy
     * (the pin of a pending asynchronous call refuses every staged action: the engine does not tell a
     * read from a write then), in words that fit a read: no bytes of the pending call to miss, and
     * what to wait for. Before, it said a staging copy "would miss its bytes or be written back over
     * them", which a read has neither.
     */
    @Test
    void aReaderRefusedByAPendingReadAsyncIsToldWhatToWaitFor() throws Exception {
        StagedUpstream up = new StagedUpstream();
        HostStreamManager streams = new HostStreamManager(GPU);
        toClose.add(streams);
        PooledMemoryManager m = gpu(up, streams);
        MemoryHandle h = block(m, 7);
        StreamHandle s = streams.createStream(GPU);
        CountDownLatch busy = new CountDownLatch(1);
        streams.submit(s, () -> await(busy));
        byte[] into = new byte[1];
        CompletableFuture<Void> pending = m.readAsync(h, 0, MemorySegment.ofArray(into), s).toCompletableFuture();
        Throwable refused = outcome(() -> m.withMapped(h, MemoryAccess.READ_ONLY, v -> null));
        busy.countDown();
        pending.get(30, TimeUnit.SECONDS);
        assertEquals(7, into[0]);
        assertRefusedNaming(h, refused, "a reader while a readAsync is pending");
        String said = refused.getMessage();
        assertFalse(said.contains("miss its bytes") || said.contains("written back over"), said);
        assertTrue(said.contains("READ_ONLY") && said.contains("asynchronous") && said.contains("completed"), said);
        assertNull(m.withMapped(h, MemoryAccess.READ_ONLY, v -> null), "a reader once the read has run");
    }

    /**
     * A manager {@code copy} nested in the calling thread's own sole READ_ONLY action on the block is
     * refused (a device copy would neither see nor keep the action's staging copy), in words about
     * that action: this thread's own, and how to move the bytes inside it. Before, it got the message
     * for other readers ("call again once those actions have returned"), which one's own action
     * never does while the call waits inside it.
     */
    @Test
    void aCopyNestedInTheCallersOwnReaderSaysItIsTheCallersAction() {
        PooledMemoryManager m = gpu(new StagedUpstream(), null);
        MemoryHandle h = block(m, 7);
        MemoryHandle other = block(m, 1);
        Object[] refused = new Object[2];
        m.withMapped(h, MemoryAccess.READ_ONLY, v -> {
            refused[0] = outcome(() -> m.copy(h, other, 1, 0, 0));
            refused[1] = outcome(() -> m.copy(other, h, 1, 0, 0));
            return null;
        });
        for (Object t : refused) {
            assertRefusedNaming(h, (Throwable) t, "a copy nested in the caller's own reader");
            String said = ((Throwable) t).getMessage();
            assertTrue(said.contains("this thread's own") && said.contains("read and write")
                    && said.contains("Nothing was done"), said);
            assertFalse(said.contains("once those actions have returned"), said);
        }
        assertEquals(1, bytes(m, other, 1)[0]);
        assertEquals(7, bytes(m, h, 1)[0]);
    }
}
