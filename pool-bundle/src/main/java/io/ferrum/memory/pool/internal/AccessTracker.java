package io.ferrum.memory.pool.internal;

import java.time.Instant;

import io.ferrum.memory.api.AccessPatternType;
import io.ferrum.memory.api.MemoryAccessStats;

/**
 * Access statistics of one block and the pattern detected from them.
 *
 * <p>Rules, in order: fewer than {@value #MIN_SAMPLES} accesses is UNKNOWN; a run of at least
 * {@value #BURST_RUN} accesses, each within {@value #BURST_GAP_NANOS} ns of the previous, after at
 * least {@value #IDLE_NANOS} ns without any, is BURST (while the run lasts); otherwise, of the
 * accesses after the first, the share that started where the previous one ended decides: at least
 * 75 % SEQUENTIAL, at most 25 % RANDOM, in between MIXED.
 */
final class AccessTracker {
    static final int MIN_SAMPLES = 4;
    static final int BURST_RUN = 8;
    static final long BURST_GAP_NANOS = 1_000_000L;
    static final long IDLE_NANOS = 50_000_000L;

    private long reads;
    private long writes;
    private long readBytes;
    private long writeBytes;
    private long lastEnd = -1;
    private long sequentialHits;
    private long lastNanos;
    private long run;
    private boolean runAfterIdle;

    AccessTracker(long createdNanos) {
        this.lastNanos = createdNanos;
    }

    synchronized void record(boolean write, long offset, long length, long nanos) {
        long count = reads + writes;
        if (count > 0 && offset == lastEnd) {
            sequentialHits++;
        }
        long gap = nanos - lastNanos;
        if (count > 0 && gap <= BURST_GAP_NANOS) {
            run++;
        } else {
            run = 1;
            runAfterIdle = gap >= IDLE_NANOS;
        }
        lastNanos = nanos;
        lastEnd = offset + length;
        if (write) {
            writes++;
            writeBytes += length;
        } else {
            reads++;
            readBytes += length;
        }
    }

    synchronized MemoryAccessStats snapshot(Instant epoch, long epochNanos) {
        return new MemoryAccessStats(reads, writes, reads == 0 ? 0 : readBytes / reads,
                writes == 0 ? 0 : writeBytes / writes, epoch.plusNanos(lastNanos - epochNanos), pattern());
    }

    private AccessPatternType pattern() {
        long count = reads + writes;
        if (count < MIN_SAMPLES) {
            return AccessPatternType.UNKNOWN;
        }
        if (runAfterIdle && run >= BURST_RUN) {
            return AccessPatternType.BURST;
        }
        double share = (double) sequentialHits / (double) (count - 1);
        if (share >= 0.75) {
            return AccessPatternType.SEQUENTIAL;
        }
        if (share <= 0.25) {
            return AccessPatternType.RANDOM;
        }
        return AccessPatternType.MIXED;
    }
}
