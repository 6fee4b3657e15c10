package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.ReentrantLock;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
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
}
