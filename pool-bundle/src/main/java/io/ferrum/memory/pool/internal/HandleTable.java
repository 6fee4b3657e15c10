package io.ferrum.memory.pool.internal;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;

import io.ferrum.memory.api.HandleSpace;
import io.ferrum.memory.api.MemoryException;

/**
 * Maps handle ids to live blocks in O(1) without a lock on lookup.
 *
 * <p>An id is {@code [manager: 20 bits][slot: 24 bits][generation: 20 bits]}. The manager bits make
 * ids unique across every manager in the JVM (so the monitor can route any handle to its owner);
 * the generation grows each time a slot is reused, so a freed handle never names a later block. A
 * slot whose generation is exhausted is retired, never reused: stale handles cannot come back to
 * life. Manager numbers come from a JVM-wide counter kept in the system properties, so they stay
 * unique even across updates of the pool bundle (a static field would restart at 1); once all
 * 2^20 - 1 are given out, no manager can be made until the JVM restarts.
 *
 * <p>Slots live in pages of {@value #PAGE} that never move once created (growth copies only the
 * page directory), so a slot can be written without the table's lock. Each slot has exactly one
 * owner at a time: the table's free list (guarded by the table's monitor), a thread cache's stash
 * of spare slots (its owner thread only), the live block it names, or a block in a thread cache,
 * which keeps the slot it had (still pointing at it) for its next handle. A thread with a
 * {@link ThreadCache} takes spare slots in batches and keeps the slots it frees, so the hot
 * allocate/free path takes no lock here. A block that goes through its cache and back is named
 * again on its own slot from the id it kept ({@link Block#keptId}): that path writes nothing here at
 * all. The slot's generation lives in the id of the block that owns the slot and is written back to
 * the table only when the slot leaves the block ({@link #recycle}, {@link #releaseKept}). Two
 * threads' slots may share a cache line of the generations array; a write per call there would
 * move that line between their cores on every allocate and free.
 */
public final class HandleTable {
    private static final int SLOT_BITS = 24;
    private static final int GEN_BITS = 20;
    private static final int MAX_GEN = (1 << GEN_BITS) - 1;
    private static final int MAX_SLOTS = 1 << SLOT_BITS;
    private static final int PAGE_BITS = 12;
    private static final int PAGE = 1 << PAGE_BITS;
    private static final long MANAGER_MASK = (1L << (64 - SLOT_BITS - GEN_BITS)) - 1;
    private static final String COUNTER_KEY = "io.ferrum.memory.pool.managerCounter";
    private static final VarHandle SLOTS = MethodHandles.arrayElementVarHandle(Block[].class);

    /** One page of slots: the block each slot names and the slot's generation. */
    private static final class Page {
        final Block[] blocks = new Block[PAGE];
        /** Written only by the slot's current owner; handed over through the free list's monitor or a volatile handle id. */
        final int[] generations = new int[PAGE];
    }

    private final long managerId;
    private volatile Page[] pages = new Page[] {new Page()};
    private int[] freeSlots = new int[64];
    private int freeCount;
    private int nextSlot;
    /** Slots whose generations are spent (guarded by the monitor). */
    private int retired;
    private final int slotLimit;

    public HandleTable() {
        this(MAX_SLOTS);
    }

    /** @param slotLimit how many slots the table may use (tests: a small table fills quickly), at most 2^24 */
    HandleTable(int slotLimit) {
        this(slotLimit, (AtomicLong) System.getProperties().computeIfAbsent(COUNTER_KEY, k -> new AtomicLong()));
    }

    /**
     * @param slotLimit how many slots the table may use, at most 2^24
     * @param managers  the JVM's count of manager numbers given out (tests: one of their own)
     * @throws MemoryException when every manager number is spent: numbers are never reused, since a
     *                         stale handle of a closed manager would name a block of the new one
     */
    HandleTable(int slotLimit, AtomicLong managers) {
        this.slotLimit = slotLimit;
        long id = managers.incrementAndGet();
        if (id > MANAGER_MASK || id <= 0) {
            managers.decrementAndGet();
            throw Checks.noManagerNumber(MANAGER_MASK);
        }
        this.managerId = id;
    }

