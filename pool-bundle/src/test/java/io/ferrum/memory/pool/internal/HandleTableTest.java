package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The handle table's slot ownership on the thread-cache paths: kept slots, their return, retirement. */
class HandleTableTest {
    private final HandleTable table = new HandleTable();
    private final ThreadCache cache = new ThreadCache(1, 1 << 20, 0);

    private static int slotOf(long id) {
        return (int) ((id >>> 20) & ((1 << 24) - 1));
    }

    private static int generationOf(long id) {
        return (int) (id & ((1 << 20) - 1));
    }

    /** What a free into the cache does: claim the name, keep the slot with the block. */
    private void freeIntoCache(Block b, long id) {
        assertTrue(b.claim(id));
        b.keptSlot = table.unregisterClaimed(id);
    }

    @Test
    void aCachedBlockIsNamedAgainOnTheSlotItKept() {
        Block b = new Block(null, 0, 64);
        long first = table.register(b, cache);
        int spare = cache.slotCount;
        freeIntoCache(b, first);
        assertNull(table.lookup(first), "a cached block is named by nothing");

        long second = table.registerCached(b, cache);
        assertEquals(slotOf(first), slotOf(second), "the kept slot");
        assertEquals(generationOf(first) + 1, generationOf(second));
        assertSame(b, table.lookup(second));
        assertNull(table.lookup(first), "the old name stays dead");
        assertEquals(spare, cache.slotCount, "no spare slot taken");
    }

    @Test
    void aBlockLeavingItsCacheGivesItsSlotBackToTheSharedList() {
        Block b = new Block(null, 0, 64);
        long id = table.register(b, cache);
        freeIntoCache(b, id);
        table.releaseKept(b);
        assertEquals(-1, b.keptSlot);

        Block other = new Block(null, 64, 64);
        long next = table.register(other);
        assertEquals(slotOf(id), slotOf(next), "the slot went back to the free list and is reused from there");
        assertNull(table.lookup(id));
        assertSame(other, table.lookup(next));
    }

    @Test
    void aSlotWhoseGenerationsAreSpentIsRetiredNotKept() {
        Block b = new Block(null, 0, 64);
        long id = table.register(b, cache);
        int slot = slotOf(id);
        long last = id;
        while (true) {
            assertTrue(b.claim(last));
            int kept = table.unregisterClaimed(last);
            if (kept < 0) {
                break;
            }
            b.keptSlot = kept;
            last = table.registerCached(b, cache);
            assertEquals(slot, slotOf(last));
        }
        assertEquals((1 << 20) - 1, generationOf(last), "retired after its last generation");
        b.keptSlot = -1;
        long fresh = table.registerCached(b, cache);
        assertNotEquals(slot, slotOf(fresh), "a retired slot is never issued again");
        assertSame(b, table.lookup(fresh));
        assertNull(table.lookup(last));
    }
}
