package io.ferrum.memory.pool.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.function.Function;
import java.util.function.LongSupplier;

import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.pool.DeviceUpstream;

/**
 * The calling thread's work on the bytes of one block: {@code write} and {@code read} from and to any
 * segment, and {@code withMapped}, a view that lives for one action. Each runs inside a scope
 * ({@link Scopes}): a lock-free pin, so a block is neither moved, reused nor released under it, and
 * no pool lock is taken on the way.
 *
 * <p><b>Host memory.</b> When the CPU addresses the block's chunk ({@link PoolChunk#host}), bytes move
 * by {@link MemorySegment#copy} straight between the caller's segment and the chunk, and a view is
 * the block's slice of the chunk, bound to a confined arena that closes when the action ends:
 * usable by the calling thread only, dead afterwards. Otherwise copies go through the upstream, and
 * a view is a host staging copy of the block, written back after an action that may write.
 *
 * <p><b>Nested calls on staged memory.</b> While an action of the calling thread holds a staging copy
 * of a block, that copy is the block for the thread's calls nested in it ({@link #STAGED}): a nested
 * view is the same copy, a read reads it, a write goes to it and to the device. So the action sees
 * their bytes, and its write-back keeps them: it also runs when only a nested view wrote, and then
 * whatever ends the outermost action (a nested view that returned keeps its bytes when the outer
 * action throws). The outermost such action holds the block ({@link Block#heldBy}) until its
 * write-back ends, since a copy would miss another call's bytes and the write-back overwrite them:
 * <ul>
 * <li>a READ_WRITE or WRITE_ONLY action holds it alone: every other thread's call here is refused
 *     meanwhile, as under a staged mapping, and so is every copy of the block ({@link Transfers});</li>
 * <li>READ_ONLY actions of several threads share it ({@link Block.Readers}), each on a copy of its
 *     own, none written back: other threads' {@code read}s go on (the device holds the readers'
 *     bytes), while writers ({@code write}, a writing action, a copy into the block, counted in
 *     {@link Block#writers}) and every copy or async call with the block are refused. A writer nested
 *     in a READ_ONLY action makes the hold the thread's own when it is the only reader ({@link
 *     #alone}), and is refused while another thread's reader shares the block.</li>
 * </ul>
 *
 * <p><b>Mapped memory.</b> On memory the CPU cannot address, a block mapped through a host staging
 * copy ({@link Mappings#staged}) is refused by every call here, inside its scope and before a byte
 * moves ({@link Mappings.Staged}): the mapping's views hold the block's bytes until it is unmapped.
 * The check reads {@code b.mapping} only past the host branch: host memory pays nothing for it.
 *
 * <p>Bandwidth figures count copies of {@value #TIMED_BYTES} bytes or more only: a clock read costs
 * as much as a small copy (PERFORMANCE item 15); and only of blocks with statistics on (enableStats
 * keeps "access statistics and bandwidth figures"). Access statistics, when on, record every call that
 * reached the bytes (a view once it exists: not one whose staging copy the device failed).
 */
final class DataPath {
    /** Smallest copy whose duration goes into the bandwidth figure. */
    static final long TIMED_BYTES = 64 * 1024;

    /**
     * The staging copies held open by the calling thread's actions, innermost first (shared by every
     * manager of the bundle: an alias names a peer's block). Empty on host memory.
     */
    private static final ThreadLocal<Staging> STAGED = new ThreadLocal<>();

    static {
        // Links the headroom's calls now, high on the stack: a first run resolves them through
        // calls far deeper than the headroom itself (as Block's static initializer links its own).
        StackHeadroom.require();
    }

    /** A staging copy of {@code block} made by an action of this thread, within those of {@code outer}. */
    private static final class Staging {
        /**
         * The block, or null once the action ended: its {@code finally} clears it before any call, so
         * an entry an overflow left in {@link #STAGED} (its push done, its pop not) matches no block
         * and is never the block for the thread's later calls (its copy's arena is closed, and the
         * block may be another owner's by then). {@link #unstage} drops such entries.
         */
        Block block;
        final MemorySegment copy;
        final Staging outer;
        /** A nested view that may write returned normally: the copy must be written back. */
        boolean dirty;
        /**
         * The outermost action is READ_ONLY and shares the block with other readers ({@link
         * Block.Readers}); false once a nested writer made the hold the thread's own ({@link #alone}).
         */
        boolean shared;

