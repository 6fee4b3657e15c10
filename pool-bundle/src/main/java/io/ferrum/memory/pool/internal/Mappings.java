package io.ferrum.memory.pool.internal;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.function.Function;
import java.util.function.LongSupplier;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryMapping;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.StagingConflictException;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * CPU views of blocks ({@link #map}, {@link #unmap}) and mappings between two devices
 * ({@link #createMapping}): one block with two handles, the second issued by the other device's
 * manager through {@link AliasIssuer}.
 *
 * <p><b>Views.</b> Every view of a block is bound to one shared arena ({@link MappingState});
 * closing it makes every view throw, so freed memory is never read through an old view. A device
 * the CPU cannot address gets a staging copy, written back on unmap; while it exists, the block's
 * other data paths are refused, and a mapping that would make it while one runs is refused ({@link
 * #staged}). A mapped block is never moved (it is not {@link Block#isMovable()}).
 *
 * <p><b>Invariants.</b> A mapping's block is counted as named twice before its first handle is
 * published (a free of the guessable first handle leaves it to the second); a mapping whose second
 * handle cannot be issued, or whose peer closed during the call (its alias died as it was issued),
 * gives its block back and is refused; so is one whose own manager closed during the call, after
 * taking its alias back from the peer (that close may have looked for aliases before it existed).
 * An alias issued for a peer's block is recorded by
 * the issuer until freed or closed ({@link IssuedAliases}).
 */
final class Mappings {
    private final Device device;
    private final Pool mapped;
    private final Allocator allocator;
    private final Reclaimer reclaimer;
    private final HandleTable handles;
    private final IssuedAliases issuedAliases;
    private final Lifecycle lifecycle;
    private final Checks checks;
    /** Times of access records: the clock every other record of a block uses (the coarse one on the system clock). */
    private final LongSupplier accessClock;
    private final Function<Device, PooledMemoryManager> peers;

    Mappings(Device device, Pool mapped, Allocator allocator, Reclaimer reclaimer, HandleTable handles,
             IssuedAliases issuedAliases, Lifecycle lifecycle, Checks checks,
             LongSupplier accessClock, Function<Device, PooledMemoryManager> peers) {
        this.device = device;
        this.mapped = mapped;
        this.allocator = allocator;
        this.reclaimer = reclaimer;
        this.handles = handles;
        this.issuedAliases = issuedAliases;
        this.lifecycle = lifecycle;
        this.checks = checks;
        this.accessClock = accessClock;
        this.peers = peers;
    }

    /**
     * A view of {@code b}. Memory the CPU cannot address is copied to a staging buffer outside the
     * pool's lock (a GPU block of a GiB would stall every allocation, free and figure of the pool
     * for the whole copy): the block is pinned for the copy, so it is neither moved nor released
     * under it. The mapping is published under the lock before the copy, marked as filling, and
     * completed under the lock once filled: another mapping of the block waits for it rather than
     * making a copy of its own (as it waits while an unmap writes the copy back: a copy made then
     * would miss its bytes), and no mapping or unmap can overtake the copy, so it is made once. A
     * copy the upstream fails throws what it threw and leaves the block unmapped. A mapping that
     * would make the copy while another data path runs on the block (a pin of an async copy or a
     * hint, or a {@code withMapped} action's hold, seen under the lock; a scope, seen once the
     * filling mapping is published) is refused, leaving the block unmapped: the copy would miss that
     * call's bytes ({@link #staged}).
     */
    MemorySegment map(Block b, MemoryHandle handle, MemoryAccess access) {
        Pool pool = b.pool;
        MappingState filling;
        pool.acquire();
        try {
            MappingState m;
            while (true) {
                reclaimer.checkLive(pool, b, handle.id());
                m = b.mapping;
                // The chunk's host view, kept since it was added: the upstream is not asked under the lock.
                if (m == null || !m.inTransit() || b.chunk.host != null) {
                    break;
                }
                pool.settled.awaitUninterruptibly(); // as long as the copy: what a wait for the lock held across it took
            }
            if (m != null || b.chunk.host != null) {
                return view(b, handle, access);
            }
            if (b.pins > 0 || b.holder() != null) {
                // An asynchronous copy accepted and not yet run (or a hint under way), pinned before
                // this lock: the copy made now would miss what it writes, the write-back overwrite it.
                // Or a withMapped action holds the block (its hold is taken under this lock): refused
                // before the filling mapping is published, which would refuse the action's own
                // nested calls while this mapping waited for its scope to leave.
                throw checks.stagingBusy(handle);
            }
            reclaimer.pin(b, handle.id()); // reentrant: no free, move or close gives the chunk away under the copy
            // Published once pinned: a free that claims the name now sees the pin, takes the lock and drops it.
            filling = new MappingState(null, null, null);
            filling.filling = true;
            b.mapping = filling;
        } finally {
            pool.lock.unlock();
        }
        Arena arena = null;
        MappingState filled = null;
        MemorySegment view = null;
        try {
            Runnable hook = fillingForTests;
            if (hook != null) {
                hook.run();
            }
            // Published, the filling mapping refuses every data-path call that enters the block from
            // now on (staged); one that entered before may still move bytes. The mapping was written
            // before the scopes are read here, and a scope reads the mapping after it entered: either
            // it sees the mapping, or this sees it. Waited for briefly (one that entered a reused
            // block by mistake leaves at once), then the mapping is refused: the copy would miss it.
            if (!Scopes.awaitNone(b)) {
                throw checks.stagingBusy(handle);
            }
            arena = Arena.ofShared();
            MemorySegment staging = arena.allocate(b.requested, 64);
            // A peer's block (named here by an alias) lives in its own upstream's chunk.
            pool.reclaimer.upstream().copyToHost(b.chunk.device, b.offset, staging, b.requested);
            filled = new MappingState(Arena.ofShared(), staging, arena);
        } finally {
            boolean kept = false;
            // The handle was freed meanwhile, the block's other name staying: the call is refused, and
            // its filling mapping, which no one will have a view of, goes once its pin went.
            boolean orphaned = false;
            try {
                if (filled == null) {
                    // Failed or refused: the pin goes while the filling mapping still stands, so that a
                    // mapping waiting for it never finds this pin, which it would take for another
                    // call's under way and be refused by.
                    reclaimer.unpin(b);
                }
            } finally {
                pool.acquire();
                try {
                    pool.settled.signalAll();
                    if (b.mapping == filling) {
                        orphaned = filled != null && !b.isNamedBy(handle.id());
                        if (!orphaned) {
                            b.mapping = filled; // null when the copy failed: the next mapping makes it again
                            kept = filled != null;
                        }
                    }
                    if (filled != null) {
                        // Not kept: a free or a close dropped the mapping meanwhile, and says so here.
                        reclaimer.checkLive(pool, b, handle.id());
                        view = kept ? view(b, handle, access) : null;
                    }
                } finally {
                    pool.lock.unlock();
                    try {
                        if (arena != null && !kept) {
                            arena.close(); // not published: no view of it was handed out
                        }
                    } finally {
                        try {
                            if (filled != null) {
                                reclaimer.unpin(b);
                            }
                        } finally {
                            if (orphaned) {
                                dropFilling(b, filling);
                            }
                        }
                    }
                }
            }
        }
        if (view == null) {
            throw checks.invalidHandle(handle);
        }
        return view;
    }

    /**
     * Tests only: run by a first staged mapping once its filling mapping is published, before it
     * looks for scopes; null otherwise.
     */
    static volatile Runnable fillingForTests;

    /** Ends {@code filling}, {@code b}'s mapping whose handle went during its copy, unless a free or a close dropped it. */
    private static void dropFilling(Block b, MappingState filling) {
        Pool pool = b.pool;
        pool.acquire();
        try {
            if (b.mapping == filling) {
                b.mapping = null;
            }
            pool.settled.signalAll();
        } finally {
            pool.lock.unlock();
        }
    }

    /**
     * Whether {@code b}'s bytes are held through a host staging copy: by a mapping, from the start of
     * its copy ({@link MappingState#filling}), through its views, to the end of its write-back ({@link
     * MappingState#writingBack}); or by {@code withMapped} actions ({@link Block#heldBy}), from
     * before the first copy to the end of the last action. Every copy of the block ({@link Transfers})
     * is refused then, whichever thread asks: it would read the device's older bytes, or write bytes the
     * write-back overwrites. {@link DataPath} refuses its calls the same way, except those of the
     * action's own thread, which share the action's copy, and, while only READ_ONLY actions hold the
     * block ({@link Block.Readers}), other threads' reads and READ_ONLY actions. Read by those paths inside their scope or
     * after their pin; never on memory the CPU addresses (its views are the memory itself), whose
     * paths read {@code chunk.host} first and go no further.
     */
    static boolean staged(Block b) {
        return staging(b, false) != null;
    }

    /**
     * @return null if {@code b} is not {@link #staged}; else the marker that refuses a call with the
     *         block as its source (or only block), or as a copy's {@code destination}
     */
    static Staged staging(Block b, boolean destination) {
        if (b.chunk.host != null) {
            return null;
        }
        if (b.mapping != null) {
            return destination ? Staged.DESTINATION : Staged.SOURCE;
        }
        Object hold = b.holder(); // one read: an action's own hold, or readers' (Block.heldBy)
        if (hold != null) {
            if (hold instanceof Thread) {
                return destination ? Staged.HELD_DESTINATION : Staged.HELD_SOURCE;
            }
            return destination ? Staged.SHARED_DESTINATION : Staged.SHARED_SOURCE;
        }
        return null;
    }

    /**
     * A data-path call found its block {@link #staged} inside a scope, or a {@code withMapped} action
     * found another call under way on the block it was to stage ({@link #BUSY}). One shared instance
     * per case, with neither stack trace nor suppressed exceptions (as {@link Scopes.StaleName}): the
     * scope leaves at once, and the manager's entry point throws {@link #refusal} naming the handle.
     */
    static final class Staged extends RuntimeException {
        private static final long serialVersionUID = 1L;
        /** The block is mapped through a staging copy; it is the call's only block, or a copy's source. */
        static final Staged SOURCE = new Staged(false, false);
        /** The block is mapped through a staging copy; it is a copy's destination. */
        static final Staged DESTINATION = new Staged(false, true);
        /** Another thread's {@code withMapped} action holds the block as a staging copy (or any action, for a copy); its only block or a copy's source. */
        static final Staged HELD_SOURCE = new Staged(true, false);
        /** As {@link #HELD_SOURCE}, the block being a copy's destination. */
        static final Staged HELD_DESTINATION = new Staged(true, true);
        /** READ_ONLY {@code withMapped} actions share the block (a writer or a copy is refused); its only block or a copy's source. */
        static final Staged SHARED_SOURCE = new Staged(true, false);
        /** As {@link #SHARED_SOURCE}, the block being a copy's destination. */
        static final Staged SHARED_DESTINATION = new Staged(true, true);
        /** A writer nested in a READ_ONLY action (a view that may write, a {@code write}) while another thread's reader shares the block. */
        static final Staged SHARED_WRITER = new Staged(true, false);
        /** A {@code withMapped} action would stage a block while another call on it is under way. */
        static final Staged BUSY = new Staged(false, false);
        /** A READ_ONLY {@code withMapped} action would stage a block while an asynchronous call on it is pending. */
        static final Staged BUSY_READER = new Staged(false, false);

        /** The block is held by {@code withMapped} actions, not a mapping. */
        final boolean held;
        /** The block is a copy's destination. */
        final boolean destination;

        private Staged(boolean held, boolean destination) {
            super("a block held through a staging copy, seen inside a scope", null, false, false);
            this.held = held;
            this.destination = destination;
        }

        /** @return the exception the caller gets, naming {@code handle}, in the words of {@code checks}' device */
        StagingConflictException refusal(Checks checks, MemoryHandle handle) {
            if (this == BUSY) {
                return checks.actionBusy(handle);
            }
            if (this == BUSY_READER) {
                return checks.readerBusy(handle);
            }
            if (this == SHARED_WRITER) {
                return checks.writerAmongReaders(handle);
            }
            if (this == SHARED_SOURCE || this == SHARED_DESTINATION) {
                return checks.sharedByReaders(handle);
            }
            return held ? checks.heldByAction(handle) : checks.staged(handle);
        }
    }

    /** Under the pool lock: a view of live {@code b}, whose mapping is published here when it has none. */
    private MemorySegment view(Block b, MemoryHandle handle, MemoryAccess access) {
        MappingState m = b.mapping;
        if (m == null) {
            m = new MappingState(Arena.ofShared(), null, null);
            b.mapping = m;
            if (!b.isNamedBy(handle.id())) {
                // A free claimed the handle without the lock just now: it did not see this mapping.
                Reclaimer.closeArena(b, m);
                throw checks.invalidHandle(handle);
            }
        }
        MemorySegment base = m.staging != null ? m.staging : b.chunk.host.asSlice(b.offset, b.requested);
        MemorySegment view = base.reinterpret(m.arena, null);
        if (access != MemoryAccess.READ_ONLY) {
            m.writable = true;
        }
        AccessTracker t = b.access;
        if (t != null) {
            t.recordView(access, b.requested, accessClock.getAsLong(), b.allocatedAtNanos);
        }
        return access == MemoryAccess.READ_ONLY ? view.asReadOnly() : view;
    }

    /**
     * Closes every view of {@code b}. A staging copy that a view may have written goes back to the
     * device outside the pool's lock (a GPU block of a GiB would stall the pool for the whole copy),
     * in this order: under the lock the views close (none can write the copy any more) and the block
     * is pinned, so that no free, move or close gives its memory away under the copy; the copy is
     * written back; under the lock again the mapping ends and the copy is freed. Meanwhile the block
     * counts as unmapped: a second unmap finds nothing mapped, a map waits for the write-back (a copy
     * of the device made sooner would miss its bytes), a free is done when the write-back ends.
     *
     * <p>A write-back the upstream fails throws what it threw, the views closed all the same. The
     * staging copy, holding every byte written through them, stays the block's mapping: the next
     * {@code mapMemory} returns views of it and the next {@code unmapMemory} writes it back again,
     * while the device holds whatever the failed copy left. A free or a close of the block drops it.
     */
    void unmap(Block b, MemoryHandle handle) {
        Pool pool = b.pool;
        MappingState m;
        pool.acquire();
        try {
            reclaimer.checkLive(pool, b, handle.id());
            m = b.mapping;
            if (m == null || m.inTransit()) {
                throw checks.notMapped(handle);
            }
            if (m.staging == null || !m.writable) {
                if (!Reclaimer.closeArena(b, m)) {
                    throw checks.viewInUse(handle);
                }
                return;
            }
            try {
                m.arena.close();
            } catch (IllegalStateException inUse) {
                throw checks.viewInUse(handle);
            }
            // The mapping stays published, so that a free reading it without the lock sees a block
            // that is not cacheable and takes the lock: it finds the pin then.
            m.writingBack = true;
            b.pins++;
            pool.inflight++;
        } finally {
            pool.lock.unlock();
        }
        boolean written = false;
        try {
            // The owner's upstream: a peer unmapping through its alias does not own the chunk.
            pool.reclaimer.upstream().copyFromHost(m.staging, b.chunk.device, b.offset, b.requested);
            written = true;
        } finally {
            endWriteBack(b, m, written);
        }
    }

    /** Ends the write-back of {@code m}, {@code b}'s staging copy: the mapping goes, or stays if not {@code written}. */
    private void endWriteBack(Block b, MappingState m, boolean written) {
        Pool pool = b.pool;
        boolean kept = false;
        try {
            // The pin goes while the mapping still stands (writing back), so that a mapping waiting for
            // its end never finds this pin, which it would take for another call's under way. A free
            // meanwhile dropped the mapping (closeArena), and this unpin gives the block back then.
            reclaimer.unpin(b);
        } finally {
            pool.acquire();
            try {
                pool.settled.signalAll();
                if (b.mapping == m) {
                    // Not dropped meanwhile by a free or a close (closeArena): the block is still named.
                    b.mapping = null;
                    if (!written) {
                        // The copy holds the views' bytes, which the device may not: it stays mapped, in new views.
                        MappingState again = new MappingState(Arena.ofShared(), m.staging, m.stagingArena);
                        again.writable = true;
                        b.mapping = again;
                        kept = true;
                    }
                }
            } finally {
                pool.lock.unlock();
                if (!kept) {
                    m.stagingArena.close();
                }
            }
        }
    }

    /**
     * The memory lives on this device; the other handle is issued by the manager of the other
     * device (this one when both are the same), found through the settings' peers, which must
     * answer that device's own manager (an answer for another device is refused). The devices are
     * checked: one of them is this manager's. A peer may be of another backend and kind (a GPU's
     * backend answers the host's managers, for its managed memory): copies between its chunks and
     * this one's go through host memory ({@link Transfers}).
     */
    MemoryMapping createMapping(Device sourceDevice, Device targetDevice, long size) {
        Device other = sourceDevice.equals(device) ? targetDevice : sourceDevice;
        AliasIssuer peer = null;
        if (!other.equals(device)) {
            PooledMemoryManager found = peers.apply(other);
            if (!(found instanceof AliasIssuer p) || p.isClosed()) {
                throw checks.noPeer(sourceDevice, targetDevice, other);
            }
            if (!other.equals(found.device())) {
                // A stale or wrong entry of the lookup: the alias would be another device's handle.
                throw checks.wrongPeer(sourceDevice, targetDevice, other, found.device());
            }
            peer = p;
        }
        checks.size(size, MemoryType.MAPPED, mapped.config);
        // Counted as named twice from the start: a free of the (guessable) first handle before the
        // second is issued leaves the block to the second.
        Block[] carved = new Block[1];
        MemoryHandle primary = allocator.allocateIn(mapped, size, SizeClasses.unit(mapped.config),
                mapped.blockSize(size), null, 2, carved);
        Block b = carved[0];
        long alias;
        b.issuer = peer;
        try {
            alias = peer == null ? handles.registerAlias(b) : peer.issueAlias(b);
        } catch (RuntimeException e) {
            if (b.dropUnissuedName() == 0) {
                reclaimer.lastNameGone(b, null);
            }
            freeQuietly(primary);
            throw e;
        }
        if (peer != null && lifecycle.closed) {
            // This manager closed after the block was carved: its close may have looked for aliased
            // blocks before this one had its alias, and would leave the alias to name a block of a
            // closed manager in the peer's table. The first handle goes first, unless the close took
            // it: the block of a refused call is no allocation for the close to report.
            handles.unregister(b, primary.id());
            peer.withdrawAlias(b, alias);
            throw checks.closed();
        }
        if (peer != null && peer.isClosed()) {
            // The peer closed after it was found: the alias died as it was issued (or dies now, with
            // the rest of the peer's), so no mapping exists. Refused as a call after that close would
            // be; the alias's name is gone, the primary's free gives the block back.
            freeQuietly(primary);
            throw checks.noPeer(sourceDevice, targetDevice, other);
        }
        MemoryHandle second = new MemoryHandle(alias);
        return sourceDevice.equals(device)
                ? new MemoryMapping(primary, second, sourceDevice, targetDevice, size)
                : new MemoryMapping(second, primary, sourceDevice, targetDevice, size);
    }

    private void freeQuietly(MemoryHandle h) {
        Block b = lifecycle.closed ? null : handles.lookup(h.id());
        if (b == null) {
            return;
        }
        try {
            reclaimer.free(b, h);
        } catch (RuntimeException ignored) {
            // already freed by whoever freed it
        }
    }

    /**
     * The owner of {@code b}, named here by an alias, closed ({@link AliasIssuer#ownerClosed}). The
     * owner's device is recorded before the name is claimed, so that a free of the alias that loses
     * the claim to this call finds it and is taken; the slot lets go of the block.
     */
    void ownerClosed(Block b, Device owner) {
        long alias = b.aliasId;
        if (!handles.isOwn(alias)) {
            return;
        }
        issuedAliases.orphan(alias, owner);
        if (b.claim(alias) < 0) {
            issuedAliases.unorphan(alias, owner); // freed here meanwhile: that free took the name
            return;
        }
        b.issuer = null;
        issuedAliases.remove(b, alias);
        handles.recycleForeign(alias);
    }

    /**
     * Takes back {@code alias}, issued here for {@code b} by a mapping its manager refused (see
     * {@link AliasIssuer#withdrawAlias}). Recorded before it is claimed, so the record goes first;
     * an {@link #ownerClosed} that wins the claim orphaned it before, so that record goes after.
     */
    void withdraw(Block b, long alias) {
        issuedAliases.remove(b, alias);
        int left = b.claim(alias);
        if (left < 0) {
            issuedAliases.forgetOrphan(alias); // the owner's close took it: no one holds the alias
            return;
        }
        b.issuer = null;
        handles.recycleForeign(alias);
        if (left == 0) {
            b.pool.reclaimer.lastNameGone(b, null);
        }
    }

    /** This manager issues an alias for a peer's block (see {@link AliasIssuer#issueAlias}). */
    long issueForPeer(Block b) {
        long alias = handles.registerAlias(b);
        issuedAliases.add(b, alias);
        if (lifecycle.unsettled && !lifecycle.admits()) {
            // This manager closed meanwhile and may not have seen this alias: it dies now.
            issuedAliases.drop(b, alias);
        }
        return alias;
    }
}
