package io.ferrum.memory.cuda;

import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;

/**
 * The page-locked ranges this bundle holds (start address to end), so that a copy from or to a
 * native segment inside one goes straight to the DMA engine instead of through the staging ring.
 * Pageable memory, heap arrays and pinned memory of other libraries take the ring.
 *
 * <p>Only a segment confined to the calling thread goes straight ({@link #direct}): the DMA engine
 * reads and writes the bytes by address, through JCuda, outside any FFM access to the segment, so
 * nothing would stop another thread from closing a shared view meanwhile, freeing the block behind
 * it, and the pool from handing those bytes to the block's next owner while the DMA still moves
 * them. A confined view (a {@code withMapped} action's) can be closed only by the thread that is
 * inside the copy, and its block is pinned for the action. Every other segment goes through the
 * ring, whose {@code MemorySegment.copy} holds the segment's scope, so a close meanwhile fails the
 * copy instead.
 */
final class PinnedRanges {
    /** Never started: a segment accessible by it is accessible by any thread (shared or global). */
    private static final Thread ANY_THREAD = new Thread(() -> { });

    private final ConcurrentSkipListMap<Long, Long> ranges = new ConcurrentSkipListMap<>();

    void add(long start, long bytes) {
        ranges.put(start, start + bytes);
    }

    void remove(long start) {
        ranges.remove(start);
    }

    /** @return true when {@code bytes} of {@code segment} lie inside one pinned range */
    boolean contains(MemorySegment segment, long bytes) {
        if (!segment.isNative()) {
            return false;
        }
        long start = segment.address();
        Map.Entry<Long, Long> e = ranges.floorEntry(start);
        return e != null && start + bytes <= e.getValue() && start + bytes >= start;
    }

    /**
     * @return true when {@code bytes} of {@code segment} lie inside one pinned range and the segment
     *         is confined to the calling thread, so that no other thread can end it during a DMA by
     *         address (see the class comment)
     */
    boolean direct(MemorySegment segment, long bytes) {
        return segment.isAccessibleBy(Thread.currentThread()) && !segment.isAccessibleBy(ANY_THREAD)
                && contains(segment, bytes);
    }
}
