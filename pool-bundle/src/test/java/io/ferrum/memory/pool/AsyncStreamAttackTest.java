package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.EventHandle;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.StreamHandle;

/**
 * An attack on the engine's async data path over a {@link HostStreamManager} (a helper, 2026-12):
 * blocks freed or defragmented under a queued copy, a stream destroyed or a stream manager closed
 * with copies queued, work that fails, and the figures afterwards. A stream is held busy by a latch
 * so that the copies under attack are accepted and not yet run; every wait is bounded.
 */
class AsyncStreamAttackTest extends EngineTestSupport {
    private static final long WAIT_S = 30;
    private final CountDownLatch hold = new CountDownLatch(1);

    @AfterEach
    void letGo() {
        hold.countDown();
    }

    private HostStreamManager streams(long closeWaitNanos) {
        HostStreamManager s = new HostStreamManager(CPU, Executors.newCachedThreadPool(), StreamIds.MAX_SEQUENCE,
                closeWaitNanos);
        toClose.add(s);
        return s;
    }

    /** A manager with a 4 MiB first chunk over {@code streams}; it closes before them. */
    private PooledMemoryManager managerWith(DeviceUpstream up, HostStreamManager streams) {
        PooledMemoryManager m = PooledMemoryManager.create(up, config(pool(4 * MiB, MiB)),
                PoolSettings.defaults(), streams);
        toClose.add(0, m);
        return m;
    }

