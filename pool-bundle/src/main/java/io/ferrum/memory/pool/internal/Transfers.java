package io.ferrum.memory.pool.internal;

import java.lang.foreign.MemorySegment;
import java.util.Optional;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Semaphore;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.LongSupplier;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryUsageHint;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.pool.DeviceUpstream;
import io.ferrum.memory.pool.StreamExecutor;

/**
 * Work on the bytes of live blocks: copies (now, or on a stream), and the upstream's prefetch and
 * advice. Every such call pins its blocks first ({@link Reclaimer#pin}) and unpins them when the
 * work has run, so a block is neither moved, reused nor released under it, and no pool lock is
 * held across an upstream call.
 *
 * <p><b>Async copies.</b> The blocks are pinned before the work goes to the {@link StreamExecutor},
 * whose contract is exact: it refuses the work (then the pins go at once) or runs it once (then the
 * work unpins). At most {@code maxConcurrentTransfers} copies of the manager run at once.
 *
 * <p><b>Aliases.</b> A block may be a peer's, named here by an alias: pins and unpins go to its
 * own manager ({@link Reclaimer#unpin}), and upstream calls on it to its own upstream.
 *
 * <p><b>Mapped memory.</b> A block of memory the CPU cannot address that is mapped through a host
 * staging copy ({@link Mappings#staged}) is copied neither from nor into: a copy is refused, before
 * a byte moves, once inside its scopes or after its pins, which a mapping made later sees and is
 * refused by. Host memory reads {@code chunk.host} first and pays nothing more.
 *
 * <p>With statistics on (a block with an {@link AccessTracker}), each copy of {@link DataPath#TIMED_BYTES}
 * or more with a measurable duration counts in the bandwidth of the {@link Figures}, and the block
 * records the read and the write.
 */
final class Transfers {
    private final Reclaimer reclaimer;
    private final Checks checks;
    private final StreamExecutor streams;
    private final Semaphore running;
    private final Figures figures;
    private final DeviceUpstream upstream;
    private final LongSupplier clock;
    private final LongSupplier accessClock;

    Transfers(Reclaimer reclaimer, Checks checks, StreamExecutor streams, int maxConcurrent, Figures figures,
              DeviceUpstream upstream, LongSupplier clock, LongSupplier accessClock) {
        this.reclaimer = reclaimer;
        this.checks = checks;
        this.streams = streams;
        this.running = new Semaphore(maxConcurrent);
        this.figures = figures;
        this.upstream = upstream;
        this.clock = clock;
        this.accessClock = accessClock;
    }

    /**
     * Copies between two live blocks whose ranges are checked, now. The calling thread's work ends
     * before it returns, so the blocks are held by scopes ({@link Scopes}, no lock) like a write.
     */
    void copy(Block s, long srcId, long srcOffset, Block d, long dstId, long dstOffset, long size) {
        if (size == 0) {
            return;
        }
        if (s.chunk.host == null || d.chunk.host == null) {
            StackHeadroom.require(); // room for the scopes' exits, before the first scope (DataPath#stagedHeadroom)
        }
        Scopes.enter(s, srcId);
        try {
            Scopes.checkNamed(s, srcId);
            if (d == s) {
                Scopes.checkNamed(s, dstId); // two names of one block (a mapping): both must still name it
            } else {
                Scopes.enter(d, dstId);
            }
            try {
                if (d != s) {
                    Scopes.checkNamed(d, dstId);
                }
                // Inside both scopes, as a write checks (a mapping made meanwhile sees the scopes).
                Mappings.Staged staged = Mappings.staging(s, false);
                if (staged != null) {
                    throw staged;
                }
                if (d.chunk.host != null) {
                    doCopy(s, srcOffset, d, dstOffset, size);
                } else {
                    copyIntoDevice(s, srcOffset, d, dstOffset, size);
                }
            } finally {
                if (d != s) {
                    Scopes.exit(d);
                }
            }
        } finally {
            Scopes.exit(s);
        }
    }

    /**
     * {@link #copy} into memory the CPU cannot address: counted as a device writer of {@code d}
     * ({@link Block#writers}) before it reads the hold, as a {@code write} is, so that a READ_ONLY
     * action joining the readers' hold of {@code d} meanwhile waits for it or is seen.
     */
    private void copyIntoDevice(Block s, long srcOffset, Block d, long dstOffset, long size) {
        d.stepWriters(1);
        try {
            Mappings.Staged staged = Mappings.staging(d, true);
            if (staged != null) {
                throw staged;
            }
            doCopy(s, srcOffset, d, dstOffset, size);
        } finally {
            d.stepWriters(-1);
        }
    }

