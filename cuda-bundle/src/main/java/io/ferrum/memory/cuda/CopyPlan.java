package io.ferrum.memory.cuda;

/**
 * How a copy is cut into pieces; pure arithmetic, no driver.
 *
 * <p><b>Staging</b> ({@link #pieces}, {@link #pieceOffset}, {@link #pieceBytes}, {@link #slot}):
 * {@code bytes} go through a ring of {@code slots} buffers of {@code slotBytes} each; piece
 * {@code i} covers {@code [i * slotBytes, min((i + 1) * slotBytes, bytes))} and uses slot
 * {@code i % slots}, so a slot is reused only after {@code slots - 1} other pieces, which is the
 * depth of the pipeline.
 *
 * <p><b>Overlap</b> ({@link #overlaps}, {@link #forward}): the driver's copies have no memmove
 * semantics, so a copy within one chunk whose ranges overlap goes through a bounce buffer in pieces:
 * front to back when the destination lies below the source, back to front otherwise. Each piece is
 * read whole into the bounce buffer before it is written, and a piece's write reaches only bytes
 * already read (front to back: below the source's unread part; back to front: above it).
 */
final class CopyPlan {
    private CopyPlan() {
    }

    /** @return how many pieces of at most {@code slotBytes} cover {@code bytes}; 0 for 0 bytes */
    static long pieces(long bytes, long slotBytes) {
        if (bytes < 0 || slotBytes <= 0) {
            throw new IllegalArgumentException("bytes " + bytes + " and slot size " + slotBytes
                    + ": need bytes >= 0 and a slot size > 0");
        }
        return bytes == 0 ? 0 : (bytes - 1) / slotBytes + 1;
    }

    /** @return the offset of piece {@code i} in the copy */
    static long pieceOffset(long i, long slotBytes) {
        return i * slotBytes;
    }

    /** @return the length of piece {@code i} of a copy of {@code bytes} */
    static long pieceBytes(long i, long bytes, long slotBytes) {
        return Math.min(slotBytes, bytes - i * slotBytes);
    }

    /** @return the ring slot piece {@code i} goes through */
    static int slot(long i, int slots) {
        return (int) (i % slots);
    }

    /** @return true when {@code [src, src + bytes)} and {@code [dst, dst + bytes)} share a byte */
    static boolean overlaps(long src, long dst, long bytes) {
        return bytes > 0 && src < dst + bytes && dst < src + bytes;
    }

    /** @return true when overlapping pieces must go front to back (destination below source) */
    static boolean forward(long src, long dst) {
        return dst < src;
    }

    /**
     * @param k        the k-th piece copied (0 first)
     * @param forward  the direction from {@link #forward}
     * @return the offset, within the copy, of the k-th piece copied
     */
    static long overlapPieceOffset(long k, long bytes, long pieceBytes, boolean forward) {
        if (forward) {
            return k * pieceBytes;
        }
        long n = pieces(bytes, pieceBytes);
        return (n - 1 - k) * pieceBytes;
    }
}