    /** Holds {@code s} busy until the test ends or lets {@link #hold} go. */
    private CompletableFuture<Void> holdBusy(HostStreamManager streams, StreamHandle s) {
        return streams.submit(s, () -> {
            try {
                if (!hold.await(WAIT_S, TimeUnit.SECONDS)) {
                    throw new AssertionError("the stream was held for " + WAIT_S + " s");
                }
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        });
    }

    private static void get(CompletableFuture<?> f, String what) throws Exception {
        try {
            f.get(WAIT_S, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            throw new AssertionError(what + " did not complete within " + WAIT_S + " s", e);
        }
    }

    @Test
    void aQueuedCopysBlocksFreedAndDefragmentedNeitherMoveNorGoToTheNextOwner() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        HostStreamManager streams = streams(TimeUnit.SECONDS.toNanos(10));
        PooledMemoryManager m = managerWith(up, streams);
        MemoryHandle hole = m.allocate(256 * KiB, CPU);
        MemoryHandle src = m.allocate(256 * KiB, CPU);
        MemoryHandle hole2 = m.allocate(256 * KiB, CPU);
        MemoryHandle dst = m.allocate(256 * KiB, CPU);
        write(m, src, (byte) 5);
        write(m, dst, (byte) 1);
        StreamHandle s = streams.createStream(CPU);
        holdBusy(streams, s);
        CompletableFuture<Void> copy = m.copyAsync(MemoryTransfer.of(src, dst, 256 * KiB), s).toCompletableFuture();
        m.deallocate(hole);
        m.deallocate(hole2);
        m.deallocate(src); // accepted: the handle dies now, the memory stays until the copy has run
        m.defragment(CPU).toCompletableFuture().get(WAIT_S, TimeUnit.SECONDS);
        MemoryHandle next = m.allocate(256 * KiB, CPU);
        write(m, next, (byte) 9);
        assertFalse(copy.isDone(), "the copy is still queued");
        hold.countDown();
        get(copy, "the queued copy");
        assertContent(m, dst, (byte) 5);
        assertContent(m, next, (byte) 9);
        assertEquals(2 * 256 * KiB, m.memoryInfo().usedBytes(), "the freed source went back when the copy ran");
        assertTrue(m.memoryInfo().bandwidthGbps().isPresent(), "the async copy of 256 KiB was measured");
    }

    @Test
    void copiesQueuedOnADestroyedStreamRunOnceAndUnpin() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        HostStreamManager streams = streams(TimeUnit.SECONDS.toNanos(10));
        PooledMemoryManager m = managerWith(up, streams);
        MemoryHandle a = m.allocate(64 * KiB, CPU);
        MemoryHandle b = m.allocate(64 * KiB, CPU);
        write(m, a, (byte) 3);
        StreamHandle s = streams.createStream(CPU);
        holdBusy(streams, s);
        CompletableFuture<Void> copy = m.copyAsync(MemoryTransfer.of(a, b, 64 * KiB), s).toCompletableFuture();
        byte[] out = new byte[(int) (64 * KiB)];
        CompletableFuture<Void> read = m.readAsync(b, 0, MemorySegment.ofArray(out), s).toCompletableFuture();
        EventHandle after = streams.recordEvent(s);
        streams.destroyStream(s);
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copyAsync(MemoryTransfer.of(a, b, 1), s));
        m.deallocate(a);
        m.deallocate(b);
        assertEquals(2 * 64 * KiB, m.memoryInfo().usedBytes(), "both still pinned by queued work");
        hold.countDown();
        get(copy, "the copy on the destroyed stream");
        get(read, "the read behind it");
        streams.waitEvent(StreamHandle.DEFAULT, after);
        for (int i = 0; i < out.length; i++) {
            assertEquals((byte) (3 + i * 31), out[i], "byte " + i + " read after the copy on its stream");
        }
        assertEquals(0, m.memoryInfo().usedBytes(), "no pin left");
        assertEquals(0, m.memoryInfo().activeAllocations());
    }

    @Test
    void writesAndReadsQueuedWhenTheStreamManagerClosesStillRunOnceAndUnpin() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        HostStreamManager streams = streams(0); // close does not wait: the queued work outlives it
        PooledMemoryManager m = managerWith(up, streams);
        MemoryHandle a = m.allocate(64 * KiB, CPU);
        StreamHandle s = streams.createStream(CPU);
        holdBusy(streams, s);
        byte[] in = new byte[(int) (64 * KiB)];
        java.util.Arrays.fill(in, (byte) 0x42);
        byte[] out = new byte[in.length];
        CompletableFuture<Void> w = m.writeAsync(a, 0, MemorySegment.ofArray(in), s).toCompletableFuture();
        CompletableFuture<Void> r = m.readAsync(a, 0, MemorySegment.ofArray(out), s).toCompletableFuture();
        streams.close();
        assertRejected(m, DeviceUnavailableException.class, () -> m.writeAsync(a, 0, MemorySegment.ofArray(in), s));
        assertRejected(m, DeviceUnavailableException.class, () -> m.readAsync(a, 0, MemorySegment.ofArray(out), null));
        m.deallocate(a);
        hold.countDown();
        get(w, "the queued write");
        get(r, "the queued read");
        assertEquals(0x42, out[out.length - 1], "the read came after the write on its stream");
        assertEquals(0, m.memoryInfo().usedBytes(), "no pin left after the stream manager closed");
    }

    @Test
    void aCopyTheDeviceFailsFailsItsStageOnlyUnpinsAndTheStreamGoesOn() throws Exception {
        ArenaUpstream real = new ArenaUpstream(64 * MiB);
        AtomicBoolean failNext = new AtomicBoolean(true);
        DeviceUpstream up = new ForwardingUpstream(real) {
            @Override
            public void copy(DeviceChunk src, long srcOffset, DeviceChunk dst, long dstOffset, long bytes) {
                if (failNext.getAndSet(false)) {
                    throw new IllegalStateException("the device failed the copy");
                }
                super.copy(src, srcOffset, dst, dstOffset, bytes);
            }
        };
        HostStreamManager streams = streams(TimeUnit.HOURS.toNanos(1));
        PooledMemoryManager m = managerWith(up, streams);
        MemoryHandle a = m.allocate(64 * KiB, CPU);
        MemoryHandle b = m.allocate(64 * KiB, CPU);
        write(m, a, (byte) 7);
        StreamHandle s = streams.createStream(CPU);
        holdBusy(streams, s);
        CompletableFuture<Void> failing = m.copyAsync(MemoryTransfer.of(a, b, 64 * KiB), s).toCompletableFuture();
        CompletableFuture<Void> next = m.copyAsync(MemoryTransfer.of(a, b, 64 * KiB), s).toCompletableFuture();
        m.deallocate(a);
        hold.countDown();
        ExecutionException e = assertThrows(ExecutionException.class, () -> failing.get(WAIT_S, TimeUnit.SECONDS));
        assertInstanceOf(IllegalStateException.class, e.getCause());
        get(next, "the copy after the failed one");
        assertContent(m, b, (byte) 7);
        assertEquals(64 * KiB, m.memoryInfo().usedBytes(), "the failed copy's pins went too");
        // Nothing stays pending in the stream manager: its close (an hour's wait) returns.
        CompletableFuture<Void> closed = CompletableFuture.runAsync(streams::close);
        get(closed, "the stream manager's close");
    }

    @Test
    void aConfinedOrClosedSegmentIsRefusedBeforeAPinAndACopyIntoAClosedArenaFailsOnlyItsStage() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        HostStreamManager streams = streams(TimeUnit.SECONDS.toNanos(10));
        PooledMemoryManager m = managerWith(up, streams);
        MemoryHandle a = m.allocate(4 * KiB, CPU);
        StreamHandle s = streams.createStream(CPU);
        try (Arena confined = Arena.ofConfined()) {
            MemorySegment seg = confined.allocate(4 * KiB);
            assertRejected(m, InvalidMemoryRequestException.class, () -> m.writeAsync(a, 0, seg, s));
        }
        holdBusy(streams, s);
        Arena shared = Arena.ofShared();
        MemorySegment seg = shared.allocate(4 * KiB);
        CompletableFuture<Void> r = m.readAsync(a, 0, seg, s).toCompletableFuture();
        shared.close(); // the caller broke the rule: the copy must fail, not write into freed memory
        hold.countDown();
        ExecutionException e = assertThrows(ExecutionException.class, () -> r.get(WAIT_S, TimeUnit.SECONDS));
        assertInstanceOf(IllegalStateException.class, e.getCause());
        m.deallocate(a);
        assertEquals(0, m.memoryInfo().usedBytes(), "the failed read's pin went");
        assertFalse(seg.scope().isAlive());
    }

    /**
     * A copy on the default stream runs on its caller's thread, and waits there for a place among the
     * manager's {@code maxConcurrentTransfers}. An interrupt of that thread (Ctrl-C in a shell) was
     * ignored: it waited uninterruptibly for as long as the copies in flight took, for ever behind
     * a device call that never returned.
     */
    @Test
    void anInterruptEndsADefaultStreamCopysWaitForATransferSlotAndLeavesNoPin() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        HostStreamManager streams = streams(TimeUnit.SECONDS.toNanos(10));
        PooledMemoryManager m = PooledMemoryManager.create(up,
                config(pool(4 * MiB, MiB)).withMaxConcurrentTransfers(1), PoolSettings.defaults(), streams);
        toClose.add(0, m);
        MemoryHandle a = m.allocate(64 * KiB, CPU);
        MemoryHandle b = m.allocate(64 * KiB, CPU);
        MemoryHandle c = m.allocate(64 * KiB, CPU);
        StreamHandle s = streams.createStream(CPU);
        HookedUpstream.Pause inFlight = up.pauseNext(HookedUpstream.Call.COPY);
        CompletableFuture<Void> first = m.copyAsync(MemoryTransfer.of(a, b, 64 * KiB), s).toCompletableFuture();
        inFlight.awaitArrival(); // the one transfer slot is taken
        java.util.concurrent.atomic.AtomicReference<Object> outcome = new java.util.concurrent.atomic.AtomicReference<>();
        AtomicBoolean flagKept = new AtomicBoolean();
        Thread caller = new Thread(() -> {
            try {
                outcome.set(m.copyAsync(MemoryTransfer.of(a, c, 64 * KiB), StreamHandle.DEFAULT).toCompletableFuture());
            } catch (Throwable t) {
                outcome.set(t);
            }
            flagKept.set(Thread.currentThread().isInterrupted());
        }, "default-stream caller");
        caller.start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
        while (caller.getState() != Thread.State.WAITING && caller.isAlive()) {
            assertTrue(System.nanoTime() < deadline, "the caller never waited for the transfer slot");
            Thread.onSpinWait();
        }
        caller.interrupt();
        caller.join(TimeUnit.SECONDS.toMillis(WAIT_S));
        boolean stuck = caller.isAlive();
        inFlight.release();
        caller.join(TimeUnit.SECONDS.toMillis(WAIT_S));
        get(first, "the copy in flight");
        assertFalse(stuck, "the interrupted caller went on waiting for the copy in flight");
        CompletableFuture<?> stage = assertInstanceOf(CompletableFuture.class, outcome.get());
        ExecutionException e = assertThrows(ExecutionException.class, () -> stage.get(WAIT_S, TimeUnit.SECONDS));
        assertInstanceOf(io.ferrum.memory.api.MemoryException.class, e.getCause(), "the copy says it was interrupted");
        assertInstanceOf(InterruptedException.class, e.getCause().getCause());
        assertTrue(flagKept.get(), "the interrupt stays set");
        m.deallocate(a);
        m.deallocate(c);
        assertEquals(64 * KiB, m.memoryInfo().usedBytes(), "the interrupted copy left no pin");
    }
}