    private void doCopy(Block s, long srcOffset, Block d, long dstOffset, long size) {
        // Blocks of one manager (a peer's included, named here by aliases) are copied by that
        // manager's upstream, which owns their chunks; blocks of two managers by this one's when one
        // of them is this manager's. Blocks of two peers (both named here by aliases) by the
        // source's owner's: the copy holds that block (a pin or a scope), so that owner's close, and
        // the close of its upstream, waits for it; this manager's close would not.
        Reclaimer owner = s.pool.reclaimer;
        Reclaimer dOwner = d.pool.reclaimer;
        DeviceUpstream up = owner == dOwner || (owner != reclaimer && dOwner != reclaimer) ? owner.upstream() : upstream;
        AccessTracker sa = s.access;
        AccessTracker da = d.access;
        // A clock read costs as much as a small copy: only copies of DataPath.TIMED_BYTES or more are
        // timed, and only with statistics on for either block (enableStats: "access statistics and
        // bandwidth figures"; off, neither is kept and no clock is read).
        boolean timed = size >= DataPath.TIMED_BYTES && (sa != null || da != null);
        long t0 = timed ? clock.getAsLong() : 0;
        DeviceUpstream sUp = owner.upstream();
        DeviceUpstream dUp = dOwner.upstream();
        if (sUp.getClass() == dUp.getClass()) {
            up.copy(s.chunk.device, s.offset + srcOffset, d.chunk.device, d.offset + dstOffset, size);
        } else {
            acrossBackends(sUp, s, srcOffset, dUp, d, dstOffset, size);
        }
        if (timed) {
            long t1 = clock.getAsLong();
            if (t1 > t0) {
                figures.copied(size, t1 - t0);
            }
        }
        if (sa != null || da != null) {
            long now = accessClock.getAsLong();
            if (sa != null) {
                sa.record(false, srcOffset, size, now, s.allocatedAtNanos);
            }
            if (da != null) {
                da.record(true, dstOffset, size, now, d.allocatedAtNanos);
            }
        }
    }

    /**
     * Blocks of two backends (a mapping's alias of a GPU's managed memory, named by a host device's
     * manager): neither upstream understands the other's chunks, so the bytes go through the host
     * view of the one the CPU can address, by the other's own host copy. Both blocks are held by the
     * caller, so both chunks stay reserved.
     *
     * @throws MemoryException if the CPU can address neither block
     */
    private static void acrossBackends(DeviceUpstream sUp, Block s, long srcOffset, DeviceUpstream dUp, Block d,
                                       long dstOffset, long size) {
        Optional<MemorySegment> dHost = dUp.hostSegment(d.chunk.device);
        if (dHost.isPresent()) {
            sUp.copyToHost(s.chunk.device, s.offset + srcOffset, dHost.get().asSlice(d.offset + dstOffset, size), size);
            return;
        }
        Optional<MemorySegment> sHost = sUp.hostSegment(s.chunk.device);
        if (sHost.isPresent()) {
            dUp.copyFromHost(sHost.get().asSlice(s.offset + srcOffset, size), d.chunk.device, d.offset + dstOffset, size);
            return;
        }
        throw new MemoryException("A copy from " + sUp.device() + " (" + sUp.backendName() + ") to " + dUp.device()
                + " (" + dUp.backendName() + ") needs memory the CPU can address on one side; neither block is");
    }

    /**
     * The work of an asynchronous call of zero bytes. Such a call still takes its place on the
     * stream, so that its stage, like any other, completes only after the work submitted before it
     * (a caller may wait on it as on an event).
     */
    private static final Runnable NOTHING = () -> { };

    /**
     * Refuses a stream the executor does not run work on, before any pin, with the executor's own
     * reason: only it knows whether the stream was destroyed, is another device's (and whose) or was
     * never created. Its {@link StreamExecutor#submit} refuses such a stream by contract, so a submit
     * of nothing asks it; one that accepts (the stream is live by now) has run nothing.
     */
    private void checkStream(StreamHandle stream) {
        if (!streams.knows(stream)) {
            streams.submit(stream, NOTHING);
            if (!streams.knows(stream)) {
                // An executor that accepts work for a stream it says it does not know: refused here.
                throw checks.unknownStream(stream);
            }
        }
    }

