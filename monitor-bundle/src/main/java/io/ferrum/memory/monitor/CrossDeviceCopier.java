package io.ferrum.memory.monitor;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryException;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.OutOfDeviceMemoryException;
import io.ferrum.memory.api.StagingConflictException;
import io.ferrum.memory.api.StreamHandle;

/**
 * Copies between blocks of two different managers: a copy within one manager never comes here (that
 * manager copies it itself). The source's manager is asked first to copy device to device ({@link
 * DeviceMemoryManager#copyToPeer}: two GPUs of one backend, a peer copy), which holds both blocks
 * while a piece moves. When it cannot, the bytes go through the managers' data path ({@code write},
 * {@code read}, {@code withMapped}), which pins each block only while its bytes move: from host
 * memory (a {@code cpu} device) a view of the source is written into the destination; into host
 * memory the source is read into a view of the destination; between two other devices through a
 * host buffer of at most {@value #BOUNCE_BYTES} bytes at a time. No block is mapped whole (a GPU
 * block's mapping is a staging copy of all of it), and a block the caller has mapped stays mapped;
 * one mapped through a staging copy (a GPU's) is refused by its manager on every path, with a {@link
 * io.ferrum.memory.api.StagingConflictException}, at the first piece that touches it.
 *
 * <p>Every route moves at most {@value #PIECE_BYTES} bytes (through the host buffer, {@value
 * #BOUNCE_BYTES}) a call, and an interrupt of the calling thread stops the copy before its next
 * piece, the first one included: a {@link MemoryException} naming the destination's offsets that
 * hold the source's bytes (the first ones, or the last ones where the pieces go back to front); the
 * rest of the destination is as it was. A piece after the first that fails says the same, in an
 * exception of the manager's exception's API type ({@link #stoppedAfter}).
 *
 * <p>Invariants: a copy is checked in full ({@link #plan}: both blocks live, both ranges inside their
 * blocks) before a byte moves; an asynchronous copy runs on the monitor's
 * worker pool, and stream ordering applies within one device only.
 */
final class CrossDeviceCopier {

    /**
     * A checked transfer: its two managers and, between two managers, both blocks' information.
     *
     * @param srcInfo null when {@link #sameManager()}
     * @param dstInfo null when {@link #sameManager()}
     */
    record Route(DeviceMemoryManager src, DeviceMemoryManager dst, MemoryHandleInfo srcInfo, MemoryHandleInfo dstInfo) {
        boolean sameManager() {
            return src == dst;
        }
    }

    /** The most bytes a copy between two devices that are not host memory holds in host memory at once. */
    static final long BOUNCE_BYTES = 4L << 20;

    /**
     * The most bytes one call moves in a peer copy or a copy from or into host memory, between two
     * looks at the interrupt: large enough that the calls cost nothing next to the bytes, small
     * enough that Ctrl-C stops a copy of gigabytes promptly.
     */
    static final long PIECE_BYTES = 64L << 20;

    private final Executor workers;
    /** {@link #PIECE_BYTES}; less in tests, so that a few MiB are several pieces. */
    private final long pieceBytes;

    CrossDeviceCopier(Executor workers) {
        this(workers, PIECE_BYTES);
    }

    CrossDeviceCopier(Executor workers, long pieceBytes) {
        this.workers = workers;
        this.pieceBytes = pieceBytes;
    }

    /**
     * @throws InvalidHandleException        if a block is no longer live on its manager
     * @throws InvalidMemoryRequestException if a range falls outside its block
     */
    Route plan(MemoryTransfer transfer, DeviceMemoryManager src, DeviceMemoryManager dst) {
        MemoryHandleInfo si = src.handleInfo(transfer.src()).orElseThrow(() -> new InvalidHandleException(
                transfer.src(), "Handle " + transfer.src() + " is no longer live on " + src.device()));
        MemoryHandleInfo di = dst.handleInfo(transfer.dst()).orElseThrow(() -> new InvalidHandleException(
                transfer.dst(), "Handle " + transfer.dst() + " is no longer live on " + dst.device()));
        checkRange(si, transfer.srcOffset(), transfer.size(), "source");
        checkRange(di, transfer.dstOffset(), transfer.size(), "destination");
        return new Route(src, dst, si, di);
    }

