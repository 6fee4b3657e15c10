package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;

/**
 * Allocation requests: what is refused (naming the value) and alignment to any power of two.
 */
class EngineAllocateTest extends EngineTestSupport {
    @Test
    void badAllocationRequestsAreRejectedNamingTheValue() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB).toBuilder().maxSize(8 * MiB).build());
        m.allocate(100, CPU);
        assertTrue(assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocate(0, CPU)).getMessage().contains("0"));
        assertTrue(assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocate(-5, CPU)).getMessage().contains("-5"));
        assertTrue(assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocate(9 * MiB, CPU)).getMessage().contains("maxSize"));
        assertTrue(assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocate(Long.MAX_VALUE, CPU)).getMessage().contains("capacity"));
        assertTrue(assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocateAligned(64, 0, CPU)).getMessage().contains("power of two"));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocateAligned(64, 3000, CPU));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocateAligned(64, 1L << 40, CPU));
        assertTrue(assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocate(64, Device.cuda(0))).getMessage().contains("cuda:0"));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocate(64, null));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocate(64, null, CPU));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.memoryInfo(Device.cpu(1)));
    }

    @Test
    void alignedAllocationsHonourAnyPowerOfTwo() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(4 * MiB, MiB));
        m.allocate(100, CPU); // so that the next block does not start at the chunk's (aligned) start
        for (long align : new long[] {1, 16, 256, 4096, 65536, MiB}) {
            MemoryHandle h = m.allocateAligned(1000, align, CPU);
            MemorySegment s = m.mapMemory(h, MemoryAccess.READ_ONLY);
            assertEquals(0, s.address() % align, "alignment " + align);
            assertEquals(Math.max(align, 256), m.handleInfo(h).orElseThrow().alignment());
            m.unmapMemory(h);
        }
    }
}
