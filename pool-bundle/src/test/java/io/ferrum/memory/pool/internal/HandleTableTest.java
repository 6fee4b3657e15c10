package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.IntStream;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.MemoryException;

/**
 * The handle table: ids name their block until unregistered and never again; ids of another table
 * or malformed ids name nothing; slots on later pages; a mapping's two names; the handle space; and
 * slot ownership on the thread-cache paths (batches of spare slots, kept slots, their return,
 * retirement).
 */
class HandleTableTest {
    private final HandleTable table = new HandleTable();
    private final ThreadCache cache = new ThreadCache(1, 1 << 20, 0);

    private static int slotOf(long id) {
        return (int) ((id >>> 20) & ((1 << 24) - 1));
    }

    private static int generationOf(long id) {
        return (int) (id & ((1 << 20) - 1));
    }

    /** What a free into the cache does: claim the name, keep the slot with the block unless its generations are spent. */
    private static void freeIntoCache(Block b, long id) {
        assertEquals(0, b.claim(id));
        b.keptId = HandleTable.reusable(id) ? id : 0;
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
        assertEquals(generationOf(first), table.storedGeneration(slotOf(first)),
                "naming a cached block again writes nothing to the table");
    }

    @Test
    void aSlotLeavingItsBlockCarriesOnAfterTheGenerationsUsedWhileCached() {
        Block b = new Block(null, 0, 64);
        long last = table.register(b, cache);
        for (int k = 0; k < 5; k++) {
            freeIntoCache(b, last);
            last = table.registerCached(b, cache);
        }
        // Freed for good (not cached): the slot goes to the thread's stash and names the next block.
        assertEquals(0, b.claim(last));
        table.recycle(last, cache);
        Block other = new Block(null, 64, 64);
        long next = table.register(other, cache);
        assertEquals(slotOf(last), slotOf(next), "the stash hands out the slot it got last");
        assertEquals(generationOf(last) + 1, generationOf(next), "after every generation the cached block used");
        assertNull(table.lookup(last), "no earlier name of the slot names the new block");
        assertSame(other, table.lookup(next));
    }

    @Test
    void aBlockLeavingItsCacheGivesItsSlotBackToTheSharedList() {
        Block b = new Block(null, 0, 64);
        long id = table.register(b, cache);
        freeIntoCache(b, id);
        long again = table.registerCached(b, cache);
        freeIntoCache(b, again);
        table.releaseKept(b);
        assertEquals(0, b.keptId);

        Block other = new Block(null, 64, 64);
        long next = table.register(other);
        assertEquals(slotOf(id), slotOf(next), "the slot went back to the free list and is reused from there");
        assertEquals(generationOf(again) + 1, generationOf(next), "after the generation its cached block used");
        assertNull(table.lookup(id));
        assertNull(table.lookup(again));
        assertSame(other, table.lookup(next));
    }

    @Test
    void aSlotWhoseGenerationsAreSpentIsRetiredNotKept() {
        Block b = new Block(null, 0, 64);
        long last = spendASlot(table, b, cache);
        int slot = slotOf(last);
        assertTrue(IntStream.range(0, cache.slotCount)
                .noneMatch(k -> cache.slots[ThreadCache.SLOT_BASE + k] == slot), "a spent slot does not go to the stash");
        long fresh = table.registerCached(b, cache);
        assertNotEquals(slot, slotOf(fresh), "a retired slot is never issued again");
        assertSame(b, table.lookup(fresh));
        assertNull(table.lookup(last));
    }

    /**
     * Names {@code b} on one slot through every generation, going through {@code cache} each time
     * (a spent slot is not kept), then frees it into {@code cache}: the slot retires.
     *
     * @return the slot's last id
     */
    private static long spendASlot(HandleTable t, Block b, ThreadCache cache) {
        long last = t.register(b);
        int slot = slotOf(last);
        while (true) {
            freeIntoCache(b, last);
            if (b.keptId == 0) {
                break;
            }
            last = t.registerCached(b, cache);
            assertEquals(slot, slotOf(last));
        }
        assertEquals((1 << 20) - 1, generationOf(last), "retired after its last generation");
        t.recycle(last, cache);
        return last;
    }

    @Test
    void aFullTableSaysHowManyOfItsSlotsAreRetired() {
        HandleTable small = new HandleTable(2);
        assertEquals(0, slotOf(spendASlot(small, new Block(null, 0, 64), cache)));
        Block live = new Block(null, 64, 64);
        long other = small.register(live); // slot 1, the last one
        assertEquals(1, slotOf(other));

        MemoryException e = assertThrows(MemoryException.class, () -> small.register(new Block(null, 128, 64)));
        assertEquals("Handle table of manager " + small.managerId() + " has no slot left for a new handle: 1 of its 2 slots"
                + " are retired (each named 1048575 blocks, so that no stale handle can name a later one), the other 1 name"
                + " live allocations or are spares of thread caches; free some allocations before allocating more", e.getMessage());
        assertSame(live, small.lookup(other), "the failed call changed nothing");

        assertEquals(0, live.claim(other));
        small.recycle(other, null);
        long again = small.register(new Block(null, 128, 64));
        assertEquals(1, slotOf(again), "a freed slot serves again; the retired one never does");
    }