    private static void checkRange(MemoryHandleInfo info, long offset, long size, String what) {
        if (size > info.size() || offset > info.size() - size) {
            throw new InvalidMemoryRequestException("Copy of " + Bytes.count(size) + " at " + what + " offset " + offset
                    + " falls outside " + what + " block " + info.handle() + " of " + Bytes.count(info.size()) + " on "
                    + info.device());
        }
    }

    /**
     * @throws java.util.concurrent.RejectedExecutionException if the worker pool is shut down (the monitor stopped)
     */
    CompletionStage<Void> copyAsync(Route r, MemoryTransfer transfer, StreamHandle stream) {
        if (stream != null && !stream.isDefault()) {
            // The stream must be the destination device's, as the contract says: a zero-byte copy on the
            // destination's manager has it checked there (an unknown or foreign stream is refused).
            r.dst().copyAsync(MemoryTransfer.of(transfer.dst(), transfer.dst(), 0), stream);
        }
        return CompletableFuture.runAsync(() -> copy(r, transfer), workers);
    }

    /**
     * Copies piece by piece (see the class comment). A failure of the first piece is the manager's
     * own exception, as it threw it; a failure of a later one is {@link #stoppedAfter}'s.
     */
    void copy(Route r, MemoryTransfer t) {
        if (t.size() == 0) {
            return;
        }
        DeviceMemoryManager src = r.src();
        DeviceMemoryManager dst = r.dst();
        AdvancedMemoryManager hostSrc = isHost(r.srcInfo()) && src instanceof AdvancedMemoryManager a ? a : null;
        AdvancedMemoryManager hostDst = hostSrc == null && isHost(r.dstInfo()) && dst instanceof AdvancedMemoryManager a
                ? a : null;
        // Device to device while the source's manager can: asked for each piece (false changes nothing),
        // and the first false sends the rest through host memory.
        boolean peer = true;
        Arena arena = null;
        MemorySegment bounce = null;
        long done = 0;
        try {
            while (done < t.size()) {
                checkInterrupt(r, t, done);
                if (!peer && hostSrc == null && hostDst == null && bounce == null) {
                    // Neither is host memory a view reaches: through a host buffer, a bounded piece at a time.
                    arena = Arena.ofConfined();
                    try {
                        bounce = arena.allocate(Math.min(Math.min(BOUNCE_BYTES, pieceBytes), t.size() - done), 64);
                    } catch (OutOfMemoryError e) {
                        if (done == 0) {
                            throw e;
                        }
                        throw stoppedAfter(r, t, done, null, e);
                    }
                }
                long n = Math.min(bounce == null ? pieceBytes : bounce.byteSize(), t.size() - done);
                MemoryTransfer p = piece(t, done, n);
                try {
                    if (peer) {
                        if (!src.copyToPeer(p, dst)) {
                            peer = false;
                            continue; // this piece again, through host memory
                        }
                    } else if (hostSrc != null) {
                        // Host memory at the source: a view of it for each piece goes straight into the destination.
                        hostSrc.withMapped(p.src(), MemoryAccess.READ_ONLY, view -> {
                            dst.write(p.dst(), p.dstOffset(), view.asSlice(p.srcOffset(), p.size()));
                            return null;
                        });
                    } else if (hostDst != null) {
                        hostDst.withMapped(p.dst(), MemoryAccess.WRITE_ONLY, view -> {
                            src.read(p.src(), p.srcOffset(), view.asSlice(p.dstOffset(), p.size()));
                            return null;
                        });
                    } else {
                        MemorySegment staged = bounce.asSlice(0, n);
                        src.read(p.src(), p.srcOffset(), staged);
                        dst.write(p.dst(), p.dstOffset(), staged);
                    }
                } catch (RuntimeException e) {
                    throw done == 0 ? e : stoppedAfter(r, t, done, p, e);
                }
                done += n;
            }
        } finally {
            if (arena != null) {
                arena.close();
            }
        }
    }

    /**
     * The next piece of a copy. The two handles of one mapping name one block, so the ranges may
     * overlap: pieces go back to front when the destination lies after the source, as memmove does,
     * and the bytes done are then the range's last ones.
     *
     * @param done the bytes of {@code t} already copied
     * @param n    the piece's size
     */
    private static MemoryTransfer piece(MemoryTransfer t, long done, long n) {
        long at = t.dstOffset() > t.srcOffset() ? t.size() - done - n : done;
        return new MemoryTransfer(t.src(), t.dst(), n, t.srcOffset() + at, t.dstOffset() + at);
    }

