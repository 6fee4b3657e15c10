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

    /**
     * Starts over for a new allocation of the same block (a block taken from a thread cache keeps its
     * tracker, so that the hot path stores no new reference). Writes nothing when the tracker has
     * recorded nothing: trackers of two threads' blocks may share a cache line. Called by the
     * allocating thread before the handle is published; a reader holding the block's previous handle
     * re-checks the handle after its snapshot.
     */
    void reset() {
        if (reads == 0 && writes == 0) {
            return;
        }
        reads = 0;
        writes = 0;
        readBytes = 0;
        writeBytes = 0;
        lastEnd = -1;
        sequentialHits = 0;
        lastNanos = 0;
        run = 0;
        runAfterIdle = false;
    }

    /** @param createdNanos when the block was allocated (the start of the first gap) */
    synchronized void record(boolean write, long offset, long length, long nanos, long createdNanos) {
        long count = reads + writes;
        if (count == 0) {
            lastNanos = createdNanos;
        }
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

    /** @param createdNanos when the block was allocated (the last access time until there is one) */
    synchronized MemoryAccessStats snapshot(Instant epoch, long epochNanos, long createdNanos) {
        long last = reads + writes == 0 ? createdNanos : lastNanos;
        return new MemoryAccessStats(reads, writes, reads == 0 ? 0 : readBytes / reads,
                writes == 0 ? 0 : writeBytes / writes, epoch.plusNanos(last - epochNanos), pattern());
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
