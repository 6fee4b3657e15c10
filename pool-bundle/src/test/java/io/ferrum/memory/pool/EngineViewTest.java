package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;

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
}
