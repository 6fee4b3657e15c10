package io.ferrum.memory.pool;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

import org.junit.jupiter.api.AfterEach;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.HookedUpstream.Call;
import io.ferrum.memory.pool.HookedUpstream.Pause;

/**
 * What the race tests share: managers over {@link HookedUpstream} closed after each test, threads
 * started and joined, waits for a thread to park, and a pool lock held by a paused compaction.
 */
abstract class RaceHarness {
    static final long KiB = 1024;
    static final long MiB = 1024 * KiB;
    static final Device CPU = Device.cpu();

    protected final List<AutoCloseable> toClose = new ArrayList<>();
    protected final List<Thread> threads = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        for (Thread t : threads) {
            t.join(TimeUnit.SECONDS.toMillis(30));
        }
        for (AutoCloseable c : toClose) {
            c.close();
        }
    }

    static MemoryPoolConfig pool(long initial, long growth, long alignment) {
        return MemoryPoolConfig.builder().initialSize(initial).growthIncrement(growth).alignment(alignment).build();
    }

    static MemoryManagerConfig config(MemoryPoolConfig general) {
        return MemoryManagerConfig.defaults().withPoolConfig(MemoryType.GENERAL, general).withAutoGc(false, 0.85);
    }

    PooledMemoryManager manager(DeviceUpstream up, MemoryManagerConfig cfg, PoolSettings settings, HostStreamManager streams) {
        PooledMemoryManager m = PooledMemoryManager.create(up, cfg, settings, streams);
        toClose.add(0, m);
        return m;
    }

    PooledMemoryManager manager(DeviceUpstream up, PoolSettings settings) {
        return manager(up, config(pool(MiB, MiB, 256)), settings, null);
    }

    HostStreamManager streams() {
        HostStreamManager s = new HostStreamManager(CPU);
        toClose.add(s);
        return s;
    }

    /** Starts {@code body} on a new thread; its outcome is the returned future. */
    <T> CompletableFuture<T> start(String name, Callable<T> body) {
        CompletableFuture<T> out = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                out.complete(body.call());
            } catch (Throwable e) {
                out.completeExceptionally(e);
            }
        }, name);
        threads.add(t);
        t.start();
        return out;
    }

    /** Waits (at most 30 s) until {@code t} is parked or has ended: it waits for a lock, a condition or a growth. */
    static void awaitParked(Thread t) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (t.getState() != Thread.State.WAITING && t.getState() != Thread.State.TIMED_WAITING
                && t.getState() != Thread.State.TERMINATED) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError(t.getName() + " never parked: " + t.getState());
            }
            Thread.onSpinWait();
        }
    }

    /**
     * Waits (at most 30 s) until {@code t} is parked inside {@code method} of the engine's class
     * {@code simpleName}: one snapshot of its stack shows it in {@code LockSupport.park} with that
     * method as its innermost engine frame. Unlike {@link #awaitParked}, a park left over from an
     * earlier wait of the thread (a latch it was let through a moment ago) does not count.
     */
    static void awaitParkedIn(Thread t, String simpleName, String method) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!parkedIn(t.getStackTrace(), simpleName, method)) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError(t.getName() + " never parked in " + simpleName + "." + method + ": " + t.getState());
            }
            Thread.onSpinWait();
        }
    }

    /** As {@link #awaitParkedIn}, or until {@code done} completes (the thread went past that wait). */
    static void awaitParkedInOrDone(Thread t, String simpleName, String method, CompletableFuture<?> done) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!done.isDone() && !parkedIn(t.getStackTrace(), simpleName, method)) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError(t.getName() + " neither parked in " + simpleName + "." + method
                        + " nor got past it: " + t.getState());
            }
            Thread.onSpinWait();
        }
    }

    private static boolean parkedIn(StackTraceElement[] stack, String simpleName, String method) {
        if (stack.length == 0 || !stack[0].getMethodName().equals("park")) {
            return false;
        }
        for (StackTraceElement e : stack) {
            if (e.getClassName().startsWith("io.ferrum.")) {
                return e.getClassName().endsWith("." + simpleName) && e.getMethodName().equals(method);
            }
        }
        return false;
    }

    /**
     * @return the lock of {@code m}'s {@code type} pool, for a test that must hold it itself (where a
     *         paused compaction cannot: the lock is taken and let go between steps of the race); read
     *         by reflection, as the engine's rooms are package-private
     */
    static ReentrantLock poolLock(PooledMemoryManager m, MemoryType type) throws ReflectiveOperationException {
        Field pools = m.getClass().getDeclaredField("pools");
        pools.setAccessible(true);
        Object pool = ((Object[]) pools.get(m))[type.ordinal()];
        Field lock = pool.getClass().getDeclaredField("lock");
        lock.setAccessible(true);
        return (ReentrantLock) lock.get(pool);
    }

    /** Waits (at most 30 s) until {@code t} is queued for {@code lock}. */
    static void awaitQueued(ReentrantLock lock, Thread t) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!lock.hasQueuedThread(t)) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError(t.getName() + " never queued for the lock: " + t.getState());
            }
            Thread.onSpinWait();
        }
    }

    /** @return the address of {@code h}'s block (mapped and unmapped again: a mapped block is not cached when freed) */
    static long address(PooledMemoryManager m, MemoryHandle h) {
        long a = m.mapMemory(h, MemoryAccess.READ_ONLY).address();
        m.unmapMemory(h);
        return a;
    }

    /**
     * @return the address of a block of {@code size} that a new thread allocates (and frees into its
     *         own cache): the pool's, never one another thread caches, so it shows whether a block a
     *         thread cached went back to the pool (the figures count a cached block as free either way)
     */
    long addressAnotherThreadGets(PooledMemoryManager m, long size, MemoryType type) throws Exception {
        return start("another thread", () -> {
            MemoryHandle h = m.allocate(size, type, CPU);
            long a = address(m, h);
            m.deallocate(h);
            return a;
        }).get(30, TimeUnit.SECONDS);
    }

    static void fill(PooledMemoryManager m, MemoryHandle h, byte value) {
        MemorySegment s = m.mapMemory(h, MemoryAccess.WRITE_ONLY);
        s.fill(value);
        m.unmapMemory(h);
    }

    /** @return the first byte of {@code h} that is not {@code value}, as "offset=byte", or null if none */
    static String firstOtherThan(PooledMemoryManager m, MemoryHandle h, byte value) {
        MemorySegment s = m.mapMemory(h, MemoryAccess.READ_ONLY);
        try {
            for (long i = 0; i < s.byteSize(); i++) {
                byte b = s.get(ValueLayout.JAVA_BYTE, i);
                if (b != value) {
                    return i + "=" + b;
                }
            }
            return null;
        } finally {
            m.unmapMemory(h);
        }
    }

    /**
     * Makes the {@code type} pool hold a block that defragmentation will slide down, then starts a
     * defragmentation whose first copy pauses: while the pause holds, that pool's lock is taken.
     */
    Pause holdPoolLock(PooledMemoryManager m, HookedUpstream up, MemoryType type) throws InterruptedException {
        MemoryHandle hole = m.allocate(4 * KiB, type, CPU);
        m.allocate(4 * KiB, type, CPU);
        m.deallocate(hole);
        m.trim(); // the freed block leaves this thread's cache: the pool has a hole
        Pause p = up.pauseNext(Call.COPY);
        start("defragment", () -> m.defragment(CPU).toCompletableFuture().get(60, TimeUnit.SECONDS));
        p.awaitArrival();
        return p;
    }
}
