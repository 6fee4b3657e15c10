package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryAccessStats;

/**
 * The tracker's one-word lock ({@link AccessTracker#lock}) and the view record: a record or a
 * snapshot waits while the lock is held, a stack overflow in the caller leaves the lock free, counts
 * from racing threads add up, and a view's record equals its read and write recorded one after the
 * other.
 */
class AccessTrackerTest {
    private static final Instant EPOCH = Instant.EPOCH;

    private static MemoryAccessStats stats(AccessTracker t) {
        return t.snapshot(EPOCH, 0, 0);
    }

    /**
     * Waits (at most 30 s) until {@code t} spins in the tracker's lock, which the test holds: seen in
     * its stack, not guessed from its being alive after a short wait (a slow machine keeps a thread
     * that never waits alive as long).
     */
    private static void awaitSpinningForTheLock(Thread t, String what) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            for (StackTraceElement e : t.getStackTrace()) {
                if (e.getClassName().endsWith(".AccessTracker") && e.getMethodName().equals("lockContended")) {
                    return;
                }
            }
            assertTrue(t.isAlive(), what + " ended without waiting for the lock");
            assertTrue(System.nanoTime() < deadline, what + " never waited for the lock: " + t.getState());
            Thread.onSpinWait();
        }
    }

    @Test
    void aRecordWaitsWhileAnotherThreadHoldsTheLockAndLandsAfterIt() throws InterruptedException {
        AccessTracker t = new AccessTracker();
        CountDownLatch started = new CountDownLatch(1);
        t.lock();
        Thread recorder = new Thread(() -> {
            started.countDown();
            t.record(true, 0, 64, 10, 0);
        });
        try {
            recorder.start();
            started.await();
            awaitSpinningForTheLock(recorder, "the record");
        } finally {
            t.unlock();
        }
        recorder.join();
        MemoryAccessStats s = stats(t);
        assertEquals(1, s.writeCount());
        assertEquals(0, s.readCount());
        assertEquals(64, s.avgWriteSize());
    }

    /**
     * A {@code StackOverflowError} in a caller must not leave the lock held (a monitor would be
     * released as the stack unwinds; this word only by the code). Forced in a child JVM that runs
     * interpreted, where the overflow lands at every point of the calls in turn: with the unlock a
     * method call in the {@code finally} blocks, 42 of these 180 runs left the lock held.
     */
    @Test
    void aStackOverflowInTheCallerLeavesTheLockFree() throws IOException, InterruptedException {
        String java = ProcessHandle.current().info().command().orElseThrow();
        Process p = new ProcessBuilder(java, "-Xint", "-Xss256k", "-cp", System.getProperty("java.class.path"),
                AccessTrackerOverflowProbe.class.getName(), "60").redirectErrorStream(true).start();
        assertTrue(p.waitFor(2, TimeUnit.MINUTES), "the probe must end");
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        assertEquals(0, p.exitValue(), out);
        assertEquals("held 0 of 180", out);
    }

    @Test
    void aSnapshotWaitsWhileTheLockIsHeld() throws InterruptedException {
        AccessTracker t = new AccessTracker();
        t.record(false, 0, 32, 10, 0);
        MemoryAccessStats[] seen = new MemoryAccessStats[1];
        t.lock();
        Thread reader = new Thread(() -> seen[0] = stats(t));
        try {
            reader.start();
            awaitSpinningForTheLock(reader, "the snapshot");
        } finally {
            t.unlock();
        }
        reader.join();
        assertEquals(1, seen[0].readCount());
    }

    @Test
    void aReadWriteViewRecordsWhatAReadThenAWriteRecord() {
        AccessTracker view = new AccessTracker();
        AccessTracker twice = new AccessTracker();
        for (int i = 0; i < 5; i++) {
            long now = 1_000L * i;
            view.recordView(MemoryAccess.READ_WRITE, 4096, now, 0);
            twice.record(false, 0, 4096, now, 0);
            twice.record(true, 0, 4096, now, 0);
        }
        assertEquals(stats(twice), stats(view));
        assertEquals(5, stats(view).readCount());
        assertEquals(5, stats(view).writeCount());
    }

    @Test
    void aReadOnlyViewRecordsAReadAndAWriteOnlyViewAWrite() {
        AccessTracker t = new AccessTracker();
        t.recordView(MemoryAccess.READ_ONLY, 100, 5, 0);
        t.recordView(MemoryAccess.WRITE_ONLY, 300, 6, 0);
        MemoryAccessStats s = stats(t);
        assertEquals(1, s.readCount());
        assertEquals(1, s.writeCount());
        assertEquals(100, s.avgReadSize());
        assertEquals(300, s.avgWriteSize());
    }

    /** A random stress, kept beside the forced orders above: counts from four racing threads add up. */
    @Test
    void countsFromRacingThreadsAddUp() throws InterruptedException {
        AccessTracker t = new AccessTracker();
        int threads = 4;
        int each = 50_000;
        CountDownLatch go = new CountDownLatch(1);
        List<Thread> all = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            boolean write = i % 2 == 0;
            Thread th = new Thread(() -> {
                try {
                    go.await();
                } catch (InterruptedException e) {
                    return;
                }
                for (int k = 0; k < each; k++) {
                    t.record(write, k, 8, k, 0);
                }
            });
            th.start();
            all.add(th);
        }
        go.countDown();
        for (Thread th : all) {
            th.join();
        }
        MemoryAccessStats s = stats(t);
        assertEquals((long) threads / 2 * each, s.readCount());
        assertEquals((long) threads / 2 * each, s.writeCount());
    }
}
