package io.ferrum.memory.cuda;

import java.lang.foreign.MemorySegment;

/**
 * Heap arrays and pageable memory to and from the device through a ring of page-locked slots,
 * pipelined: while the DMA engine moves one slot, the CPU fills or drains the next. The slots and
 * their fences come from a {@link Channel}, so this class (the order of the steps) runs without a
 * driver in tests.
 *
 * <p>Invariant: the CPU touches a slot only after {@link Channel#await} of that slot's last transfer;
 * every slot has been awaited when {@link #upload}/{@link #download} return, also when one throws,
 * and also when an await throws (the copy's own failure is thrown, the awaits' are suppressed in it).
 * Not thread-safe: its owner holds one ring per caller at a time.
 */
final class StagingRing {

    /** The device side of a ring: its slots and asynchronous transfers through them. */
    interface Channel {
        /** @return the number of slots */
        int slots();

        /** @return bytes per slot */
        long slotBytes();

        /** @return slot {@code i}: page-locked host memory of {@link #slotBytes()} */
        MemorySegment slot(int i);

        /** Starts copying {@code bytes} of slot {@code i} to the device at {@code offset}; records its fence. */
        void upload(int i, long offset, long bytes);

        /** Starts copying {@code bytes} at device {@code offset} into slot {@code i}; records its fence. */
        void download(int i, long offset, long bytes);

        /** Waits until slot {@code i}'s last transfer has completed (at once for a slot never used). */
        void await(int i);
    }

    private StagingRing() {
    }

    /** Copies {@code bytes} of {@code src} to device offsets {@code 0..bytes} through the channel. */
    static void upload(MemorySegment src, long bytes, Channel ch) {
        int slots = ch.slots();
        long slotBytes = ch.slotBytes();
        long n = CopyPlan.pieces(bytes, slotBytes);
        Throwable failed = null;
        try {
            for (long i = 0; i < n; i++) {
                int s = CopyPlan.slot(i, slots);
                long off = CopyPlan.pieceOffset(i, slotBytes);
                long len = CopyPlan.pieceBytes(i, bytes, slotBytes);
                ch.await(s);
                MemorySegment.copy(src, off, ch.slot(s), 0, len);
                ch.upload(s, off, len);
            }
        } catch (RuntimeException | Error e) {
            failed = e;
            throw e;
        } finally {
            awaitAll(ch, Math.min(n, slots), failed);
        }
    }

    /** Copies device offsets {@code 0..bytes} into {@code dst} through the channel. */
    static void download(MemorySegment dst, long bytes, Channel ch) {
        int slots = ch.slots();
        long slotBytes = ch.slotBytes();
        long n = CopyPlan.pieces(bytes, slotBytes);
        Throwable failed = null;
        try {
            // Keep every slot busy: pieces 0..slots-1 start at once, piece i + slots once piece i is drained.
            for (long i = 0; i < Math.min(n, slots); i++) {
                ch.download(CopyPlan.slot(i, slots), CopyPlan.pieceOffset(i, slotBytes),
                        CopyPlan.pieceBytes(i, bytes, slotBytes));
            }
            for (long i = 0; i < n; i++) {
                int s = CopyPlan.slot(i, slots);
                ch.await(s);
                MemorySegment.copy(ch.slot(s), 0, dst, CopyPlan.pieceOffset(i, slotBytes),
                        CopyPlan.pieceBytes(i, bytes, slotBytes));
                long next = i + slots;
                if (next < n) {
                    ch.download(s, CopyPlan.pieceOffset(next, slotBytes), CopyPlan.pieceBytes(next, bytes, slotBytes));
                }
            }
        } catch (RuntimeException | Error e) {
            failed = e;
            throw e;
        } finally {
            awaitAll(ch, Math.min(n, slots), failed);
        }
    }

    /**
     * Awaits every used slot, also after one await fails, so that no transfer is in flight on return.
     * A failure is added to {@code failed} (the copy's own, the cause) when there is one, else the
     * first is thrown once every slot was awaited.
     */
    private static void awaitAll(Channel ch, long used, Throwable failed) {
        Throwable first = failed;
        for (int s = 0; s < used; s++) {
            try {
                ch.await(s);
            } catch (RuntimeException | Error e) {
                if (first == null) {
                    first = e;
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        if (first != failed) {
            if (first instanceof Error e) {
                throw e;
            }
            throw (RuntimeException) first;
        }
    }
}
