package io.ferrum.memory.cuda;

import java.lang.foreign.MemorySegment;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;

/**
 * The page-locked ranges this bundle holds (start address to end), so that a copy from or to a
 * native segment inside one goes straight to the DMA engine instead of through the staging ring.
 * Pageable memory, heap arrays and pinned memory of other libraries take the ring.
 */
final class PinnedRanges {
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
}
