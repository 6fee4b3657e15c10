package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.function.ThrowingSupplier;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.StagingConflictException;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.pool.HookedUpstream.Pause;
import io.ferrum.memory.pool.StagingRacesTest.StagedUpstream;

/**
 * A block of memory the CPU cannot address (a GPU's), mapped through a host staging copy, and the
 * block's other data paths: while the mapping exists (its copy made, its views open, its write-back
 * under way) every other read, write or copy of the block is refused, changing nothing; a mapping
 * while such a call is under way is refused the same way. Before, each side missed the other: a read
 * returned the device's bytes, not the views', and a write or copy into the block was overwritten by
 * the unmap's write-back.
 */
class StagedMappingExclusionTest extends RaceHarness {
    static final Device GPU = StagingRacesTest.GPU;

    PooledMemoryManager gpu(StagedUpstream up, HostStreamManager streams) {
        return manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults(), streams);
    }

    static byte[] bytes(PooledMemoryManager m, MemoryHandle h, int n) {
        byte[] out = new byte[n];
        m.read(h, 0, MemorySegment.ofArray(out));
        return out;
    }

    static byte[] filled(int n, int value) {
        byte[] out = new byte[n];
        Arrays.fill(out, (byte) value);
        return out;
    }

    static void assertRefused(MemoryHandle h, Executable call, String what) {
        StagingConflictException e = assertThrows(StagingConflictException.class, call, what);
        assertEquals(h, e.handle(), what + ": " + e.getMessage());
        assertTrue(e.getMessage().contains(h.toString()), e.getMessage());
    }

    /**
     * Every data path of a block with a mapping open: the reported defect. A read returned the
     * device's 0s, not the view's 1s; a write, a withMapped action and copies into the block were
     * lost to the unmap's write-back; a copy out of it read the device's old bytes. Each is refused
     * now, naming the handle, and changes nothing: after the unmap the block holds the views' bytes
     * and the other block its own, and no pin is left (the block moves, the manager closes clean).
     */
    @Test
    void everyDataPathOfAStagedBlockIsRefusedAndChangesNothing() throws Exception {
        StagedUpstream up = new StagedUpstream();
        HostStreamManager streams = new HostStreamManager(GPU);
        toClose.add(streams);
        PooledMemoryManager m = gpu(up, streams);
        StreamHandle s = streams.createStream(GPU);
        MemoryHandle other = m.allocate(1000, GPU);
        MemoryHandle hole = m.allocate(1000, GPU);
        MemoryHandle h = m.allocate(1000, GPU);
        m.write(other, 0, MemorySegment.ofArray(filled(1000, 5)));
        MemorySegment view = m.mapMemory(h, MemoryAccess.READ_WRITE);
        view.fill((byte) 1);

        assertRefused(h, () -> bytes(m, h, 1), "read of a mapped block (it read the device's 0s)");
        assertRefused(h, () -> m.write(h, 0, MemorySegment.ofArray(new byte[] {9})), "write");
        AtomicBoolean ran = new AtomicBoolean();
        assertRefused(h, () -> m.withMapped(h, MemoryAccess.READ_WRITE, v -> {
            ran.set(true);
            return v.fill((byte) 9);
        }), "withMapped");
        assertFalse(ran.get(), "the refused action ran");
        assertRefused(h, () -> m.copy(other, h, 1000, 0, 0), "copy into the block");
        assertRefused(h, () -> m.copy(h, other, 1000, 0, 0), "copy out of the block");
        assertRefused(h, () -> m.copyAsync(MemoryTransfer.of(other, h, 1000), s), "copyAsync into the block");
        assertRefused(h, () -> m.copyAsync(MemoryTransfer.of(h, other, 1000), s), "copyAsync out of the block");
        assertRefused(h, () -> m.writeAsync(h, 0, MemorySegment.ofArray(new byte[] {9}), s), "writeAsync");
        assertRefused(h, () -> m.readAsync(h, 0, MemorySegment.ofArray(new byte[1]), s), "readAsync");
        assertRefused(h, () -> m.copyToPeer(MemoryTransfer.of(other, h, 1000), m), "copyToPeer into the block");
        streams.synchronizeStream(s).toCompletableFuture().get(30, TimeUnit.SECONDS);

        assertEquals(1, view.get(ValueLayout.JAVA_BYTE, 0), "a refused call changed the views' bytes");
        m.unmapMemory(h);
        assertArrayEquals(filled(1000, 1), bytes(m, h, 1000), "the views' bytes were not the block's after the unmap");
        assertArrayEquals(filled(1000, 5), bytes(m, other, 1000), "a refused copy changed the other block");
        // Unmapped, every path works again.
        m.write(h, 0, MemorySegment.ofArray(new byte[] {9}));
        assertEquals(9, bytes(m, h, 1)[0]);
        m.deallocate(hole);
        assertEquals(1, m.defragment(GPU).toCompletableFuture().get(30, TimeUnit.SECONDS).blocksMoved(),
                "a refused call left a pin or a scope on a block");
        assertEquals(9, bytes(m, h, 1)[0]);
        m.deallocate(h);
        m.deallocate(other);
        m.close();
        assertEquals(0, up.memory.liveBytes(), "native bytes left after close");
    }

    /**
     * A peer copy between two GPUs' managers, into or out of a block its manager has mapped: refused
     * as a copy within one manager is, naming the mapped block's handle.
     */
    @Test
    void aPeerCopyIntoOrOutOfAStagedBlockIsRefused() {
        Map<Device, PooledMemoryManager> running = new ConcurrentHashMap<>();
        PoolSettings settings = PoolSettings.defaults().withPeers(running::get);
        StagedUpstream up0 = new StagedUpstream();
        StagedUpstream up1 = new StagedUpstream(new ArenaUpstream(Device.cuda(1), 64 * MiB, false));
        PooledMemoryManager a = manager(up0, config(pool(MiB, MiB, 256)), settings, null);
        PooledMemoryManager b = manager(up1, config(pool(MiB, MiB, 256)), settings, null);
        running.put(GPU, a);
        running.put(Device.cuda(1), b);
        MemoryHandle src = a.allocate(1000, GPU);
        MemoryHandle dst = b.allocate(1000, Device.cuda(1));
        a.write(src, 0, MemorySegment.ofArray(filled(1000, 3)));
        b.mapMemory(dst, MemoryAccess.READ_WRITE).fill((byte) 1);
        assertRefused(dst, () -> a.copyToPeer(MemoryTransfer.of(src, dst, 1000), b), "peer copy into the block");
        b.unmapMemory(dst);
        assertArrayEquals(filled(1000, 1), bytes(b, dst, 1000), "the peer copy was lost or made");

        a.mapMemory(src, MemoryAccess.READ_WRITE).fill((byte) 4);
        assertRefused(src, () -> a.copyToPeer(MemoryTransfer.of(src, dst, 1000), b), "peer copy out of the block");
        a.unmapMemory(src);
        assertTrue(a.copyToPeer(MemoryTransfer.of(src, dst, 1000), b));
        assertArrayEquals(filled(1000, 4), bytes(b, dst, 1000));
    }

    /**
     * A write under way (paused inside its copy to the device) when a mapping comes: the mapping's
     * copy would miss the write's bytes, or catch half of them, and its write-back overwrite them. It
     * is refused; once the write returned, a mapping sees its bytes and its unmap keeps them.
     */
    @Test
    void aMappingWhileAWriteIsUnderWayIsRefusedAndTheWriteKept() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle h = m.allocate(1000, GPU);
        Pause paused = up.pauseNextWriteBack(); // the write's copy to the device
        CompletableFuture<Void> write = start("write", () -> {
            m.write(h, 0, MemorySegment.ofArray(filled(1000, 9)));
            return null;
        });
        try {
            paused.awaitArrival();
            assertRefused(h, () -> m.mapMemory(h, MemoryAccess.READ_WRITE), "a mapping under a write");
        } finally {
            paused.release();
        }
        write.get(30, TimeUnit.SECONDS);
        MemorySegment view = m.mapMemory(h, MemoryAccess.READ_WRITE);
        assertEquals(9, view.get(ValueLayout.JAVA_BYTE, 999), "the mapping missed the write");
        view.set(ValueLayout.JAVA_BYTE, 0, (byte) 2);
        m.unmapMemory(h);
        byte[] expected = filled(1000, 9);
        expected[0] = 2;
        assertArrayEquals(expected, bytes(m, h, 1000), "the write-back lost the write");
    }

    /**
     * An asynchronous write accepted and not yet run (paused in its copy) when a mapping comes: the
     * mapping is refused, as under a synchronous write, and the write's pin goes when it has run.
     */
    @Test
    void aMappingWhileAnAsyncWriteIsPendingIsRefused() throws Exception {
        StagedUpstream up = new StagedUpstream();
        HostStreamManager streams = new HostStreamManager(GPU);
        toClose.add(streams);
        PooledMemoryManager m = gpu(up, streams);
        StreamHandle s = streams.createStream(GPU);
        MemoryHandle h = m.allocate(1000, GPU);
        Pause paused = up.pauseNextWriteBack();
        CompletableFuture<Void> write = m.writeAsync(h, 0, MemorySegment.ofArray(filled(1000, 6)), s).toCompletableFuture();
        try {
            paused.awaitArrival();
            assertRefused(h, () -> m.mapMemory(h, MemoryAccess.READ_ONLY), "a mapping under an async write");
        } finally {
            paused.release();
        }
        write.get(30, TimeUnit.SECONDS);
        assertEquals(6, m.mapMemory(h, MemoryAccess.READ_ONLY).get(ValueLayout.JAVA_BYTE, 0), "the mapping missed the write");
        m.unmapMemory(h);
        m.deallocate(h);
        m.close();
        assertEquals(0, up.memory.liveBytes(), "native bytes left after close");
    }

    /**
     * A write while the mapping's staging copy is made (paused before it copies), and one while its
     * write-back runs (paused before it copies): both are refused, changing nothing, and the block
     * ends with the views' bytes. Once the unmap returned, a write goes through.
     */
    @Test
    void aWriteWhileTheStagingCopyIsMadeOrWrittenBackIsRefused() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle h = m.allocate(1000, GPU);
        m.write(h, 0, MemorySegment.ofArray(filled(1000, 3)));
        Pause copying = up.pauseNextCopy();
        CompletableFuture<MemorySegment> mapping = start("map", () -> m.mapMemory(h, MemoryAccess.READ_WRITE));
        try {
            copying.awaitArrival();
            assertRefused(h, () -> m.write(h, 0, MemorySegment.ofArray(new byte[] {9})), "a write under the staging copy");
            assertRefused(h, () -> bytes(m, h, 1), "a read under the staging copy");
        } finally {
            copying.release();
        }
        MemorySegment view = mapping.get(30, TimeUnit.SECONDS);
        assertEquals(3, view.get(ValueLayout.JAVA_BYTE, 0), "a refused write reached the device");
        view.fill((byte) 7);
        Pause writing = up.pauseNextWriteBack();
        CompletableFuture<Void> unmap = start("unmap", () -> {
            m.unmapMemory(h);
            return null;
        });
        try {
            writing.awaitArrival();
            assertRefused(h, () -> m.write(h, 0, MemorySegment.ofArray(new byte[] {9})), "a write under the write-back");
            assertRefused(h, () -> bytes(m, h, 1), "a read under the write-back");
        } finally {
            writing.release();
        }
        unmap.get(30, TimeUnit.SECONDS);
        assertArrayEquals(filled(1000, 7), bytes(m, h, 1000), "the block does not hold the views' bytes");
        m.write(h, 0, MemorySegment.ofArray(new byte[] {9}));
        assertEquals(9, bytes(m, h, 1)[0], "a write after the unmap returned was refused or lost");
    }

    /**
     * A mapping from inside a withMapped action on the same block, on the action's thread: the
     * action's own staging copy is the block for that thread, which the mapping's copy would miss.
     * Refused; the action's write-back is kept, and a mapping after it sees it.
     */
    @Test
    void aMappingInsideAWithMappedActionOnTheBlockIsRefused() {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle h = m.allocate(1000, GPU);
        ThrowingSupplier<Object> inside = () -> m.withMapped(h, MemoryAccess.READ_WRITE, v -> {
            v.fill((byte) 4);
            return assertThrows(StagingConflictException.class, () -> m.mapMemory(h, MemoryAccess.READ_ONLY));
        });
        StagingConflictException refused = (StagingConflictException) assertDoesNotThrow(inside);
        assertEquals(h, refused.handle());
        assertEquals(4, m.mapMemory(h, MemoryAccess.READ_ONLY).get(ValueLayout.JAVA_BYTE, 999), "the action's write-back was lost");
        m.unmapMemory(h);
    }

    /**
     * A mapping waiting for another's staging copy, which the device fails: it makes the copy itself
     * and is not refused. The failed copy's pin goes while its filling mapping still stands, so the
     * waiting mapping, woken when that mapping goes, never finds the pin, which it would take for an
     * asynchronous copy under way (the write-back's pin goes the same way: see {@code
     * StagingRacesTest.aMappingDuringAWriteBackSeesTheWrittenBackBytes}).
     */
    @Test
    void aMappingWaitingForAFailedStagingCopyMakesItsOwn() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up, null);
        MemoryHandle h = m.allocate(1000, GPU);
        m.write(h, 0, MemorySegment.ofArray(filled(1000, 5)));
        Pause copying = up.pauseNextCopy();
        RuntimeException lost = new IllegalStateException("device lost");
        up.failNextCopy(lost);
        CompletableFuture<MemorySegment> first = start("first", () -> m.mapMemory(h, MemoryAccess.READ_WRITE));
        CompletableFuture<MemorySegment> second;
        try {
            copying.awaitArrival();
            second = start("second", () -> m.mapMemory(h, MemoryAccess.READ_ONLY));
            awaitParkedInOrDone(threads.get(1), "Mappings", "map", second);
            assertFalse(second.isDone(), "the second mapping did not wait for the first one's copy");
        } finally {
            copying.release();
        }
        ExecutionException failed = assertThrows(ExecutionException.class, () -> first.get(30, TimeUnit.SECONDS));
        assertSame(lost, failed.getCause());
        MemorySegment view = second.get(30, TimeUnit.SECONDS);
        assertEquals(5, view.get(ValueLayout.JAVA_BYTE, 999), "the second mapping's own copy");
        m.unmapMemory(h);
        assertEquals(2, up.copiedTo.size(), "the failed copy and the second mapping's own");
        m.deallocate(h);
        m.close();
        assertEquals(0, up.memory.liveBytes(), "native bytes left after close");
    }
}
