package io.ferrum.memory.pool.internal;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

import io.ferrum.memory.api.MemoryUsageHint;

/**
 * One block of a chunk: free or live. Blocks of a chunk form a doubly linked list in address order
 * (prevPhys/nextPhys) that covers the chunk exactly; free blocks are also on one of the pool's
 * segregated free lists (prevFree/nextFree). All fields are guarded by the owning pool's lock,
 * except {@link #handleId} and {@link #aliasId}, which are volatile so that handle lookups need no
 * lock, and are cleared only by {@link #claim} (one compare-and-set, so exactly one free of a name
 * wins). {@link #pins} and {@link #mapping} are volatile too: a free that claims a name without the
 * lock reads them after its claim, and pin and map re-read the name after setting them, so at least
 * one side always sees the other (the free then finishes under the lock). {@link #names} counts the
 * names: the claim that takes it to zero, and only that one, gives the memory back, so two handles
 * of one mapping freed at once release it once.
 *
 * <p>A block may sit in a {@link ThreadCache}: not free in its pool, named by nothing; only the
 * cache's owner thread touches its live-block fields then. A block has one name (its handle) or two when it is the memory of a {@link
 * io.ferrum.memory.api.MemoryMapping}; the alias may live in another manager's handle table. The
 * memory is released when the last name is freed.
 *
 * <p>A live block keeps its identity when defragmentation moves it (only chunk and offset change),
 * so the handle that names it stays valid.
 */
public final class Block extends BlockPadding {
    PoolChunk chunk;
    long offset;
    long size;
    boolean free;
    Block prevPhys;
    Block nextPhys;
    Block prevFree;
    Block nextFree;

    // Live-block state.
    volatile long handleId;
    volatile long aliasId;
    /**
     * The manager of another device whose table holds {@link #aliasId} (a mapping across devices),
     * told when this block's manager closes ({@link AliasIssuer#ownerClosed}); null otherwise, and
     * once that alias is gone (so that a block outliving its peer keeps nothing of it).
     */
    volatile AliasIssuer issuer;
    Pool pool;
    long requested;
    long alignment;
    long allocatedAtNanos;
    /** Copies in flight that read or write this block; a pinned block is neither moved nor reused. */
    volatile int pins;
    /** Freed by its owner while pinned: the memory returns to the pool when the last pin goes. */
    boolean freePending;
    /** How many handles name the block (0, 1, or 2 for a mapping); changed only by compare-and-set. */
    volatile int names;
    /** Freed, and its bytes already cleared for {@code zeroing=on-free}: it may go back to the free lists. */
    boolean scrubbed;
    volatile MappingState mapping;
    /**
     * On memory the CPU cannot address: the {@code withMapped} actions that hold host staging copies
     * of the block, from before the first copy is made to the end of the last action (its write-back
     * included); null when none does. Never set on host memory. Two forms:
     * <ul>
     * <li>a {@link Thread}: that thread's action holds the block alone (READ_WRITE or WRITE_ONLY, or a
     *     READ_ONLY one whose nested writer made it so), and every other thread's data path on the
     *     block is refused ({@link Mappings#staged}). Set only by that thread, from null or from
     *     {@link Readers} it alone counts, under the pool's lock while no pin is on the block ({@link
     *     #holdForAction}); cleared by it without the lock.</li>
     * <li>{@link Readers}: READ_ONLY actions of one or more threads share it, none written back; other
     *     threads' {@code read}s and READ_ONLY actions go on, every call that writes the device or
     *     needs the block alone is refused. Taken and counted in under the pool's lock; counted out
     *     without it ({@link #stepReaders}), the last one out clearing it by compare-and-set. Readers
     *     all gone ({@link Readers#GONE}) hold nothing, cleared or not (an overflow may cut the
     *     clearing short): read the word through {@link #holder}; a join replaces them, a hold takes
     *     their place.</li>
     * </ul>
     * Read without the lock once, as one word: a writer that reads it sees either form or none.
     */
    volatile Object heldBy;