        Staging(Block block, MemorySegment copy, Staging outer, boolean shared) {
            this.block = block;
            this.copy = copy;
            this.outer = outer;
            this.shared = shared;
        }
    }

    /** @return the calling thread's open staging copy of {@code b}, or null */
    private static Staging staged(Block b) {
        for (Staging s = STAGED.get(); s != null; s = s.outer) {
            if (s.block == b) {
                return s;
            }
        }
        return null;
    }

    /**
     * @return true if an action of the calling thread holds a staging copy of {@code b}: for that
     *         thread the copy is the block ({@code read} reads it, {@code write} writes it too), which
     *         a device-to-device copy would not see (a peer copy answers false then; see {@link
     *         PoolEngine#copyToPeer})
     */
    static boolean stagedByCaller(Block b) {
        return STAGED.get() != null && staged(b) != null;
    }

    private final Checks checks;
    private final Figures figures;
    private final LongSupplier clock;
    /** Times of access records: the coarse clock where allocation times come from it (item 15). */
    private final LongSupplier accessClock;

    DataPath(Checks checks, Figures figures, LongSupplier clock, LongSupplier accessClock) {
        this.checks = checks;
        this.figures = figures;
        this.clock = clock;
        this.accessClock = accessClock;
    }

    /**
     * On memory the CPU cannot address, before the call takes anything (its scope first): returns
     * only if the stack has room for the exits of whatever it takes ({@link StackHeadroom}). The
     * chunk is read before the scope, so it may be one the block is being moved from; where an
     * upstream answers {@code hostSegment} differently per chunk, such a call is checked needlessly
     * or goes unchecked, nothing worse. On host memory: one read of the chunk's field and a branch.
     */
    private static void stagedHeadroom(Block b) {
        if (b.chunk.host == null) {
            StackHeadroom.require();
        }
    }

    /** Writes {@code src} into live block {@code b} named {@code h} at {@code offset}. */
    void write(Block b, MemoryHandle h, long offset, MemorySegment src) {
        long n = checks.segment(src, "source", false);
        stagedHeadroom(b);
        Scopes.enter(b, h.id());
        try {
            Scopes.checkNamed(b, h.id());
            checks.blockRange(h, b, offset, n, "write");
            if (n == 0) {
                return;
            }
            long t0 = n >= TIMED_BYTES && b.access != null ? clock.getAsLong() : 0; // statistics off: no bandwidth
            MemorySegment host = b.chunk.host;
            if (host != null) {
                MemorySegment.copy(src, 0, host, b.offset + offset, n);
            } else {
                writeStaged(b, offset, src, n);
            }
            done(b, true, offset, n, t0);
        } finally {
            Scopes.exit(b);
        }
    }

    /** Reads live block {@code b} named {@code h} from {@code offset} into {@code dst}. */
    void read(Block b, MemoryHandle h, long offset, MemorySegment dst) {
        long n = checks.segment(dst, "destination", false);
        stagedHeadroom(b);
        Scopes.enter(b, h.id());
        try {
            Scopes.checkNamed(b, h.id());
            checks.blockRange(h, b, offset, n, "read");
            if (n == 0) {
                return;
            }
            long t0 = n >= TIMED_BYTES && b.access != null ? clock.getAsLong() : 0; // statistics off: no bandwidth
            MemorySegment host = b.chunk.host;
            if (host != null) {
                MemorySegment.copy(host, b.offset + offset, dst, 0, n);
            } else {
                if (b.mapping != null) {
                    throw Mappings.Staged.SOURCE; // the views' bytes are newer than the device's
                }
                if (b.heldBy instanceof Thread holder && holder != Thread.currentThread()) {
                    throw Mappings.Staged.HELD_SOURCE; // another thread's action holds newer bytes
                }
                // Readers sharing the block (Block.Readers) hold the device's bytes: a read goes on.
                Staging open = staged(b);
                if (open != null) {
                    MemorySegment.copy(open.copy, offset, dst, 0, n);
                } else {
                    upstream(b).copyToHost(b.chunk.device, b.offset + offset, dst, n);
                }
            }
            done(b, false, offset, n, t0);
        } finally {
            Scopes.exit(b);
        }
    }

