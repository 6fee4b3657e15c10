package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;

/**
 * Zeroing policies: every policy but {@code NONE} clears a block between two owners.
 */
class EngineZeroingTest extends EngineTestSupport {
    @Test
    void zeroingPoliciesClearMemoryBetweenOwners() {
        for (ZeroingPolicy policy : ZeroingPolicy.values()) {
            ArenaUpstream up = new ArenaUpstream(64 * MiB);
            PooledMemoryManager m = manager(up, config(pool(MiB, MiB)), PoolSettings.defaults().withZeroing(policy));
            MemoryHandle a = m.allocate(4096, CPU);
            write(m, a, (byte) 1);
            m.deallocate(a);
            MemoryHandle b = m.allocate(4096, CPU);
            MemorySegment s = m.mapMemory(b, MemoryAccess.READ_ONLY);
            boolean allZero = true;
            for (long i = 0; i < 4096; i++) {
                allZero &= s.get(ValueLayout.JAVA_BYTE, i) == 0;
            }
            m.unmapMemory(b);
            assertEquals(policy != ZeroingPolicy.NONE, allZero, policy.name());
        }
    }
}
