package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolSettings;

/**
 * The scope word at its limit: a count of {@link Block#SCOPE_COUNT} scopes (set directly: that many
 * threads or nested calls cannot be made in a test) must refuse the next scope, not carry into the
 * flags, where the count would read zero and a free would give the block back under the scopes.
 */
class ScopeWordAttackTest {
    static final long MiB = 1024 * 1024;
    static final Device CPU = Device.cpu();

    @Test
    void aFullCountRefusesTheNextScopeAndStillRefusesAFree() {
        Block bare = new Block(null, 0, 64);
        bare.scopes = Block.SCOPE_COUNT;
        assertEquals(-1, bare.stepScope(1), "a full count takes no more scopes");
        assertEquals(Block.SCOPE_COUNT, bare.scopes, "the count did not carry into the flags");

        HandleTable table = new HandleTable(1024);
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        MemoryManagerConfig config = MemoryManagerConfig.defaults().withAutoGc(false, 0.85).withPoolConfig(
                MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).alignment(256).build());
        try (PoolEngine m = new PoolEngine(up, config, PoolSettings.defaults().withThreadCache(0), null, table)) {
            MemoryHandle h = m.allocate(4096, CPU);
            Block b = table.lookup(h.id());
            b.scopes = Block.SCOPE_COUNT;
            InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class,
                    () -> m.write(h, 0, MemorySegment.ofArray(new byte[8])));
            assertTrue(e.getMessage().contains(h.toString()), e.getMessage());
            assertEquals(Block.SCOPE_COUNT, b.scopes, "the refused call left the word as it was");
            assertThrows(InvalidMemoryRequestException.class, () -> m.deallocate(h),
                    "a free still sees the scopes inside");
            assertTrue(m.owns(h));
            b.scopes = 0; // the scopes leave
            m.deallocate(h);
            assertEquals(0, m.memoryInfo().activeAllocations());
        }
        assertEquals(0, up.liveBytes());
    }
}