    /**
     * {@link #write} past the host branch: memory the CPU cannot address. The write is counted as a
     * device writer ({@link Block#writers}) before it reads the hold, so that a READ_ONLY action
     * joining the readers' hold meanwhile waits for it (that action publishes the hold, then reads the
     * count: one of the two sees the other). Another thread's hold refuses it; a READ_ONLY action of
     * this thread sharing the block makes the hold its own first ({@link #alone}), or it is refused.
     */
    private static void writeStaged(Block b, long offset, MemorySegment src, long n) {
        if (b.mapping != null) {
            throw Mappings.Staged.SOURCE; // the write-back would overwrite these bytes
        }
        b.stepWriters(1);
        try {
            Object hold = b.holder();
            if (hold != null && hold != Thread.currentThread()) {
                Staging open = staged(b);
                if (open == null) {
                    // Another thread's action would write its copy back over these bytes, or readers'
                    // copies miss them (and a nested writer's write-back overwrite them).
                    throw hold instanceof Thread ? Mappings.Staged.HELD_SOURCE : Mappings.Staged.SHARED_SOURCE;
                }
                alone(b, open);
            }
            upstream(b).copyFromHost(src, b.chunk.device, b.offset + offset, n);
            Staging open = staged(b);
            if (open != null) {
                MemorySegment.copy(src, 0, open.copy, offset, n);
            }
        } finally {
            b.stepWriters(-1);
        }
    }

    /** Runs {@code action} on a view of live block {@code b} named {@code h}, alive for the action only. */
    <R> R withMapped(Block b, MemoryHandle h, MemoryAccess access, Function<? super MemorySegment, ? extends R> action) {
        stagedHeadroom(b);
        Scopes.enter(b, h.id());
        try (Arena arena = Arena.ofConfined()) {
            Scopes.checkNamed(b, h.id());
            MemorySegment host = b.chunk.host;
            if (host != null) {
                // Recorded before the view is made, as before a staging copy is not: making a slice
                // cannot fail, and the record after it cost the empty action 3-4 ns (PERFORMANCE item 33).
                track(b, access);
                MemorySegment view = host.asSlice(b.offset, b.requested).reinterpret(arena, null);
                return action.apply(access == MemoryAccess.READ_ONLY ? view.asReadOnly() : view);
            }
            // Memory the CPU cannot address: a staging copy, written back after an action that may write.
            if (b.mapping != null) {
                throw Mappings.Staged.SOURCE; // mapped through a staging copy of its own
            }
            Staging open = staged(b);
            if (open != null) {
                // Nested in an action of this thread on the block: its copy, alive for this action only.
                if (access != MemoryAccess.READ_ONLY && open.shared) {
                    alone(b, open); // it may write the copy back: no other reader may share the block then
                }
                MemorySegment view = open.copy.reinterpret(arena, null);
                track(b, access);
                R result = action.apply(access == MemoryAccess.READ_ONLY ? view.asReadOnly() : view);
                if (access != MemoryAccess.READ_ONLY) {
                    open.dirty = true;
                }
                return result;
            }
            return staged(b, access, action, arena);
        } finally {
            Scopes.exit(b);
        }
    }