    @Test
    void aTableWhoseSlotsAreAllRetiredSaysItCanIssueNoMore() {
        HandleTable tiny = new HandleTable(1);
        spendASlot(tiny, new Block(null, 0, 64), cache);
        MemoryException e = assertThrows(MemoryException.class, () -> tiny.register(new Block(null, 64, 64)));
        assertEquals("Handle table of manager " + tiny.managerId() + " has no slot left for a new handle: all 1 slots are"
                + " retired (each named 1048575 blocks, so that no stale handle can name a later one); this manager can"
                + " issue no more handles: close it and use a new one", e.getMessage());
    }

    @Test
    void anIdNamesItsBlockUntilUnregisteredAndNeverAgain() {
        Block b = new Block(null, 0, 64);
        long id = table.register(b);
        assertTrue(table.isOwn(id));
        assertTrue(table.space().contains(id));
        assertSame(b, table.lookup(id));
        table.unregister(b, id);
        assertNull(table.lookup(id));
        table.unregister(b, id); // a second free of the same id is a no-op...
        Block x = new Block(null, 64, 64);
        Block y = new Block(null, 128, 64);
        long idX = table.register(x);
        long idY = table.register(y);
        assertNotEquals(slotOf(idX), slotOf(idY), "...and does not put its slot on the free list twice");
        assertEquals(slotOf(id), slotOf(idX), "the freed slot serves again, under a new generation");
        assertNull(table.lookup(id), "the old id does not name the slot's new block");
        assertSame(x, table.lookup(idX));
        assertSame(y, table.lookup(idY));
    }

    @Test
    void idsOfAnotherTableOrMalformedIdsNameNothing() {
        HandleTable mine = new HandleTable(16, new AtomicLong(5));
        HandleTable other = new HandleTable(16, new AtomicLong(6));
        assertEquals(6, mine.managerId());
        assertEquals(7, other.managerId());
        Block b = new Block(null, 0, 64);
        long id = other.register(b);
        assertFalse(mine.isOwn(id));
        assertNull(mine.lookup(id));
        mine.unregister(b, id);
        assertSame(b, other.lookup(id), "a foreign table's unregister leaves the name alone");
        assertFalse(mine.space().contains(id));

        long generationZero = 6L << 44;
        assertFalse(mine.isOwn(generationZero), "generation 0 is never issued");
        assertNull(mine.lookup(generationZero));
        assertNull(mine.lookup((6L << 44) | (5000L << 20) | 1), "a slot on a page never made");
        assertNull(mine.lookup((6L << 44) | (3L << 20) | 1), "a slot never issued");
        assertNull(mine.lookup(0));
    }

    @Test
    void slotsOnLaterPagesAreLookedUpLikeTheFirstPagesOnes() {
        Set<Long> ids = new HashSet<>();
        Block[] blocks = new Block[3 * 4096 + 7];
        long[] issued = new long[blocks.length];
        for (int i = 0; i < blocks.length; i++) {
            blocks[i] = new Block(null, 64L * i, 64);
            issued[i] = table.register(blocks[i]);
            assertTrue(ids.add(issued[i]), "id issued twice: " + issued[i]);
        }
        for (int i = 0; i < blocks.length; i++) {
            assertSame(blocks[i], table.lookup(issued[i]), "block " + i);
        }
        assertTrue(slotOf(issued[blocks.length - 1]) >= 3 * 4096, "the last one is on the fourth page");
    }

    @Test
    void aMappingsTwoNamesAreFreedOneByOneAndTheLastGivesTheMemoryBack() {
        HandleTable peer = new HandleTable();
        Block b = new Block(null, 0, 4096);
        long first = table.register(b, 2);
        long alias = peer.registerAlias(b);
        assertSame(b, table.lookup(first));
        assertSame(b, peer.lookup(alias));
        assertNull(table.lookup(alias), "each name lives in its own table");
        assertEquals(2, b.names);

        assertEquals(1, b.claim(alias), "one name is left: the memory stays");
        assertNull(peer.lookup(alias));
        assertSame(b, table.lookup(first));
        assertEquals(-1, b.claim(alias), "a name is claimed once");
        assertEquals(0, b.claim(first), "the last name: the caller gives the memory back");
        assertNull(table.lookup(first));
        assertFalse(b.isNamed());
    }

    @Test
    void aThreadCacheTakesSpareSlotsInABatchAndGivesThemAllBack() {
        HandleTable fresh = new HandleTable();
        Block b = new Block(null, 0, 64);
        long id = fresh.register(b, cache);
        assertEquals(ThreadCache.SLOTS / 2 - 1, cache.slotCount, "a batch of half the stash, one used");
        Set<Integer> stash = new HashSet<>();
        for (int k = 0; k < cache.slotCount; k++) {
            assertTrue(stash.add(cache.slots[ThreadCache.SLOT_BASE + k]));
        }
        assertFalse(stash.contains(slotOf(id)));
        fresh.giveBackAll(cache);
        assertEquals(0, cache.slotCount);
        Set<Integer> reissued = new HashSet<>();
        for (int k = 0; k < stash.size(); k++) {
            reissued.add(slotOf(fresh.register(new Block(null, 64L * (k + 1), 64))));
        }
        assertEquals(stash, reissued, "the shared list hands out exactly the stash that came back");
    }
}
