package io.ferrum.memory.pool.internal;

import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * {@link System#nanoTime()} to about a millisecond, read as one volatile load.
 *
 * <p>Reading the system clock is expensive on virtual machines, a large share of an allocation
 * served from a thread cache (docs/PERFORMANCE.md item 15); the allocation time of a block needs no better than
 * milliseconds. One daemon thread ("ferrum-coarse-clock") refreshes the value every millisecond
 * while at least one manager uses it and ends when the last one is closed, so a stopped or updated
 * pool bundle leaves no thread behind.
 */
final class CoarseClock {
    private static final long TICK_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
    private static volatile long now = System.nanoTime();
    private static int users;
    private static Thread ticker;

    private CoarseClock() {
    }

    /** @return nanoTime as of at most about a millisecond ago (exact while no manager is open) */
    static long nanos() {
        return now;
    }

    /**
     * A manager starts using the clock. All or nothing: the use is counted only once the thread runs,
     * so a thread that cannot start ({@code OutOfMemoryError} at the JVM's thread limit, a stack
     * overflow) counts no use, and the next manager starts one. Counted first, as before, such a
     * failure left a use that no manager gives back: no manager ever started the thread again, and
     * the clock stood still for every later one.
     */
    static synchronized void acquire() {
        now = System.nanoTime();
        if (users == 0) {
            Thread t = new Thread(CoarseClock::tick, "ferrum-coarse-clock");
            t.setDaemon(true);
            t.start(); // it waits for this monitor before it reads ticker
            ticker = t;
        }
        users++;
    }

    /** A manager stops using the clock; the last one ends the ticking thread. */
    static synchronized void release() {
        if (users > 0 && --users == 0) {
            Thread t = ticker;
            ticker = null;
            LockSupport.unpark(t);
        }
    }

    /** @return how many managers use the clock (for tests) */
    static synchronized int users() {
        return users;
    }

    /** @return true while a manager uses the clock (for tests) */
    static synchronized boolean running() {
        return ticker != null && ticker.isAlive();
    }

    private static void tick() {
        Thread self = Thread.currentThread();
        while (true) {
            synchronized (CoarseClock.class) {
                if (ticker != self) {
                    return;
                }
            }
            now = System.nanoTime();
            LockSupport.parkNanos(TICK_NANOS);
        }
    }
}