    /**
     * The outermost action of the calling thread on {@code b}, memory the CPU cannot address: it holds
     * the block ({@link Block#heldBy}) from before its staging copy is made to the end of the copy's
     * write-back. Another thread's call landing on the device meanwhile would be missed by the copy
     * or overwritten by the write-back (a READ_ONLY action too is written back when a nested view
     * wrote), so every other thread's data path on the block is refused then ({@link
     * Mappings#staged}), but for a READ_ONLY action's: other threads' reads and READ_ONLY actions
     * share the block with it, writers are refused; the thread's own nested calls share the copy. The
     * hold is taken under the pool's lock, only while no pin is on the block ({@link #hold}, {@link
     * #join}); then the calls under way are looked for: those that entered before the hold was
     * published (every other scope for a writing action; the device writers, {@link Block#writers},
     * for a reader) are seen here, waited for briefly as a free waits, and the action refused if one
     * stays; one after it sees the hold. Whatever ends the action (a throw, a failed copy or
     * write-back), the hold (a reader: its share of it) goes before the scope leaves.
     */
    private <R> R staged(Block b, MemoryAccess access, Function<? super MemorySegment, ? extends R> action, Arena arena) {
        boolean reader = access == MemoryAccess.READ_ONLY;
        Thread me = Thread.currentThread();
        // Where join records the readers it counted this action in, the instant it has: the lock's
        // critical sections throw an overflow met on reserved stack as they return (JEP 270), so the
        // unlock may throw once the share is counted, and the finally below must still see it.
        Block.Readers[] joined = reader ? new Block.Readers[1] : null;
        Staging mine = null;
        try {
            Mappings.Staged refused = reader ? join(b, joined) : hold(b, me);
            if (refused != null) {
                throw refused(refused);
            }
            // The hold was written before the scopes (a reader: the device writers) are read here; a
            // scope (a writer's count) is written before the hold is read there: one of the two sees
            // the other. A reader waits for writers only: reads and other readers change nothing.
            if (!(reader ? Scopes.awaitNoWriter(b) : Scopes.awaitAlone(b))) {
                throw refused(Mappings.Staged.BUSY);
            }
            DeviceUpstream up = upstream(b);
            MemorySegment staging = arena.allocate(b.requested, 64);
            up.copyToHost(b.chunk.device, b.offset, staging, b.requested);
            // Counted once the view exists: a staging copy the device failed opened none.
            track(b, access);
            mine = new Staging(b, staging, STAGED.get(), reader);
            STAGED.set(mine);
            R result;
            try {
                result = action.apply(access == MemoryAccess.READ_ONLY ? staging.asReadOnly() : staging);
            } catch (Throwable thrown) {
                // A nested view that may write returned normally: its bytes are kept, as a nested
                // write's are (it went to the device) and as every view's are on host memory; the
                // copy holds the action's own bytes too, which go back with them. Else nothing does.
                unstage(mine);
                if (mine.dirty) {
                    try {
                        up.copyFromHost(staging, b.chunk.device, b.offset, b.requested);
                    } catch (Throwable failed) {
                        thrown.addSuppressed(failed); // the caller gets what its action threw
                    }
                }
                throw thrown;
            }
            unstage(mine);
            if (access != MemoryAccess.READ_ONLY || mine.dirty) {
                up.copyFromHost(staging, b.chunk.device, b.offset, b.requested);
            }
            return result;
        } finally {
            if (mine != null) {
                mine.block = null; // a store, no call: ended, whether or not its pop ran (see Staging#block)
            }
            // Neither takes a lock nor calls deeper than the way in did: an overflow in the action's
            // end leaves no share and no lock behind (docs/RELIABILITY.md).
            if (b.heldBy == me) {
                b.heldBy = null; // its own (a writer's, or a sole reader's made so): no one else writes it meanwhile
            } else if (joined != null && joined[0] != null) {
                b.stepReaders(joined[0], -1); // from this frame, as join's count in was from one deeper
            }
        }
    }

    /**
     * Ends the calling thread's staging copy {@code mine}: its nested calls go to the device again.
     * Outer entries of ended actions (left by an overflow that cut their pop short) go with it.
     */
    private static void unstage(Staging mine) {
        Staging outer = mine.outer;
        while (outer != null && outer.block == null) {
            outer = outer.outer;
        }
        if (outer == null) {
            STAGED.remove(); // no entry left that holds this bundle's classes
        } else {
            STAGED.set(outer);
        }
    }

    /**
     * Takes the hold of {@code b} for the calling thread's outermost staged action, under the pool's
     * lock, where pins are taken: a pin there before (an async copy accepted, a hint under way) is
     * seen here and refuses the action, which then never held the block; a pin after it sees the
     * hold, read once pinned, and its call is refused. So of an action and an async copy that start
     * at once exactly one goes on. Before, the hold was taken without the lock and let go only once
     * a pin had refused the action: the copy, looking meanwhile, saw it, and both were refused.
     *
     * @return null once held; else the marker that refuses the action: {@link Mappings.Staged#BUSY}
     *         for a pin, {@link Mappings.Staged#HELD_SOURCE} for another thread's hold
     */
    private static Mappings.Staged hold(Block b, Thread me) {
        Pool pool = b.pool;
        pool.acquireOrLetGo();
        try {
            if (b.pins > 0) {
                return Mappings.Staged.BUSY;
            }
            if (b.holdForAction(me)) {
                return null;
            }
            return b.holder() instanceof Block.Readers ? Mappings.Staged.SHARED_SOURCE : Mappings.Staged.HELD_SOURCE;
        } finally {
            pool.lock.unlock();
        }
    }