    /** @return this table's manager number (never 0), the top bits of every id it issues */
    /** @return the ids this table issues: every id whose manager bits are this table's number */
    public HandleSpace space() {
        long mask = -1L << (SLOT_BITS + GEN_BITS);
        return new HandleSpace(managerId << (SLOT_BITS + GEN_BITS), mask);
    }

    public long managerId() {
        return managerId;
    }

    /** Issues a new id for {@code b} from the shared free list and records it as the block's handle. */
    public long register(Block b) {
        return register(b, 1);
    }

    /** Issues a new id for {@code b}, counted as {@code names} names (a mapping's second comes later). */
    long register(Block b, int names) {
        long id = issue(takeSlot(), b);
        b.nameFirst(id, names);
        return id;
    }

    /**
     * Issues a second id for {@code b} (a mapping's other handle), possibly in another manager's
     * table; the block was counted as named twice when its first id was issued.
     */
    public long registerAlias(Block b) {
        long id = issue(takeSlot(), b);
        b.aliasId = id;
        return id;
    }

    /** Issues a new id for {@code b} from {@code cache}'s own spare slots (refilled in a batch when empty). */
    long register(Block b, ThreadCache cache) {
        if (cache.slotCount == 0) {
            cache.slotCount = takeSlots(cache.slots, ThreadCache.SLOT_BASE, ThreadCache.SLOTS / 2);
        }
        long id = issue(cache.slots[ThreadCache.SLOT_BASE + --cache.slotCount], b);
        b.nameFirst(id);
        return id;
    }

    /**
     * Issues a new id for {@code b}, just taken from {@code cache}: on the slot the block kept while
     * it was cached, which still points at it, with the generation after the kept id's (nothing is
     * written to the table), else as {@link #register(Block, ThreadCache)}.
     */
    long registerCached(Block b, ThreadCache cache) {
        long kept = b.keptId;
        if (kept == 0) {
            return register(b, cache);
        }
        long id = kept + 1;
        b.nameFirst(id);
        return id;
    }

    private synchronized int takeSlot() {
        if (freeCount > 0) {
            return freeSlots[--freeCount];
        }
        return newSlot();
    }

    /** @return how many slots (at least one, at most {@code n}) were written to {@code into} from {@code base} */
    private synchronized int takeSlots(int[] into, int base, int n) {
        int got = 0;
        while (got < n && freeCount > 0) {
            into[base + got++] = freeSlots[--freeCount];
        }
        if (got == 0) {
            into[base + got++] = newSlot();
        }
        while (got < n && nextSlot < slotLimit && (nextSlot & (PAGE - 1)) != 0) {
            into[base + got++] = newSlot();
        }
        return got;
    }

    /** Under the monitor: a never-used slot, adding a page when the last one is full. */
    private int newSlot() {
        if (nextSlot == slotLimit) {
            throw full();
        }
        int slot = nextSlot++;
        int p = slot >>> PAGE_BITS;
        Page[] ps = pages;
        if (p == ps.length) {
            ps = Arrays.copyOf(ps, ps.length * 2);
        }
        if (ps[p] == null) {
            ps[p] = new Page();
            pages = ps;
        }
        return slot;
    }

    /** By the slot's owner, a slot from the free list or a stash: bumps the generation and points the slot at {@code b}. */
    private long issue(int slot, Block b) {
        Page page = pages[slot >>> PAGE_BITS];
        int i = slot & (PAGE - 1);
        int gen = ++page.generations[i];
        long id = (managerId << (SLOT_BITS + GEN_BITS)) | ((long) slot << GEN_BITS) | gen;
        // A thread that frees and allocates again often gets the same slot for the same block: then
        // nothing is stored (a reference store costs a GC card mark; the block's name is what counts).
        if (SLOTS.getAcquire(page.blocks, i) != b) {
            SLOTS.setRelease(page.blocks, i, b);
        }
        return id;
    }

    /** Forgets {@code id}, one of {@code b}'s names in this table; the id is never valid again. */
    public void unregister(Block b, long id) {
        if (id == 0 || !isOwn(id) || b.claim(id) < 0) {
            return;
        }
        recycle(id, null);
    }

