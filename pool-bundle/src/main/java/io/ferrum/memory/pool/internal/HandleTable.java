package io.ferrum.memory.pool.internal;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicLong;

import io.ferrum.memory.api.MemoryException;

/**
 * Maps handle ids to live blocks in O(1) without a lock on lookup.
 *
 * <p>An id is {@code [manager: 20 bits][slot: 24 bits][generation: 20 bits]}. The manager bits make
 * ids unique across every manager in the JVM (so the monitor can route any handle to its owner);
 * the generation grows each time a slot is reused, so a freed handle never names a later block. A
 * slot whose generation is exhausted is retired, never reused: stale handles cannot come back to
 * life. Manager numbers come from a JVM-wide counter kept in the system properties, so they stay
 * unique even across updates of the pool bundle (a static field would restart at 1).
 */
public final class HandleTable {
    private static final int SLOT_BITS = 24;
    private static final int GEN_BITS = 20;
    private static final int MAX_GEN = (1 << GEN_BITS) - 1;
    private static final int MAX_SLOTS = 1 << SLOT_BITS;
    private static final long MANAGER_MASK = (1L << (64 - SLOT_BITS - GEN_BITS)) - 1;
    private static final String COUNTER_KEY = "io.ferrum.memory.pool.managerCounter";
    private static final VarHandle SLOTS = MethodHandles.arrayElementVarHandle(Block[].class);

    private final long managerId;
    private volatile Block[] blocks = new Block[256];
    private int[] generations = new int[256];
    private int[] freeSlots = new int[64];
    private int freeCount;
    private int nextSlot;

    public HandleTable() {
        AtomicLong counter = (AtomicLong) System.getProperties().computeIfAbsent(COUNTER_KEY, k -> new AtomicLong());
        long id = counter.incrementAndGet() & MANAGER_MASK;
        if (id == 0) {
            id = counter.incrementAndGet() & MANAGER_MASK;
        }
        this.managerId = id;
    }

    /** @return this table's manager number (never 0), the top bits of every id it issues */
    public long managerId() {
        return managerId;
    }

    /** Issues a new id for {@code b} and records it as the block's handle. */
    public synchronized long register(Block b) {
        long id = issue(b);
        b.handleId = id;
        return id;
    }

    /** Issues a second id for {@code b} (a mapping's other handle), possibly in another manager's table. */
    public synchronized long registerAlias(Block b) {
        long id = issue(b);
        b.aliasId = id;
        return id;
    }

    private long issue(Block b) {
        int slot;
        if (freeCount > 0) {
            slot = freeSlots[--freeCount];
        } else {
            if (nextSlot == MAX_SLOTS) {
                throw new MemoryException("Handle table of manager " + managerId + " is full: " + MAX_SLOTS
                        + " live allocations; free some before allocating more");
            }
            slot = nextSlot++;
            if (slot == blocks.length) {
                int n = Math.min(blocks.length * 2, MAX_SLOTS);
                generations = Arrays.copyOf(generations, n);
                blocks = Arrays.copyOf(blocks, n);
            }
        }
        int gen = ++generations[slot];
        long id = (managerId << (SLOT_BITS + GEN_BITS)) | ((long) slot << GEN_BITS) | gen;
        SLOTS.setRelease(blocks, slot, b);
        return id;
    }

    /** Forgets {@code id}, one of {@code b}'s names in this table; the id is never valid again. */
    public synchronized void unregister(Block b, long id) {
        if (id == 0 || !isOwn(id)) {
            return;
        }
        int slot = slotOf(id);
        SLOTS.setRelease(blocks, slot, (Block) null);
        if (b.handleId == id) {
            b.handleId = 0;
        } else if (b.aliasId == id) {
            b.aliasId = 0;
        }
        if (generations[slot] < MAX_GEN) {
            if (freeCount == freeSlots.length) {
                freeSlots = Arrays.copyOf(freeSlots, freeSlots.length * 2);
            }
            freeSlots[freeCount++] = slot;
        }
    }

    /** @return the live block named by {@code id}, or null */
    public Block lookup(long id) {
        if (!isOwn(id)) {
            return null;
        }
        int slot = slotOf(id);
        Block[] arr = blocks;
        if (slot >= arr.length) {
            return null;
        }
        Block b = (Block) SLOTS.getAcquire(arr, slot);
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
