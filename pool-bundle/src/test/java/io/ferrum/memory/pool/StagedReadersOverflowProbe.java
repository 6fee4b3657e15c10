package io.ferrum.memory.pool;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Function;

import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.StagingRacesTest.StagedUpstream;

/**
 * Run in a child JVM by {@link StagedReadersOverflowTest}, as {@code ScopeOverflowProbe} is: a caller
 * recurses and, at each depth, runs a READ_ONLY {@code withMapped} action on a block of memory the
 * CPU cannot address inside a {@code try} that catches {@code StackOverflowError}, so that as the
 * stack left shrinks frame by frame the overflow lands at every point of the action's start and end
 * in turn; each run starts one small frame deeper. As each action ends a helper thread holds the
 * pool's lock (the action asks for it and returns once it is held), and lets it go once the caller
 * has come back or queued for it, then before the caller's next action: an end that takes the lock
 * waits for it the long way, as under traffic. After each run, from a fresh thread: whether the
 * caller was left holding the pool's lock, whether a reader's share was left on the block (a write
 * is refused for good then), and whether its free goes through. Prints one line: {@code readers:
 * lock left held 0/40; share left 0/40; free refused 0/40}.
 */
public final class StagedReadersOverflowProbe {
    private static PooledMemoryManager m;
    private static MemoryHandle h;
    private static ReentrantLock lock;
    private static Thread caller;
    private static final MemorySegment SEG = MemorySegment.ofArray(new byte[64]);

    /** Set by the action: the helper is to take the pool's lock now. */
    private static volatile boolean wantLock;
    /** Set by the helper while it holds the pool's lock. */
    private static volatile boolean helperHolds;
    /** Set by the caller once its call came back (returned or threw). */
    private static volatile boolean ended;
    private static volatile boolean done;

    /**
     * The action: asks the helper to hold the pool's lock as it ends, and waits for it without a call
     * (a field read needs no stack); skipped when the caller holds the lock itself (left held by an
     * overflow), so that the helper never waits for it.
     */
    private static final Function<MemorySegment, Object> ACTION = v -> {
        if (lock.isHeldByCurrentThread()) {
            return v;
        }
        wantLock = true;
        while (!helperHolds) {
            // spin: no call
        }
        return v;
    };

    private StagedReadersOverflowProbe() {
    }

    private static void recurse(long depth) {
        ended = false;
        try {
            m.withMapped(h, MemoryAccess.READ_ONLY, ACTION);
        } catch (StackOverflowError caughtByTheCaller) {
            // a caller that survives an overflow goes on
        }
        ended = true;
        while (helperHolds) {
            // the next action starts with the lock free: spin, no call
        }
        recurse(depth + 1);
    }

    /** Takes {@code frames} small frames first, so that each run's overflow lands elsewhere. */
    private static void pad(int frames) {
        if (frames > 0) {
            pad(frames - 1);
        } else {
            recurse(0);
        }
    }

    /** Holds the pool's lock from each action's request until the caller came back or queued for it. */
    private static void help() {
        while (!done) {
            if (!wantLock) {
                Thread.yield();
                continue;
            }
            wantLock = false;
            lock.lock();
            helperHolds = true;
            while (!ended && !lock.hasQueuedThread(caller)) {
                Thread.onSpinWait();
            }
            lock.unlock();
            helperHolds = false;
        }
    }

    public static void main(String[] args) throws Exception {
        int runs = Integer.parseInt(args[0]);
        StagedUpstream up = new StagedUpstream();
        m = PooledMemoryManager.create(up, RaceHarness.config(RaceHarness.pool(RaceHarness.MiB, RaceHarness.MiB, 256)),
                PoolSettings.defaults().withThreadCache(0), null);
        lock = RaceHarness.poolLock(m, MemoryType.GENERAL);
        caller = Thread.currentThread();
        Thread helper = new Thread(StagedReadersOverflowProbe::help, "lock holder");
        helper.setDaemon(true);
        helper.start();
        int lockHeld = 0;
        int shareLeft = 0;
        int freeRefused = 0;
        String said = null;
        for (int i = 0; i < runs; i++) {
            h = m.allocate(1000, StagingRacesTest.GPU);
            try {
                pad(i);
            } catch (StackOverflowError expected) {
                // the end of the run
            }
            if (lock.isHeldByCurrentThread()) {
                lockHeld++;
                while (lock.isHeldByCurrentThread()) {
                    lock.unlock(); // so that the probe goes on and counts the rest
                }
            }
            MemoryHandle run = h;
            Throwable write = CompletableFuture.supplyAsync(() -> {
                m.write(run, 0, SEG);
                return null;
            }).handle((r, e) -> e).get(30, TimeUnit.SECONDS);
            if (write != null) {
                shareLeft++;
                said = String.valueOf(write.getCause() != null ? write.getCause() : write);
            }
            Throwable free = CompletableFuture.supplyAsync(() -> {
                m.deallocate(run);
                return null;
            }).handle((r, e) -> e).get(30, TimeUnit.SECONDS);
            if (free != null) {
                freeRefused++;
                said = String.valueOf(free.getCause() != null ? free.getCause() : free);
            }
        }
        done = true;
        System.out.println("readers: lock left held " + lockHeld + "/" + runs + "; share left " + shareLeft + "/"
                + runs + "; free refused " + freeRefused + "/" + runs);
        if (said != null) {
            System.out.println("    the block's next call said: " + said);
        }
        Thread.currentThread().interrupt(); // close without waiting for what never leaves
        m.close();
        Thread.interrupted();
    }
}
