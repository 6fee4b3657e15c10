package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.lang.reflect.Field;
import java.util.Optional;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.MemoryUsageHint;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolSettings;

/**
 * {@code usageHint} of a stale handle (a zeroing review of 2026-12): the lookup found the block, then
 * the handle was freed and the block reused by another owner, who set a hint. The answer must be
 * empty, as for {@code handleInfo} and {@code accessStats}; it was the new owner's hint.
 */
class StaleHintTest {
    static final long MiB = 1024 * 1024;

    @Test
    void aStaleHandleNeverReadsTheHintOfItsBlocksNextOwner() throws Exception {
        HandleTable table = new HandleTable(1024);
        MemoryManagerConfig config = MemoryManagerConfig.defaults().withAutoGc(false, 0.85).withPoolConfig(
                MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).alignment(256).build());
        try (PoolEngine m = new PoolEngine(new ArenaUpstream(64 * MiB), config, PoolSettings.defaults().withThreadCache(0),
                null, table)) {
            MemoryHandle first = m.allocate(4096, Device.cpu());
            // What usageHint(first) does first:
            Block b = table.lookup(first.id());
            // ... descheduled here; the handle is freed and its block goes to another owner:
            m.deallocate(first);
            MemoryHandle next = m.allocate(4096, Device.cpu());
            assertSame(b, table.lookup(next.id()), "the next owner got the same block");
            m.setUsageHint(next, MemoryUsageHint.READ_MOSTLY);
            // ... usageHint(first) resumes:
            Field f = PoolEngine.class.getDeclaredField("figures");
            f.setAccessible(true);
            Figures figures = (Figures) f.get(m);
            assertEquals(Optional.empty(), figures.hintOf(b, first), "a freed handle read its block's next owner's hint");
            assertEquals(Optional.of(MemoryUsageHint.READ_MOSTLY), m.usageHint(next));
        }
    }
}
