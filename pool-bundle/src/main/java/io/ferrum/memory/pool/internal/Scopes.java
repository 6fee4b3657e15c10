package io.ferrum.memory.pool.internal;

import java.util.List;

import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.pool.DeviceChunk;

/**
 * Lock-free pins for work that the calling thread does on a block's bytes and ends before it
 * returns ({@code withMapped}, {@code read}, {@code write}, a synchronous {@code copy}): a scope. Copies on streams, fills and
 * scrubs pin under the pool lock instead ({@link Reclaimer#pin}); both kinds keep a block from being
 * moved, reused or released.
 *
 * <p><b>The word.</b> {@link Block#scopes} holds the count of scopes inside the block and three
 * flags; it changes only by atomic operations. A scope enters by raising the count while no flag is
 * set (one compare-and-set) and leaves by lowering it (one atomic add). A full count ({@link
 * Block#SCOPE_COUNT}) refuses the next scope: one more would carry into the flags, and a free would
 * then find no scope inside. The flags are set under the pool lock:
 * <ul>
 * <li>{@code MOVING}, by defragmentation, only from a word of zero (no scope inside), and cleared
 *     before it lets the lock go: a scope that finds it waits for the lock, then tries again.</li>
 * <li>{@code FREED}, by the free that took the block's last name while scopes were inside: the scope
 *     whose exit takes the count to zero gives the block back ({@link Reclaimer#lastNameGone}).</li>
 * <li>{@code CLOSED}, by the close, on every allocated block; a block with scopes inside counts as
 *     one piece of its pool's in-flight work, which the exit that takes the count to zero ends.</li>
 * </ul>
 * Because a flag and the count live in one word, an exit and the setting of a flag cannot miss each
 * other: either the flag is set while the count is still positive (and that exit sees it), or the
 * setter sees a count of zero and acts itself.
 *
 * <p><b>Names.</b> A scope enters first and reads the block's name after; a free claims the name
 * first and reads the word after ({@link Reclaimer#free}). So a scope that saw its handle live is
 * seen by the free, which then defers the block's return; a scope that entered a block named by
 * another handle (it was freed and reused meanwhile) leaves at once and touches no byte: it throws
 * {@link StaleName}, which costs nothing, and the manager names the handle once the scope left.
 *
 * <p><b>Stack overflows.</b> A {@code StackOverflowError} may land on any call. A scope's count goes
 * up in {@link Block#stepScope} called by {@link #enter}; the caller's {@code try} follows at once
 * (the name is checked inside it, by {@link #checkNamed}), and its {@code finally} calls {@link
 * #exit}, which takes the count down through the same {@link Block#stepScope}, from the same frame,
 * in a frame no larger than the enter's: so if the count went up, the stack had room to take it
 * down, and an overflow in between (in the copy, in the action) still leaves no scope behind.
 * Before, the exit's atomic add took a deeper chain of calls than the enter's compare-and-set, and
 * the name was checked by a call between the count going up and the {@code try}; a probe that
 * overflows at every point of the calls ({@code ScopeOverflowTest}) left a scope inside every
 * block. Compiled code needs more: an exception path the JIT never saw taken deoptimizes into
 * larger interpreter frames, and the exit overflows in turn. On memory the CPU cannot address every
 * call first makes sure of {@link StackHeadroom} for its exits, before the scope enters. What is left
 * is docs/RELIABILITY.md's: that case on host memory (a few runs in hundreds), and an overflow on
 * {@link #lastExit} (a flagged block's last exit) beyond the headroom.
 *
 * <p><b>Frees are refused while a scope runs</b> ({@link #awaitNone}): a free of a block with a scope
 * inside waits a few microseconds for the count to reach zero (a scope that entered a reused block
 * by mistake leaves that fast) and is refused if it does not, changing nothing.
 */
final class Scopes {
    /** Spins a free waits, at most, for scopes to leave before it is refused (a few microseconds). */
    private static final int FREE_SPINS = 1 << 10;

    private Scopes() {
    }

    /**
     * Enters a scope on block {@code b}, to be named {@code id}; the caller's next statement is a
     * {@code try} whose {@code finally} leaves by {@link #exit}, and whose first statement is {@link
     * #checkNamed}. Nothing that needs stack runs between the count going up and that {@code try}.
     *
     * @throws io.ferrum.memory.api.InvalidHandleException     if a flag says the block was freed and
     *         {@code id} no longer names it (checked under the lock; a name gone without a flag is
     *         {@link #checkNamed}'s to find, inside the caller's {@code try})
     * @throws io.ferrum.memory.api.DeviceUnavailableException if its pool is closed
     * @throws io.ferrum.memory.api.InvalidMemoryRequestException if {@link Block#SCOPE_COUNT} scopes are inside already
     */
    static void enter(Block b, long id) {
        if (b.stepScope(1) < 0) {
            enterFlagged(b, id);
        }
    }

