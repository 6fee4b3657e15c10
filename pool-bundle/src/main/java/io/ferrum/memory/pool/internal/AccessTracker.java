package io.ferrum.memory.pool.internal;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.time.Instant;

import io.ferrum.memory.api.AccessPatternType;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryAccessStats;

/**
 * Access statistics of one block and the pattern detected from them.
 *
 * <p>Rules, in order: fewer than {@value #MIN_SAMPLES} accesses is UNKNOWN; a run of at least
 * {@value #BURST_RUN} accesses, each within {@value #BURST_GAP_NANOS} ns of the previous, after at
 * least {@value #IDLE_NANOS} ns without any, is BURST (while the run lasts); otherwise, of the
 * accesses after the first, the share that started where the previous one ended decides: at least
 * 75 % SEQUENTIAL, at most 25 % RANDOM, in between MIXED.
 *
 * <p><b>The lock.</b> Records and snapshots run under a lock of one word ({@link #busy}): taken by one
 * compare-and-set, given back by a volatile store of 0. An uncontended {@code synchronized} costs two
 * atomic operations on the object's header, and a {@code withMapped} with statistics on paid four of
 * them for its two records, more than the rest of the call (docs/PERFORMANCE.md item 22). Nothing
 * inside the lock waits or calls out, so a waiter spins briefly, then yields.
 *
 * <p>Every {@code finally} gives the lock back by writing the field itself, not through a method: a
 * call there needs stack, so a {@code StackOverflowError} in the caller could land on it and leave
 * the lock held for good (a monitor is released by the JVM as the stack unwinds; this word is not).
 * Once the compare-and-set has succeeded, only returns lead into the {@code try}, and returns take
 * no new stack.
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
    /** 1 while a record or a snapshot runs: taken through {@link #BUSY}, given back by storing 0. */
    private volatile int busy;

    private static final VarHandle BUSY;

    static {
        try {
            BUSY = MethodHandles.lookup().findVarHandle(AccessTracker.class, "busy", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /** Spins a waiter makes before it yields between tries. */
    private static final int SPINS = 64;

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
    void record(boolean write, long offset, long length, long nanos, long createdNanos) {
        lock();
        try {
            add(write, offset, length, nanos, createdNanos);
        } finally {
            busy = 0;
        }
    }

    /**
     * Records a view of the whole block opened for {@code access}: a read unless write-only, then a
     * write unless read-only, under one acquisition of the lock.
     *
     * @param createdNanos when the block was allocated (the start of the first gap)
     */
    void recordView(MemoryAccess access, long length, long nanos, long createdNanos) {
        lock();
        try {
            if (access != MemoryAccess.WRITE_ONLY) {
                add(false, 0, length, nanos, createdNanos);
            }
            if (access != MemoryAccess.READ_ONLY) {
                add(true, 0, length, nanos, createdNanos);
            }
        } finally {
            busy = 0;
        }
    }

    private void add(boolean write, long offset, long length, long nanos, long createdNanos) {
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
    MemoryAccessStats snapshot(Instant epoch, long epochNanos, long createdNanos) {
        long r;
        long w;
        long rb;
        long wb;
        long last;
        AccessPatternType pattern;
        lock();
        try {
            r = reads;
            w = writes;
            rb = readBytes;
            wb = writeBytes;
            last = r + w == 0 ? createdNanos : lastNanos;
            pattern = pattern();
        } finally {
            busy = 0;
        }
        return new MemoryAccessStats(r, w, r == 0 ? 0 : rb / r, w == 0 ? 0 : wb / w,
                epoch.plusNanos(last - epochNanos), pattern);
    }

    /** Takes the lock: one compare-and-set when free. */
    void lock() {
        if (!BUSY.compareAndSet(this, 0, 1)) {
            lockContended();
        }
    }

    private void lockContended() {
        int tries = 0;
        while (!BUSY.compareAndSet(this, 0, 1)) {
            if (++tries < SPINS) {
                Thread.onSpinWait();
            } else {
                Thread.yield();
            }
        }
    }

    /** @return whether a record or a snapshot holds the lock now (for tests) */
    boolean held() {
        return busy != 0;
    }

    /**
     * Gives the lock back (for tests; the tracker's own {@code finally} blocks store the field
     * directly, see the class comment). The volatile store publishes what was written under the lock.
     */
    void unlock() {
        busy = 0;
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
