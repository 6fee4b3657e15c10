package io.ferrum.memory.pool.internal;

import java.time.Instant;

import io.ferrum.memory.api.MemoryAccess;

/**
 * Run in a child JVM by {@link AccessTrackerTest}: recurses into a tracker's record, view record or
 * snapshot until the stack overflows, and prints how many trackers were left with their lock held.
 * Each run first takes a few more small frames than the one before, so that the overflow lands at
 * every point of the calls in turn. Interpreted ({@code -Xint}), a call in a {@code finally} needs
 * stack of its own, so an unlock by a call would be hit (PERFORMANCE item 22).
 */
public final class AccessTrackerOverflowProbe {
    private static AccessTracker tracker;
    private static int mode;

    private AccessTrackerOverflowProbe() {
    }

    private static void recurse(long depth) {
        switch (mode) {
            case 0 -> tracker.record(true, 0, 8, depth, 0);
            case 1 -> tracker.recordView(MemoryAccess.READ_WRITE, 8, depth, 0);
            default -> tracker.snapshot(Instant.EPOCH, 0, 0);
        }
        recurse(depth + 1);
    }

    /** Takes {@code frames} small frames, then starts the recursion. */
    private static void pad(int frames) {
        if (frames > 0) {
            pad(frames - 1);
        } else {
            recurse(0);
        }
    }

    /** @param args the runs per mode */
    public static void main(String[] args) {
        int runs = Integer.parseInt(args[0]);
        int held = 0;
        for (mode = 0; mode < 3; mode++) {
            for (int i = 0; i < runs; i++) {
                tracker = new AccessTracker();
                try {
                    pad(i);
                } catch (StackOverflowError expected) {
                    // the point of the run
                }
                if (tracker.held()) {
                    held++;
                }
            }
        }
        System.out.println("held " + held + " of " + 3 * runs);
    }
}