    /**
     * The READ_ONLY {@code withMapped} actions sharing a block ({@link #heldBy}): how many there are,
     * changed only through {@link #stepReaders}. 0 while a join counts the first in, before it
     * publishes them; {@link #GONE} once the last has left, never changed again: the last reader then
     * clears {@link #heldBy}, unless a join replaced these readers first.
     */
    static final class Readers {
        /** The count of readers that have all left. */
        static final int GONE = -1;
        volatile int count;
    }

    /**
     * @return {@link #heldBy} read once, or null for readers all gone: the actions that hold the
     *         block now, in either form
     */
    Object holder() {
        return held(heldBy);
    }

    /** @return {@code hold}, a value of {@link #heldBy}; null for readers all gone */
    private static Object held(Object hold) {
        return hold instanceof Readers r && r.count == Readers.GONE ? null : hold;
    }

    /**
     * On memory the CPU cannot address: the scoped calls that may write the device's bytes of the
     * block under way ({@code write}, a synchronous copy into it), counted from before they read
     * {@link #heldBy} to after their bytes landed, through {@link #stepWriters}. A READ_ONLY action
     * joining {@link Readers} waits for none to be left: a writer that did not see the readers' hold
     * would land under their copies, and a nested writer's write-back later overwrite it. Never
     * changed on host memory.
     */
    volatile int writers;
    AccessTracker access;
    /**
     * While the block sits in a thread cache: its last handle id, whose slot it keeps (the slot still
     * points at it) and whose generation the next one follows (0: none, take a spare slot). Written
     * and read by the cache's owner only.
     */
    long keptId;
    MemoryUsageHint hint;
    Throwable allocationSite;
    /**
     * The cache of the thread that allocated the block from a cache or for one ({@code null}: none),
     * to which a free on another thread returns it ({@link ThreadCache#offer}). Written by the
     * allocating thread, and only when it changes.
     */
    ThreadCache cachedBy;
    /**
     * While the block waits in a cache's inbound stack: the block below it, and the bytes and count
     * of it and all below it. Written by the thread that pushes it, before the push publishes it.
     */
    Block nextReturned;
    long returnedBytes;
    int returnedCount;
    /**
     * Scoped work on the block's bytes by a calling thread ({@code withMapped}, {@code read}, {@code
     * write}): a count in the low bits and three flags, changed only atomically, so that entering and
     * leaving a scope take no lock ({@link Scopes} states the protocol). A scope enters only while no
     * flag is set.
     */
    volatile int scopes;

    /** Bits of {@link #scopes} that count the scopes inside the block. */
    static final int SCOPE_COUNT = 0x0FFF_FFFF;
    /** Flag: defragmentation is moving the block (set under the pool lock, only while the count is zero). */
    static final int SCOPE_MOVING = 1 << 28;
    /** Flag: the pool closed while scopes ran; the last one to leave ends that work for the close. */
    static final int SCOPE_CLOSED = 1 << 29;
    /** Flag: the block's last name was freed while scopes ran; the last one to leave gives it back. */
    static final int SCOPE_FREED = 1 << 30;
    static final int SCOPE_FLAGS = SCOPE_MOVING | SCOPE_CLOSED | SCOPE_FREED;

    Block(PoolChunk chunk, long offset, long size) {
        this.chunk = chunk;
        this.offset = offset;
        this.size = size;
    }

    /** @return true if {@code id} is one of the block's names */
    boolean isNamedBy(long id) {
        return id != 0 && (handleId == id || aliasId == id);
    }