    /**
     * A copy between two devices stops before its next piece, the first one included, when its
     * thread is interrupted (Ctrl-C in the shell): a large block is many pieces. The interrupt stays
     * set.
     *
     * @param done the bytes already copied, whole pieces
     * @throws MemoryException (cause: an {@link InterruptedException}) saying which part of the
     *                         destination holds the source's bytes; the rest of it is as it was
     */
    private static void checkInterrupt(Route r, MemoryTransfer t, long done) {
        if (!Thread.currentThread().isInterrupted()) {
            return;
        }
        if (done == 0) {
            throw new MemoryException(named(r, t) + " interrupted before its first byte: the destination is as it was",
                    new InterruptedException("interrupted"));
        }
        throw new MemoryException(named(r, t) + " interrupted after " + Bytes.count(done) + ": " + arrived(t, done)
                + ", the rest of its range is as it was; copy again to complete it", new InterruptedException("interrupted"));
    }

    /**
     * A piece after the first failed: the exception says, as an interrupt's does, which part of the
     * destination holds the source's bytes, for the manager's says "Nothing was done" (of its own
     * call) while earlier pieces arrived. It keeps the API type of the manager's exception (a caller
     * that unmaps a block on a {@link StagingConflictException}, or drops a freed handle on an {@link
     * InvalidHandleException}, still can: see {@link io.ferrum.memory.api.MemoryRouter#copy}), with
     * that exception as its cause; anything else is a {@link MemoryException}. A refusal (an exception
     * whose type says the call changed nothing) left the failed piece's range as it was; any other
     * failure, a device's error say, may have written part of it, and the message names it.
     *
     * @param done   the bytes already copied, whole pieces, more than zero
     * @param failed the piece that failed, or null when none had started (no host buffer)
     * @param e      the failure
     */
    private static RuntimeException stoppedAfter(Route r, MemoryTransfer t, long done, MemoryTransfer failed, Throwable e) {
        boolean refused = failed == null || e instanceof InvalidHandleException || e instanceof StagingConflictException
                || e instanceof InvalidMemoryRequestException;
        String what = named(r, t) + " failed after " + Bytes.count(done) + ": " + arrived(t, done)
                + (refused ? ", the rest of its range is as it was; "
                        : ", its offsets " + failed.dstOffset() + " to " + (failed.dstOffset() + failed.size())
                                + ", where the failed piece went, may hold some of it, and the rest of its range is as it was; ")
                + "copy again to complete it. Its next piece " + (refused ? "was refused: " : "failed: ")
                + (e.getMessage() == null ? e.toString() : e.getMessage());
        RuntimeException typed;
        if (e instanceof StagingConflictException s) {
            typed = new StagingConflictException(s.handle(), what);
        } else if (e instanceof InvalidHandleException h) {
            typed = new InvalidHandleException(h.handle(), what);
        } else if (e instanceof OutOfDeviceMemoryException o) {
            typed = new OutOfDeviceMemoryException(o.device(), o.requestedBytes(), o.freeBytes(), what);
        } else if (e instanceof DeviceUnavailableException d) {
            typed = new DeviceUnavailableException(d.device(), what);
        } else if (e instanceof InvalidMemoryRequestException) {
            typed = new InvalidMemoryRequestException(what);
        } else {
            typed = new MemoryException(what);
        }
        typed.initCause(e);
        return typed;
    }

    /** @return the copy as its messages name it: its size, both handles and both devices */
    private static String named(Route r, MemoryTransfer t) {
        return "Copy of " + Bytes.count(t.size()) + " from " + t.src() + " on " + r.srcInfo().device() + " to " + t.dst()
                + " on " + r.dstInfo().device();
    }

    /**
     * @param done the bytes already copied, whole pieces: the range's first ones, or its last ones
     *             where the pieces go back to front ({@link #piece})
     * @return the destination offsets that hold the source's bytes, as the messages say it
     */
    private static String arrived(MemoryTransfer t, long done) {
        long from = t.dstOffset() > t.srcOffset() ? t.dstOffset() + t.size() - done : t.dstOffset();
        return "the destination holds part of the source (destination offsets " + from + " to " + (from + done) + ")";
    }

    /** @return whether the block is host memory, which a view reaches without a staging copy */
    private static boolean isHost(MemoryHandleInfo info) {
        return Device.CPU.equals(info.device().kind());
    }
}