    /** Copies between two live blocks whose ranges are checked, on {@code stream}. */
    CompletionStage<Void> copyAsync(MemoryTransfer transfer, Block s, Block d, StreamHandle stream) {
        checkStream(stream);
        if (transfer.size() == 0) {
            // Nothing to copy, but a place on the stream: the stage completes after the work before it.
            return streams.submit(stream, NOTHING);
        }
        // Pinned now, so the blocks can neither move nor be reused until the copy has run.
        reclaimer.pin(s, transfer.src().id());
        if (d != s) {
            try {
                reclaimer.pin(d, transfer.dst().id());
            } catch (RuntimeException e) {
                reclaimer.unpin(s);
                throw e;
            }
        } else if (!s.isNamedBy(transfer.dst().id())) {
            // Two names of one block (a mapping): the pin checked the source's; the destination's may
            // have been freed since the arguments were checked, and no byte goes through a freed name.
            // Checked after the pin, so a free after this check is one the copy was accepted before.
            reclaimer.unpin(s);
            throw checks.invalidHandle(transfer.dst());
        }
        // After the pins (taken under the pool lock, as a mapping is published): a mapping before
        // them is seen here, one after them sees them and is refused (Mappings.map).
        Mappings.Staged staged = Mappings.staging(s, false);
        if (staged == null) {
            staged = Mappings.staging(d, true);
        }
        if (staged != null) {
            if (d != s) {
                reclaimer.unpin(d);
            }
            reclaimer.unpin(s);
            throw staged.refusal(checks, staged.destination ? transfer.dst() : transfer.src());
        }
        Pins pins = new Pins(s, d);
        Runnable work = () -> {
            if (!pins.claim()) {
                return; // refused, as far as the engine knows: its pins are gone, its blocks not to be touched
            }
            try {
                takeSlot(transfer.size());
                try {
                    doCopy(s, transfer.srcOffset(), d, transfer.dstOffset(), transfer.size());
                } finally {
                    running.release();
                }
            } finally {
                pins.release();
            }
        };
        try {
            // The executor either refuses the work here (it will never run) or runs it once.
            return streams.submit(stream, work);
        } catch (RuntimeException | Error e) {
            // Refused (the stream was destroyed meanwhile, the executor closed): no pin stays.
            if (pins.claim()) {
                pins.release();
            }
            throw e;
        }
    }

    /**
     * Writes {@code seg} into block {@code b} named {@code h} at {@code offset} ({@code write}), or
     * reads the block from there into {@code seg}, on {@code stream}. The block is pinned before
     * this returns and until the copy has run.
     */
    CompletionStage<Void> hostCopyAsync(Block b, MemoryHandle h, long offset, MemorySegment seg, boolean write,
                                        StreamHandle stream) {
        long n = checks.segment(seg, write ? "source" : "destination", true);
        checkStream(stream);
        reclaimer.pin(b, h.id());
        Pins pins = new Pins(b, b);
        Runnable work = () -> {
            if (!pins.claim()) {
                return; // refused, as far as the engine knows: its pin is gone, its block not to be touched
            }
            try {
                takeSlot(n);
                try {
                    DeviceUpstream up = b.pool.reclaimer.upstream();
                    // Timed as the synchronous copies are: only from DataPath.TIMED_BYTES on (the time of
                    // a smaller one is mostly the clock's, and would drag the figure down).
                    AccessTracker t = b.access;
                    boolean timed = n >= DataPath.TIMED_BYTES && t != null; // statistics off: no bandwidth either
                    long t0 = timed ? clock.getAsLong() : 0;
                    if (write) {
                        up.copyFromHost(seg, b.chunk.device, b.offset + offset, n);
                    } else {
                        up.copyToHost(b.chunk.device, b.offset + offset, seg, n);
                    }
                    if (timed) {
                        long t1 = clock.getAsLong();
                        if (t1 > t0) {
                            figures.copied(n, t1 - t0);
                        }
                    }
                    if (t != null) {
                        // The access clock, as every other record of the block: with the coarse clock,
                        // an exact time here would put a later synchronous access before this one.
                        t.record(write, offset, n, accessClock.getAsLong(), b.allocatedAtNanos);
                    }
                } finally {
                    running.release();
                }
            } finally {
                pins.release();
            }
        };
        try {
            checks.blockRange(h, b, offset, n, write ? "write" : "read");
        } catch (RuntimeException | Error e) {
            reclaimer.unpin(b);
            throw e;
        }
        if (n == 0) {
            reclaimer.unpin(b);
            // Nothing to copy, but a place on the stream: the stage completes after the work before it.
            return streams.submit(stream, NOTHING);
        }
        Mappings.Staged staged = Mappings.staging(b, false);
        if (staged != null) {
            // Seen after the pin, as copyAsync sees it (a zero-byte call, which moves nothing, is not refused).
            reclaimer.unpin(b);
            throw staged.refusal(checks, h);
        }
        try {
            // The executor either refuses the work here (it will never run) or runs it once.
            return streams.submit(stream, work);
        } catch (RuntimeException | Error e) {
            if (pins.claim()) {
                pins.release();
            }
            throw e;
        }
    }