    /**
     * Clears the name {@code id} atomically.
     *
     * @return the names left after this call cleared {@code id} (0: it was the last, the caller
     * gives the memory back), or -1 when {@code id} is not a name of this block (another call
     * cleared it first)
     */
    int claim(long id) {
        if (id == 0 || !(HANDLE.compareAndSet(this, id, 0L) || ALIAS.compareAndSet(this, id, 0L))) {
            return -1;
        }
        if (names == 1) {
            // The only name, now cleared: the common case takes no second atomic. A block's count
            // changes only by claims of its names and by its allocation, never by a third party.
            return 0;
        }
        return (int) NAMES.getAndAdd(this, -1) - 1;
    }

    /** Gives a block that no handle names its first name, {@code id}. */
    void nameFirst(long id) {
        NAMES.setRelease(this, 1);
        handleId = id;
    }

    /** Gives a block that no handle names its first name, {@code id}, counted as {@code count} names (the others to come). */
    void nameFirst(long id, int count) {
        NAMES.setRelease(this, count);
        handleId = id;
    }

    /** Takes back a name counted at {@link #nameFirst(long, int)} that was never issued. @return the names left */
    int dropUnissuedName() {
        return (int) NAMES.getAndAdd(this, -1) - 1;
    }

    /**
     * Enters ({@code delta} 1) or leaves ({@code delta} -1) a scope. One method does both, so that
     * leaving, called from the frame that entered, needs no more stack than entering did ({@link
     * Scopes}, "Stack overflows").
     *
     * @return the word before the change; or -1, changing nothing, when entering finds a flag set or
     * the count full (one more would carry into the flags: a free would then see no scope inside)
     */
    int stepScope(int delta) {
        int s = scopes;
        // With no flag set the word is the count: a full one is refused like a flag. Leaving always goes.
        while (delta < 0 || ((s & SCOPE_FLAGS) == 0 && s != SCOPE_COUNT)) {
            int seen = (int) SCOPES.compareAndExchange(this, s, s + delta);
            if (seen == s) {
                return s;
            }
            s = seen;
        }
        return -1;
    }

    /**
     * Sets {@code flag} on the word, whatever the count.
     *
     * @return the count of scopes at that instant
     */
    int flagScopes(int flag) {
        int s = scopes;
        while (true) {
            int seen = (int) SCOPES.compareAndExchange(this, s, s | flag);
            if (seen == s) {
                return s & SCOPE_COUNT;
            }
            s = seen;
        }
    }

    /** Sets {@code flag} only while scopes run. @return true if set (a scope is inside); false if none is */
    boolean flagIfScoped(int flag) {
        int s = scopes;
        while ((s & SCOPE_COUNT) != 0) {
            int seen = (int) SCOPES.compareAndExchange(this, s, s | flag);
            if (seen == s) {
                return true;
            }
            s = seen;
        }
        return false;
    }

    /** Clears {@code flag}, leaving the count and the other flags. */
    void clearScopeFlag(int flag) {
        int s = scopes;
        while (true) {
            int seen = (int) SCOPES.compareAndExchange(this, s, s & ~flag);
            if (seen == s) {
                return;
            }
            s = seen;
        }
    }

    /** Under the pool lock: marks the block as moving. @return false, changing nothing, while a scope runs or a flag is set */
    boolean claimForMove() {
        return SCOPES.compareAndSet(this, 0, SCOPE_MOVING);
    }

    /** Under the pool lock: the move claimed by {@link #claimForMove} is over. */
    void endMove() {
        clearScopeFlag(SCOPE_MOVING);
    }

    /**
     * Under the pool lock: makes the calling thread's {@code withMapped} action the holder of the
     * block's bytes ({@link #heldBy}); the caller clears it when the action's write-back is over.
     *
     * @return false, changing nothing, when other actions hold them
     */
    boolean holdForAction(Thread caller) {
        while (true) {
            Object hold = heldBy;
            if (held(hold) != null) {
                return false;
            }
            // Null, or readers all gone, whose last one's clearing compare-and-set may beat this one.
            if (HELD_BY.compareAndSet(this, hold, caller)) {
                return true;
            }
        }
    }

