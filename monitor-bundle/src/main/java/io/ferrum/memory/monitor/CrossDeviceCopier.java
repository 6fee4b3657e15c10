package io.ferrum.memory.monitor;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.Executor;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.StreamHandle;

/**
 * Copies between blocks of two different managers, through host-mapped views of both: a copy within
 * one manager never comes here (that manager copies it itself).
 *
 * <p>Invariants: a copy is checked in full ({@link #plan}: both blocks live, both ranges inside their
 * blocks, both managers able to map) before a byte moves; it closes only the views it opened, so a
 * block the caller had mapped stays mapped; an asynchronous copy runs on the monitor's worker pool,
 * and stream ordering applies within one device only.
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

    private final Executor workers;

    CrossDeviceCopier(Executor workers) {
        this.workers = workers;
    }

    /**
     * @throws InvalidHandleException        if a block is no longer live on its manager
     * @throws InvalidMemoryRequestException if a range falls outside its block, or a manager cannot map
     */
    Route plan(MemoryTransfer transfer, DeviceMemoryManager src, DeviceMemoryManager dst) {
        MemoryHandleInfo si = src.handleInfo(transfer.src()).orElseThrow(() -> new InvalidHandleException(
                transfer.src(), "Handle " + transfer.src() + " is no longer live on " + src.device()));
        MemoryHandleInfo di = dst.handleInfo(transfer.dst()).orElseThrow(() -> new InvalidHandleException(
                transfer.dst(), "Handle " + transfer.dst() + " is no longer live on " + dst.device()));
        checkRange(si, transfer.srcOffset(), transfer.size(), "source");
        checkRange(di, transfer.dstOffset(), transfer.size(), "destination");
        if (!(src instanceof AdvancedMemoryManager) || !(dst instanceof AdvancedMemoryManager)) {
            throw new InvalidMemoryRequestException("A copy from " + si.device() + " to " + di.device()
                    + " needs both managers to map memory (AdvancedMemoryManager)");
        }
        return new Route(src, dst, si, di);
    }

    private static void checkRange(MemoryHandleInfo info, long offset, long size, String what) {
        if (size > info.size() || offset > info.size() - size) {
            throw new InvalidMemoryRequestException("Copy of " + size + " bytes at " + what + " offset " + offset
                    + " falls outside " + what + " block " + info.handle() + " of " + info.size() + " bytes on "
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
        AdvancedMemoryManager src = (AdvancedMemoryManager) r.src();
        AdvancedMemoryManager dst = (AdvancedMemoryManager) r.dst();
        boolean srcWasMapped = r.srcInfo().mapped();
        MemorySegment from = src.mapMemory(t.src(), MemoryAccess.READ_ONLY);
        try {
            // Read after mapping the source, not before: the two handles of one MemoryMapping (two
            // managers, one block) share one mapping, so mapping the source mapped the destination
            // too, and unmapping both would close the shared views twice ("not mapped").
            boolean dstWasMapped = dst.handleInfo(t.dst()).map(MemoryHandleInfo::mapped).orElse(false);
            MemorySegment to = dst.mapMemory(t.dst(), MemoryAccess.WRITE_ONLY);
            try {
                MemorySegment.copy(from, t.srcOffset(), to, t.dstOffset(), t.size());
            } finally {
                if (!dstWasMapped) {
                    dst.unmapMemory(t.dst());
                }
            }
        } finally {
            if (!srcWasMapped) {
                src.unmapMemory(t.src());
            }
        }
    }
}