    /**
     * @return true if the slot of {@code id}, a name just claimed, may name a block again (a block
     * in a thread cache may keep it); false if its generations are spent
     */
    static boolean reusable(long id) {
        return (int) (id & MAX_GEN) < MAX_GEN;
    }

    /**
     * Takes back the slot of {@code id}, already claimed (cleared from its block) by the caller, so
     * that {@link #lookup} already fails for it: its generation goes back to the table, and the slot
     * into {@code cache}'s stash when there is room, else to the shared free list. A slot whose
     * generations are spent is retired instead.
     */
    void recycle(long id, ThreadCache cache) {
        if (!reusable(id)) {
            retire();
            return;
        }
        int slot = writeBack(id);
        if (cache != null && cache.slotCount < ThreadCache.SLOTS) {
            cache.slots[ThreadCache.SLOT_BASE + cache.slotCount++] = slot;
        } else {
            giveBack(slot);
        }
    }

    /**
     * As {@link #recycle} without a cache, for a name of another manager's block (an alias issued
     * for a peer): the slot also lets go of the block. A slot otherwise keeps pointing at its last
     * block until it is issued again, and a peer's block reaches the peer's manager, its upstream
     * and the classes of the peer's bundle, which would stay in memory after that bundle stopped.
     */
    void recycleForeign(long id) {
        int slot = slotOf(id);
        SLOTS.setRelease(pages[slot >>> PAGE_BITS].blocks, slot & (PAGE - 1), null);
        recycle(id, null);
    }

    /** Returns the slot {@code b} kept while cached to the shared free list (a block leaving a cache for its pool). */
    void releaseKept(Block b) {
        long kept = b.keptId;
        if (kept != 0) {
            b.keptId = 0;
            giveBack(writeBack(kept));
        }
    }

    /** By the slot's owner, as the slot leaves the block that owned it: stores the generation of {@code id}, the block's last name. @return the slot */
    private int writeBack(long id) {
        int slot = slotOf(id);
        pages[slot >>> PAGE_BITS].generations[slot & (PAGE - 1)] = (int) (id & MAX_GEN);
        return slot;
    }

    /** Counts a slot whose generations are spent: it is never issued again. */
    synchronized void retire() {
        retired++;
    }

    /** Under the monitor: the error for a table that has no slot left, saying where the slots are. */
    private MemoryException full() {
        return Checks.handleTableFull(managerId, slotLimit, retired, MAX_GEN);
    }

    /** Returns a stash of spare slots to the shared free list (a cache that is being dropped). */
    synchronized void giveBackAll(ThreadCache cache) {
        for (int k = 0; k < cache.slotCount; k++) {
            pushFree(cache.slots[ThreadCache.SLOT_BASE + k]);
        }
        cache.slotCount = 0;
    }

    private synchronized void giveBack(int slot) {
        pushFree(slot);
    }

    private void pushFree(int slot) {
        if (freeCount == freeSlots.length) {
            freeSlots = Arrays.copyOf(freeSlots, freeSlots.length * 2);
        }
        freeSlots[freeCount++] = slot;
    }

    /** @return the generation the table holds for {@code slot} (tests: the table is not written while a block owns the slot) */
    int storedGeneration(int slot) {
        return pages[slot >>> PAGE_BITS].generations[slot & (PAGE - 1)];
    }

    /** @return the live block named by {@code id}, or null */
    public Block lookup(long id) {
        if (!isOwn(id)) {
            return null;
        }
        int slot = slotOf(id);
        Page[] ps = pages;
        int p = slot >>> PAGE_BITS;
        Page page = p < ps.length ? ps[p] : null;
        if (page == null) {
            return null;
        }
        Block b = (Block) SLOTS.getAcquire(page.blocks, slot & (PAGE - 1));
        return b != null && b.isNamedBy(id) ? b : null;
    }

    /** @return true if {@code id} carries this table's manager number */
    public boolean isOwn(long id) {
        return (id >>> (SLOT_BITS + GEN_BITS)) == managerId && (int) (id & MAX_GEN) != 0;
    }

    private static int slotOf(long id) {
        return (int) ((id >>> GEN_BITS) & (MAX_SLOTS - 1));
    }
}