    /**
     * Counts a READ_ONLY action into ({@code delta} 1, under the pool's lock) or out of ({@code delta}
     * -1, without it, in the {@code finally} of the frame that joined) the readers {@code r} that
     * hold the block; the one that counts them down to zero clears {@link #heldBy}, if it still holds
     * {@code r}. One method does both and takes no lock, so that counting out needs no more stack
     * than counting in did (as {@link #stepScope}): an overflow cannot leave a share counted, nor the
     * pool's lock held, which the count's lock once could when the leave waited for it.
     *
     * @return false, changing nothing, when {@code r} is {@link Readers#GONE} (its last reader left):
     *         a join then replaces it
     */
    boolean stepReaders(Readers r, int delta) {
        int c = r.count;
        while (c != Readers.GONE) {
            int next = c + delta == 0 ? Readers.GONE : c + delta;
            int seen = (int) READERS.compareAndExchange(r, c, next);
            if (seen == c) {
                if (next == Readers.GONE) {
                    // Fails, rightly, when a join replaced r meanwhile or a hold took its place. Only
                    // tidies: r holds nothing now ({@link #holder}), so an overflow here loses nothing.
                    HELD_BY.compareAndExchange(this, r, null);
                }
                return true;
            }
            c = seen;
        }
        return false;
    }

    /**
     * Counts a device writer in ({@code delta} 1, before it reads {@link #heldBy}) or out ({@code
     * delta} -1, in the {@code finally} of the same frame). One method does both, so that counting
     * out needs no more stack than counting in did (as {@link #stepScope}).
     */
    void stepWriters(int delta) {
        WRITERS.getAndAdd(this, delta);
    }

    private static final VarHandle HANDLE;
    private static final VarHandle ALIAS;
    private static final VarHandle NAMES;
    private static final VarHandle SCOPES;
    private static final VarHandle HELD_BY;
    private static final VarHandle WRITERS;
    private static final VarHandle READERS;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            HANDLE = l.findVarHandle(Block.class, "handleId", long.class);
            ALIAS = l.findVarHandle(Block.class, "aliasId", long.class);
            NAMES = l.findVarHandle(Block.class, "names", int.class);
            SCOPES = l.findVarHandle(Block.class, "scopes", int.class);
            HELD_BY = l.findVarHandle(Block.class, "heldBy", Object.class);
            WRITERS = l.findVarHandle(Block.class, "writers", int.class);
            READERS = l.findVarHandle(Readers.class, "count", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
        // Links stepReaders' two call sites now: the interpreter links a call site on its first run,
        // through calls far deeper than the access, and a first leave low on stack would overflow there.
        Readers linked = new Readers();
        Block unnamed = new Block(null, 0, 0);
        unnamed.stepReaders(linked, 1);
        unnamed.stepReaders(linked, -1);
    }

    /** @return true while any handle names the block */
    boolean isNamed() {
        return handleId != 0 || aliasId != 0;
    }

    /**
     * Under the pool lock: the block is not free in its pool, yet no handle names it and no work
     * holds it (no pin, view or scope, no free pending). With thread caches on, that is a block in a
     * thread cache, or one whose free is under way: the figures report its bytes as free.
     */
    boolean isIdle() {
        return !free && !isNamed() && isMovable();
    }

    /** @return true while defragmentation may move the block */
    boolean isMovable() {
        return !free && pins == 0 && mapping == null && !freePending && scopes == 0;
    }

    /** @return the block's chunk (read under the pool lock or while pinned) */
    public PoolChunk chunk() {
        return chunk;
    }

    /** @return the block's offset in its chunk (read under the pool lock or while pinned) */
    public long offset() {
        return offset;
    }

    /** @return the bytes the caller asked for */
    public long requested() {
        return requested;
    }

    /** @return the pool the block belongs to */
    public Pool pool() {
        return pool;
    }
}