    /**
     * Joins (or starts) the readers' hold of {@code b} for the calling thread's outermost READ_ONLY
     * action, under the pool's lock as {@link #hold}: a pin refuses it, and so does an action's own
     * hold. The caller then waits for device writers under way ({@link Scopes#awaitNoWriter}), and
     * counts itself out, without the lock, through the same {@link Block#stepReaders}: readers that
     * the last one has counted down to zero are replaced here, not joined.
     *
     * @param joined where the readers the action is counted in go, as soon as it is
     * @return null once counted among the readers; else the marker that refuses the action
     */
    private static Mappings.Staged join(Block b, Block.Readers[] joined) {
        Pool pool = b.pool;
        pool.acquireOrLetGo();
        try {
            if (b.pins > 0) {
                return Mappings.Staged.BUSY_READER; // an async call not yet run: it may write the block
            }
            Object hold = b.heldBy;
            if (hold != null && !(hold instanceof Block.Readers)) {
                return Mappings.Staged.HELD_SOURCE;
            }
            Block.Readers readers = (Block.Readers) hold;
            if (readers != null && b.stepReaders(readers, 1)) {
                joined[0] = readers;
                return null;
            }
            // None, or all gone: their last one's clearing then fails (or was cut short by an overflow).
            Block.Readers fresh = new Block.Readers();
            b.stepReaders(fresh, 1); // counted as every reader is, through the method that counts it out
            joined[0] = fresh;
            b.heldBy = fresh;
            return null;
        } finally {
            pool.lock.unlock();
        }
    }

    /**
     * A writer nested in the calling thread's READ_ONLY action on {@code b} ({@code mine}): a view that
     * may write (the copy is then written back) or a {@code write} (it goes to the device). Under the
     * pool's lock, when that action is the only reader, the hold becomes the thread's own, as a
     * READ_WRITE action's, until the outermost action ends: later readers and other threads' reads are
     * refused, since the copy may now be newer than the device. While another thread's reader shares
     * the block it is refused: that reader's copy and the device would part, and a write-back land
     * under it. No device writer can be under way here: each was refused by the readers' hold, or
     * waited for before the first reader's copy.
     *
     * @throws Mappings.Staged {@link Mappings.Staged#SHARED_WRITER} when another reader shares the block
     */
    private static void alone(Block b, Staging mine) {
        Pool pool = b.pool;
        pool.acquireOrLetGo();
        try {
            // One: this thread's own share (counted, so not zero); others leave without the lock, and
            // one counted out just now is simply not seen. No one joins meanwhile: joins take the lock.
            if (!(b.heldBy instanceof Block.Readers readers) || readers.count != 1) {
                throw Mappings.Staged.SHARED_WRITER;
            }
            b.heldBy = Thread.currentThread();
            mine.shared = false;
        } finally {
            pool.lock.unlock();
        }
    }

    /** @return {@code marker}, for the action to throw, once the tests' hook has run on a refusal as busy */
    private static Mappings.Staged refused(Mappings.Staged marker) {
        Runnable hook = busyForTests;
        if (hook != null && (marker == Mappings.Staged.BUSY || marker == Mappings.Staged.BUSY_READER)) {
            hook.run();
        }
        return marker;
    }

    /**
     * Tests only: run by a staged action refused because another call is under way on its block, as
     * it is refused; null otherwise (read only on that refusal).
     */
    static volatile Runnable busyForTests;

    /** Walks the caller's stack (rare calls only: a close that finds scopes inside its blocks). */
    private static final StackWalker WALKER = StackWalker.getInstance(StackWalker.Option.RETAIN_CLASS_REFERENCE);

    /**
     * For a close that finds scopes inside its blocks: whether the calling thread runs inside a
     * {@code withMapped} action (of any manager), whose scope only the action's return can end. Read
     * from the stack, so the hot path records nothing.
     *
     * @return true if a {@link #withMapped} frame is on the calling thread's stack
     */
    static boolean callerInsideAction() {
        return WALKER.walk(frames -> frames.anyMatch(
                f -> f.getDeclaringClass() == DataPath.class && f.getMethodName().equals("withMapped")));
    }

    /** The upstream that owns the block's chunk: a peer's, for a block named here by an alias. */
    private static DeviceUpstream upstream(Block b) {
        return b.pool.reclaimer.upstream();
    }

    private void done(Block b, boolean write, long offset, long n, long t0) {
        if (t0 != 0) {
            long t1 = clock.getAsLong();
            if (t1 > t0) {
                figures.copied(n, t1 - t0);
            }
        }
        AccessTracker t = b.access;
        if (t != null) {
            t.record(write, offset, n, accessClock.getAsLong(), b.allocatedAtNanos);
        }
    }

    /** Records a view of {@code b} opened for {@code access}: only once it exists, just before the action gets it. */
    private void track(Block b, MemoryAccess access) {
        AccessTracker t = b.access;
        if (t != null) {
            t.recordView(access, b.requested, accessClock.getAsLong(), b.allocatedAtNanos);
        }
    }
}