    /**
     * Waits for one of the {@code maxConcurrentTransfers} places. Work on the default stream waits on
     * its caller's thread, which an interrupt (Ctrl-C in a shell) must free; a stream's own threads are
     * never interrupted. A free place is taken whatever the flag says (a thread may carry one left by
     * a shared arena's close): only a wait is interrupted.
     *
     * @throws MemoryException (cause {@link InterruptedException}, the flag kept) when interrupted
     */
    private void takeSlot(long bytes) {
        if (running.tryAcquire()) {
            return;
        }
        try {
            running.acquire();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw checks.interruptedTransfer(bytes, e);
        }
    }

    /** Walks the caller's stack (rare calls only: a close that finds work in flight on its pools). */
    private static final StackWalker WALKER = StackWalker.getInstance(StackWalker.Option.RETAIN_CLASS_REFERENCE);

    /**
     * For a close that finds work in flight on its pools: whether the calling thread is ending an
     * async operation's work (of any manager), as a pressure callback or observer told by the unpin
     * that gives a freed block back is. That work may still pin its other block, and the work queued
     * behind it on its stream runs only once it returns. Read from the stack, so the async path
     * records nothing.
     *
     * @return true if a {@link Pins#release} frame is on the calling thread's stack
     */
    static boolean callerEndsAsyncWork() {
        return WALKER.walk(frames -> frames.anyMatch(
                f -> f.getDeclaringClass() == Pins.class && f.getMethodName().equals("release")));
    }

    /**
     * The pins of one async operation, claimed once: by its work, which then copies and releases them,
     * or by the engine when {@code submit} throws, which then releases them and the work, should it
     * still run, does nothing. The {@link StreamExecutor} contract makes those two exclusive, but a
     * third-party executor may run the work (on the caller's thread, say) and still let its exception
     * out of {@code submit}, or throw and run the work later, or run it twice: a second unpin would
     * take another operation's pin, and a copy after the unpin would write into a block freed and
     * handed to its next owner.
     */
    private final class Pins extends AtomicBoolean {
        private final Block first;
        private final Block second;

        /** @param second {@code first} again for one block */
        Pins(Block first, Block second) {
            this.first = first;
            this.second = second;
        }

        /** @return true for the one caller that may use the blocks and must {@link #release} them */
        boolean claim() {
            return compareAndSet(false, true);
        }

        /** Unpins the blocks; only after a successful {@link #claim}. */
        void release() {
            if (second != first) {
                reclaimer.unpin(second);
            }
            reclaimer.unpin(first);
        }
    }

    void prefetch(Block b, MemoryHandle handle, Device target) {
        reclaimer.pin(b, handle.id());
        try {
            b.pool.reclaimer.upstream().prefetch(b.chunk.device, b.offset, b.requested, target);
        } finally {
            reclaimer.unpin(b);
        }
    }

    void advise(Block b, MemoryHandle handle, MemoryUsageHint hint) {
        reclaimer.pin(b, handle.id());
        try {
            DeviceUpstream up = b.pool.reclaimer.upstream();
            MemoryUsageHint before = b.hint;
            if (before != null && before != hint) {
                // Advice stays with the memory, and a new hint's need not replace it (WILLNEED leaves
                // RANDOM on): the earlier hint's is undone first, so the block has only the new one.
                up.unadvise(b.chunk.device, b.offset, b.requested);
            }
            b.hint = hint;
            up.advise(b.chunk.device, b.offset, b.requested, hint);
        } finally {
            reclaimer.unpin(b);
        }
    }
}
