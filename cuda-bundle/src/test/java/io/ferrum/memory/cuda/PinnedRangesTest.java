package io.ferrum.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.lang.foreign.MemorySegment;

import org.junit.jupiter.api.Test;

/** Whether a host segment lies inside a pinned chunk: every boundary, partial overlaps, releases. */
class PinnedRangesTest {

    private static MemorySegment at(long address, long bytes) {
        return MemorySegment.ofAddress(address).reinterpret(bytes);
    }

    @Test
    void aSegmentIsPinnedExactlyWhenItLiesInsideOneRange() {
        PinnedRanges p = new PinnedRanges();
        p.add(1000, 100);
        p.add(1100, 100); // adjacent, a chunk of its own
        p.add(5000, 10);
        for (long start = 900; start <= 1300; start++) {
            for (long bytes = 1; bytes <= 120; bytes += 7) {
                boolean inside = start >= 1000 && start + bytes <= 1100 || start >= 1100 && start + bytes <= 1200;
                assertEquals(inside, p.contains(at(start, bytes), bytes), start + " + " + bytes);
            }
        }
        assertFalse(p.contains(MemorySegment.ofArray(new byte[10]), 10), "a heap array is never pinned");
        assertFalse(p.contains(at(Long.MAX_VALUE - 4, 8), 8));
    }

    @Test
    void aReleasedRangeIsNoLongerPinned() {
        PinnedRanges p = new PinnedRanges();
        p.add(4096, 4096);
        p.remove(4096);
        assertFalse(p.contains(at(4096, 16), 16));
        assertFalse(p.contains(at(6000, 16), 16));
    }
}
