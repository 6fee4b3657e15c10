package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Field;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolSettings;

/**
 * The scope word of a block ({@link Scopes}): the states a race leaves behind, set up one step at a
 * time. A free that passed its check before a scope entered, and claimed the name after it, must
 * leave the block to the scope's exit; a flag set while no scope is inside must not be waited for.
 */
class ScopesTest {
    static final long KiB = 1024;
    static final long MiB = 1024 * KiB;
    static final Device CPU = Device.cpu();

    private static MemoryManagerConfig config() {
        return MemoryManagerConfig.defaults().withAutoGc(false, 0.85).withPoolConfig(MemoryType.GENERAL,
                MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).alignment(256).build());
    }

    private static Reclaimer reclaimerOf(PoolEngine m) throws ReflectiveOperationException {
        Field f = PoolEngine.class.getDeclaredField("reclaimer");
        f.setAccessible(true);
        return (Reclaimer) f.get(m);
    }

    @Test
    void aNameFreedWhileAScopeIsInsideGivesTheBlockBackWhenTheScopeLeaves() throws Exception {
        HandleTable table = new HandleTable(1024);
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        try (PoolEngine m = new PoolEngine(up, config(), PoolSettings.defaults().withThreadCache(0), null, table)) {
            MemoryHandle h = m.allocate(4 * KiB, CPU);
            Block b = table.lookup(h.id());
            // The scope enters first (it saw the handle live) ...
            Scopes.enter(b, h.id());
            // ... then a free that had found no scope claims the last name and gives the block back.
            assertEquals(0, b.claim(h.id()));
            reclaimerOf(m).lastNameGone(b, null);
            assertEquals(4 * KiB, m.memoryInfo().usedBytes(), "the block went back under a scope");
            assertTrue((b.scopes & Block.SCOPE_FREED) != 0);
            assertFalse(b.free);

            Scopes.exit(b);
            assertEquals(0, m.memoryInfo().usedBytes(), "the last scope to leave gave it back");
            assertEquals(0, b.scopes, "the word is clean for the block's next life");
            assertThrows(Scopes.StaleName.class, () -> {
                Scopes.enter(b, h.id());
                try {
                    Scopes.checkNamed(b, h.id());
                } finally {
                    Scopes.exit(b);
                }
            });
            assertEquals(0, b.scopes, "a refused scope leaves nothing behind");
        }
        assertEquals(0, up.liveBytes());
    }

    @Test
    void flagsSetWithNoScopeInsideAskNothingOfLaterExits() {
        Block b = new Block(null, 0, 64);
        assertFalse(b.flagIfScoped(Block.SCOPE_FREED), "no scope inside: the freer gives the block back itself");
        assertEquals(0, b.scopes);
        assertTrue(b.claimForMove());
        assertEquals(-1, b.stepScope(1), "no scope enters a moving block");
        assertFalse(b.claimForMove(), "one move at a time");
        b.endMove();
        assertEquals(0, b.stepScope(1));
        assertFalse(b.claimForMove(), "a block with a scope inside does not move");
        assertEquals(1, b.flagScopes(Block.SCOPE_CLOSED), "close counts the scope inside");
        assertEquals(-1, b.stepScope(1), "no scope enters a closed block");
        int before = b.stepScope(-1);
        assertEquals(Block.SCOPE_CLOSED | 1, before, "the last exit sees the flag it must act on");
        assertEquals(Block.SCOPE_CLOSED, b.scopes);
    }
}
