package io.ferrum.memory.monitor;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryException;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.StreamHandle;

/**
 * Copies between blocks of two different managers: a copy within one manager never comes here (that
 * manager copies it itself). The source's manager is asked first to copy device to device ({@link
 * DeviceMemoryManager#copyToPeer}: two GPUs of one backend, a peer copy), which holds both blocks for
 * the whole copy. When it cannot, the bytes go through the managers' data path ({@code write}, {@code
 * read}, {@code withMapped}), which pins each block only while its bytes move: from host memory (a
 * {@code cpu} device) a view of the source is written into the destination; into host memory the
 * source is read into a view of the destination; between two other devices through a host buffer of
 * at most {@value #BOUNCE_BYTES} bytes at a time, which an interrupt of the calling thread stops
 * between two pieces (a {@link MemoryException}). No block is mapped whole (a GPU block's mapping is
 * a staging copy of all of it), and a block the caller has mapped stays mapped.
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

    private final Executor workers;

    CrossDeviceCopier(Executor workers) {
        this.workers = workers;
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

    void copy(Route r, MemoryTransfer t) {
        if (t.size() == 0) {
            return;
        }
        DeviceMemoryManager src = r.src();
        DeviceMemoryManager dst = r.dst();
        if (src.copyToPeer(t, dst)) {
            return;
        }
        if (isHost(r.srcInfo()) && src instanceof AdvancedMemoryManager host) {
            // Host memory at the source: a view of it for this call goes straight into the destination.
            host.withMapped(t.src(), MemoryAccess.READ_ONLY, view -> {
                dst.write(t.dst(), t.dstOffset(), view.asSlice(t.srcOffset(), t.size()));
                return null;
            });
        } else if (isHost(r.dstInfo()) && dst instanceof AdvancedMemoryManager host) {
            host.withMapped(t.dst(), MemoryAccess.WRITE_ONLY, view -> {
                src.read(t.src(), t.srcOffset(), view.asSlice(t.dstOffset(), t.size()));
                return null;
            });
        } else {
            // Neither is host memory a view reaches: through a host buffer, a bounded piece at a time.
            // The two handles of one mapping name one block, so the ranges may overlap: pieces go
            // back to front when the destination lies after the source, as memmove does.
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment bounce = arena.allocate(Math.min(BOUNCE_BYTES, t.size()), 64);
                long pieces = (t.size() + bounce.byteSize() - 1) / bounce.byteSize();
                boolean backwards = t.dstOffset() > t.srcOffset();
                for (long k = 0; k < pieces; k++) {
                    if (k > 0 && Thread.currentThread().isInterrupted()) {
                        throw interrupted(r, t, k * bounce.byteSize(), backwards);
                    }
                    long at = (backwards ? pieces - 1 - k : k) * bounce.byteSize();
                    MemorySegment piece = bounce.asSlice(0, Math.min(bounce.byteSize(), t.size() - at));
                    src.read(t.src(), t.srcOffset() + at, piece);
                    dst.write(t.dst(), t.dstOffset() + at, piece);
                }
            }
        }
    }

    /**
     * A copy through the host buffer stops between two pieces when its thread is interrupted (Ctrl-C
     * in the shell): a large copy between two GPUs is many pieces. The interrupt stays set.
     *
     * @param done the bytes already copied, whole pieces
     */
    private static MemoryException interrupted(Route r, MemoryTransfer t, long done, boolean backwards) {
        long from = backwards ? t.dstOffset() + t.size() - done : t.dstOffset();
        return new MemoryException("Copy of " + Bytes.count(t.size()) + " from " + t.src() + " on "
                + r.srcInfo().device() + " to " + t.dst() + " on " + r.dstInfo().device() + " interrupted after "
                + Bytes.count(done) + ": the destination holds part of the source (destination offsets " + from
                + " to " + (from + done) + "), the rest of its range is as it was; copy again to complete it",
                new InterruptedException("interrupted"));
    }

    /** @return whether the block is host memory, which a view reaches without a staging copy */
    private static boolean isHost(MemoryHandleInfo info) {
        return Device.CPU.equals(info.device().kind());
    }
}
