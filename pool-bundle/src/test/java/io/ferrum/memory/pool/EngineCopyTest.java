package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.StreamHandle;

/**
 * Copies: bounds (including overflow), memmove semantics within one block, asynchronous copies in
 * stream order, and a block freed while an asynchronous copy still uses it.
 */
class EngineCopyTest extends EngineTestSupport {
    @Test
    void copyMovesBytesAndOverlapWithinOneBlockIsMemmove() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryHandle a = m.allocate(4096, CPU);
        MemoryHandle b = m.allocate(4096, MemoryType.TENSOR, CPU);
        write(m, a, (byte) 7);
        m.copy(a, b, 4096, 0, 0);
        assertContent(m, b, (byte) 7);
        assertTrue(m.memoryInfo().bandwidthGbps().isEmpty(), "copies under 64 KiB are not timed");
        MemoryHandle big1 = m.allocate(64 * KiB, CPU);
        MemoryHandle big2 = m.allocate(64 * KiB, CPU);
        m.copy(big1, big2, 64 * KiB, 0, 0);
        assertTrue(m.memoryInfo().bandwidthGbps().isPresent(), "a real copy of 64 KiB was measured");

        MemorySegment s = m.mapMemory(b, MemoryAccess.READ_WRITE);
        for (int i = 0; i < 16; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) i);
        }
        m.unmapMemory(b);
        m.copy(b, b, 12, 0, 4); // forward overlap
        MemorySegment r = m.mapMemory(b, MemoryAccess.READ_ONLY);
        byte[] expected = {0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
        for (int i = 0; i < 16; i++) {
            assertEquals(expected[i], r.get(ValueLayout.JAVA_BYTE, i), "byte " + i);
        }
        m.unmapMemory(b);
        m.copy(a, b, 0, 4096, 4096); // zero bytes at the very end: a valid no-op
    }


    /**
     * Asynchronous reads and writes follow the bandwidth figure's rule as the synchronous ones do:
     * copies under 64 KiB are not timed. They were: a 16-byte writeAsync gave the device a bandwidth,
     * the time of two clock reads around 16 bytes, which the shell printed as the device's in MB/s.
     */
    @Test
    void asyncCopiesUnder64KiBAreNotTimedEither() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryHandle h = m.allocate(4096, CPU);
        byte[] bytes = new byte[16];
        m.writeAsync(h, 0, MemorySegment.ofArray(bytes), null).toCompletableFuture().join(); // the default stream: done on return
        m.readAsync(h, 0, MemorySegment.ofArray(bytes), null).toCompletableFuture().join();
        assertTrue(m.memoryInfo().bandwidthGbps().isEmpty(),
                "16-byte async copies were timed: " + m.memoryInfo().bandwidthGbps());
        MemoryHandle big = m.allocate(64 * KiB, CPU);
        m.writeAsync(big, 0, MemorySegment.ofArray(new byte[64 * 1024]), null).toCompletableFuture().join();
        assertTrue(m.memoryInfo().bandwidthGbps().isPresent(), "an async copy of 64 KiB was measured");
    }
    @Test
    void copiesOutsideEitherBlockAreRejectedIncludingOverflow() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryHandle a = m.allocate(100, CPU);
        MemoryHandle b = m.allocate(50, CPU);
        write(m, a, (byte) 1);
        write(m, b, (byte) 2);
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copy(a, b, 51, 0, 0));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copy(a, b, 10, 95, 0));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copy(a, b, 10, 0, 41));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copy(a, b, -1, 0, 0));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copy(a, b, 1, -1, 0));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copy(a, b, 2, Long.MAX_VALUE, 0));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copy(a, b, Long.MAX_VALUE, 1, 1));
        // The 256-byte block behind a 100-byte request is not the caller's to copy.
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copy(a, a, 1, 100, 0));
        assertContent(m, a, (byte) 1);
        assertContent(m, b, (byte) 2);
    }

    @Test
    void asyncCopiesRunInStreamOrderAndEventsOrderStreams() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        HostStreamManager streams = streams();
        PooledMemoryManager m = managerWith(up, streams);
        MemoryHandle a = m.allocate(MiB, CPU);
        MemoryHandle b = m.allocate(MiB, CPU);
        MemoryHandle c = m.allocate(MiB, CPU);
        write(m, a, (byte) 5);
        StreamHandle s1 = streams.createStream(CPU);
        StreamHandle s2 = streams.createStream(CPU);
        // s1: a -> b; s2 waits for s1's event, then b -> c. c must end up with a's bytes.
        m.copyAsync(MemoryTransfer.of(a, b, MiB), s1);
        var event = streams.recordEvent(s1);
        streams.waitEvent(s2, event);
        var done = m.copyAsync(MemoryTransfer.of(b, c, MiB), s2).toCompletableFuture();
        done.get(30, TimeUnit.SECONDS);
        streams.synchronizeStream(s1).toCompletableFuture().get(30, TimeUnit.SECONDS);
        assertTrue(streams.isStreamReady(s2));
        assertContent(m, c, (byte) 5);
        // Bad arguments throw at once, not through the stage.
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copyAsync(MemoryTransfer.of(a, b, MiB + 1), s1));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copyAsync(MemoryTransfer.of(a, b, 1), new StreamHandle(999)));
        streams.destroyStream(s1);
        assertThrows(InvalidMemoryRequestException.class, () -> streams.destroyStream(s1));
        assertThrows(InvalidMemoryRequestException.class, () -> streams.destroyStream(StreamHandle.DEFAULT));
        assertThrows(InvalidMemoryRequestException.class, () -> streams.waitEvent(s2, new io.ferrum.memory.api.EventHandle(12345)));
        // The default stream is synchronous.
        var sync = m.copyAsync(MemoryTransfer.of(c, a, 10).withDstOffset(100), null).toCompletableFuture();
        assertTrue(sync.isDone());
        assertEquals(List.of(StreamHandle.DEFAULT, s2), streams.streams());
    }

    @Test
    void freeDuringAnAsyncCopyKeepsTheMemoryUntilTheCopyEnds() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        HostStreamManager streams = streams();
        PooledMemoryManager m = managerWith(up, streams);
        MemoryHandle a = m.allocate(MiB, CPU);
        MemoryHandle b = m.allocate(MiB, CPU);
        StreamHandle s = streams.createStream(CPU);
        CountDownLatch gate = new CountDownLatch(1);
        streams.submit(s, () -> {
            try {
                gate.await();
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        var copy = m.copyAsync(MemoryTransfer.of(a, b, MiB), s).toCompletableFuture();
        m.deallocate(b);
        assertTrue(m.handleInfo(b).isEmpty(), "the handle is dead at once");
        assertEquals(2 * MiB, m.memoryInfo().usedBytes(), "the memory stays until the copy has run");
        gate.countDown();
        copy.get(30, TimeUnit.SECONDS);
        assertEquals(MiB, m.memoryInfo().usedBytes());
    }

    @Test
    void anAsyncCallOfZeroBytesCompletesOnlyAfterTheWorkBeforeItOnItsStream() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        HostStreamManager streams = streams();
        PooledMemoryManager m = managerWith(up, streams);
        MemoryHandle a = m.allocate(MiB, CPU);
        MemoryHandle b = m.allocate(MiB, CPU);
        StreamHandle s = streams.createStream(CPU);
        CountDownLatch gate = new CountDownLatch(1);
        CompletableFuture<Void> before = streams.submit(s, () -> {
            try {
                gate.await();
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        }).toCompletableFuture();
        MemorySegment none = MemorySegment.ofArray(new byte[0]);
        CompletableFuture<Void> copy = m.copyAsync(MemoryTransfer.of(a, b, 0), s).toCompletableFuture();
        CompletableFuture<Void> write = m.writeAsync(b, 16, none, s).toCompletableFuture();
        CompletableFuture<Void> read = m.readAsync(a, MiB, none, s).toCompletableFuture();
        // A caller may wait on any stage as on an event: none of them may say the stream got this far.
        assertFalse(copy.isDone(), "a copy of 0 bytes completed before the work submitted before it");
        assertFalse(write.isDone(), "a write of 0 bytes completed before the work submitted before it");
        assertFalse(read.isDone(), "a read of 0 bytes completed before the work submitted before it");
        gate.countDown();
        CompletableFuture.allOf(copy, write, read).get(30, TimeUnit.SECONDS);
        assertTrue(before.isDone());
        // Their arguments are checked all the same, at once.
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.writeAsync(b, MiB + 1, none, s));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copyAsync(MemoryTransfer.of(a, b, 0), new StreamHandle(999)));
        assertEquals(2 * MiB, m.memoryInfo().usedBytes(), "no pin or block left behind");
        m.deallocate(a);
        m.deallocate(b);
        assertEquals(0, m.memoryInfo().usedBytes());
    }

    private HostStreamManager streams() {
        HostStreamManager streams = new HostStreamManager(CPU);
        toClose.add(streams);
        return streams;
    }

    /** A manager with a 4 MiB first chunk over {@code streams}; it closes before them. */
    private PooledMemoryManager managerWith(ArenaUpstream up, HostStreamManager streams) {
        PooledMemoryManager m = PooledMemoryManager.create(up, config(pool(4 * MiB, MiB)), PoolSettings.defaults(), streams);
        toClose.add(0, m);
        return m;
    }
}