    /** {@link #enter} of a block with a flag set: waits out a move under the lock, or refuses. */
    private static void enterFlagged(Block b, long id) {
        while (b.stepScope(1) < 0) {
            // A flag is set: the block is moving, freed or closed. The lock orders this after it.
            Pool pool = b.pool;
            pool.acquire();
            try {
                pool.reclaimer.checkLive(pool, b, id);
            } finally {
                pool.lock.unlock();
            }
            if (b.scopes == Block.SCOPE_COUNT) {
                // No flag, a full count: one more would carry into the flags.
                throw pool.reclaimer.checks().tooManyScopes(new MemoryHandle(id));
            }
        }
    }

    /**
     * First statement inside a scope: the block's name is read after the count went up (see
     * "Names").
     *
     * @throws StaleName if {@code id} no longer names {@code b} (freed and reused meanwhile): a
     *         shared exception that costs nothing to throw, so that the scope, left by the caller's
     *         {@code finally}, stays inside the block no longer than the check (a free of the block's
     *         new owner waits only microseconds for it); the manager's entry point turns it into the
     *         {@code InvalidHandleException} naming the handle, after the scope left
     */
    static void checkNamed(Block b, long id) {
        if (!b.isNamedBy(id)) {
            throw StaleName.INSTANCE;
        }
    }

    /**
     * A name that no longer names its block, seen inside a scope ({@link #checkNamed}). One shared
     * instance with neither stack trace nor suppressed exceptions: building an exception's stack
     * trace inside the scope took microseconds with deep stacks, long enough for the free of the
     * block's new owner to be refused as "in use". Never reaches a caller of the manager.
     */
    static final class StaleName extends RuntimeException {
        private static final long serialVersionUID = 1L;
        static final StaleName INSTANCE = new StaleName();

        private StaleName() {
            super("a stale name, seen inside a scope", null, false, false);
        }
    }

    /** Leaves a scope entered by {@link #enter}; the last to leave a flagged block does what the flag asks. */
    static void exit(Block b) {
        int before = b.stepScope(-1);
        if ((before & Block.SCOPE_FLAGS) != 0 && (before & Block.SCOPE_COUNT) == 1) {
            lastExit(b, before);
        }
    }

    private static void lastExit(Block b, int before) {
        Pool pool = b.pool;
        Reclaimer owner = pool.reclaimer;
        boolean freed = (before & Block.SCOPE_FREED) != 0;
        List<DeviceChunk> release = null;
        pool.acquire();
        try {
            if (freed) {
                b.clearScopeFlag(Block.SCOPE_FREED);
            }
            if ((before & Block.SCOPE_CLOSED) != 0) {
                release = Lifecycle.leave(pool);
            }
        } finally {
            pool.lock.unlock();
        }
        if (freed) {
            owner.lastNameGone(b, null);
        }
        owner.lifecycle().releaseDeferred(release);
    }

    /**
     * Before a free claims a name of {@code b}: waits briefly for the scopes inside to leave.
     *
     * @return true if none is inside (now); false if one still is after the wait
     */
    static boolean awaitNone(Block b) {
        return awaitAtMost(b, 0);
    }

    /**
     * Inside the calling thread's one scope on {@code b} (a {@code withMapped} action about to make a
     * staging copy): waits as briefly as {@link #awaitNone} for every other scope to leave.
     *
     * @return true if only the caller's is inside (now); false if another still is after the wait
     */
    static boolean awaitAlone(Block b) {
        return awaitAtMost(b, 1);
    }

    /**
     * A READ_ONLY {@code withMapped} action that has just joined the readers' hold of {@code b}
     * (memory the CPU cannot address): waits as briefly as {@link #awaitNone} for every device writer
     * under way ({@link Block#writers}) to be done. Readers' scopes are not waited for: a {@code read}
     * changes nothing the action's copy could miss.
     *
     * @return true if none is under way (now); false if one still is after the wait
     */
    static boolean awaitNoWriter(Block b) {
        for (int i = 0; i < FREE_SPINS; i++) {
            if (b.writers == 0) {
                return true;
            }
            Thread.onSpinWait();
        }
        return b.writers == 0;
    }

    private static boolean awaitAtMost(Block b, int inside) {
        for (int i = 0; i < FREE_SPINS; i++) {
            if ((b.scopes & Block.SCOPE_COUNT) <= inside) {
                return true;
            }
            Thread.onSpinWait();
        }
        return (b.scopes & Block.SCOPE_COUNT) <= inside;
    }

    /**
     * Under the pool lock, from {@link Reclaimer#lastNameGone}: if scopes are inside {@code b},
     * leaves its return to the last of them.
     *
     * @return true if deferred
     */
    static boolean deferFree(Block b) {
        return b.flagIfScoped(Block.SCOPE_FREED);
    }

    /**
     * Under the pool lock, at close: flags every allocated block of {@code pool} closed.
     *
     * @return the blocks with scopes inside, each one piece of in-flight work until its last scope leaves
     */
    static int closeAll(Pool pool) {
        int inside = 0;
        for (Block b : pool.allocatedBlocks()) {
            if (b.flagScopes(Block.SCOPE_CLOSED) > 0) {
                inside++;
            }
        }
        return inside;
    }
}
