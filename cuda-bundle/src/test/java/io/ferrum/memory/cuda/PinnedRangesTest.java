package io.ferrum.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.atomic.AtomicBoolean;

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

    /**
     * A DMA by address holds no FFM access to the segment, so only a view that no other thread can
     * close goes straight: a shared view of a pinned block (mapMemory's) could be closed and its block
     * freed and handed to another owner while the DMA still moved its bytes.
     */
    @Test
    void onlyAViewConfinedToTheCallerGoesStraightToTheDmaEngine() throws Exception {
        PinnedRanges p = new PinnedRanges();
        p.add(1 << 20, 1 << 20);
        MemorySegment inside = at((1 << 20) + 64, 4096);
        try (Arena shared = Arena.ofShared(); Arena confined = Arena.ofConfined()) {
            MemorySegment sharedView = inside.reinterpret(shared, null);
            MemorySegment confinedView = inside.reinterpret(confined, null);
            assertTrue(p.contains(sharedView, 4096) && p.contains(inside, 4096), "both lie in the pinned range");
            assertFalse(p.direct(sharedView, 4096), "a shared view (mapMemory's) another thread may close takes the ring");
            assertFalse(p.direct(inside, 4096), "a global segment, over memory a free may hand on, takes the ring");
            assertTrue(p.direct(confinedView, 4096), "a confined view (withMapped's) goes straight");
            assertFalse(p.direct(at((2 << 20) - 64, 4096).reinterpret(confined, null), 4096), "but only inside the range");
            AtomicBoolean elsewhere = new AtomicBoolean(true);
            Thread other = new Thread(() -> elsewhere.set(p.direct(sharedView, 4096)));
            other.start();
            other.join();
            assertFalse(elsewhere.get(), "nor from another thread");
        }
        try (Arena outside = Arena.ofConfined()) {
            assertFalse(p.direct(outside.allocate(4096), 4096), "pageable memory takes the ring");
        }
    }
}
