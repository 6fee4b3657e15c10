package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Field;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolLog;
import io.ferrum.memory.pool.PoolSettings;

/**
 * {@link PoolEngine#closeIfUnused} against names published outside the pools' locks (here from a
 * thread cache, {@code Allocator.fromCache}): a name published between a decision's look and its
 * end is refused when the decision closes and handed out when it refuses; and of two decisions at
 * once, the first to refuse must not settle the manager while the other still decides. The window
 * is held by the test holding the {@link Lifecycle}'s monitor, which the decision's end needs.
 */
class ConcurrentCloseIfUnusedTest {
    static final long KiB = 1024;
    static final long MiB = 1024 * KiB;

    @Test
    void aRefusedDecisionDoesNotSettleAnotherStillDeciding() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        MemoryManagerConfig config = MemoryManagerConfig.defaults().withAutoGc(false, 0.85).withPoolConfig(
                MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).alignment(256).build());
        PoolEngine m = new PoolEngine(up, config, PoolSettings.defaults(), null);
        Lifecycle lifecycle = field(m, "lifecycle");
        Pool[] pools = field(m, "pools");
        ReentrantLock first = pools[0].lock;
        MemoryHandle live = m.allocate(4 * KiB, Device.cpu());

        // A takes the first pool and waits for the second, which the test holds; B, deciding too, waits
        // for the first. (Not by their places in a lock's queue: a decider polls a lock, so that it sees
        // a defragmentation take it.)
        ReentrantLock second = pools[1].lock;
        second.lock();
        Started a = started(() -> m.closeIfUnused());
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!first.isLocked()) {
            assertTrue(System.nanoTime() < deadline, "A never took the first pool");
            Thread.onSpinWait();
        }
        Started b = started(() -> m.closeIfUnused());
        awaitQueued(first, b.thread);

        MemoryHandle handed = null;
        Throwable refused = null;
        synchronized (lifecycle) {
            second.unlock();
            awaitBlockedInDecided(a.thread); // A looked under every lock (a live block) and waits to decide
            m.deallocate(live); // into this thread's cache: not live
            assertEquals(2, deciding(lifecycle), "B decides too");
            while (deciding(lifecycle) == 2) {
                lifecycle.wait(); // A refuses (its decided() notifies), then lets B take the locks
            }
            // B decides after A let go of the locks: now (blocked on this monitor) or already (it closed,
            // which leaves unsettled as it was). Either way A's refusal must not have cleared it.
            assertTrue(lifecycle.unsettled, "A's refusal settled the manager while B still decided");
            if (deciding(lifecycle) == 1) {
                // B has not decided yet: the manager's state is A's decision alone. (A's answer is whether
                // the manager is closed as it answers, B's close included: B may take the pools' locks
                // and this monitor before the test wakes, so the answer is not asserted.)
                assertFalse(lifecycle.closed, "A saw the live block");
            }
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!b.result.isDone() && !blockedInDecided(b.thread)) {
                assertTrue(System.nanoTime() < until, "B never decided");
                Thread.onSpinWait();
            }
            try {
                handed = m.allocate(4 * KiB, Device.cpu()); // named from the cache, outside the locks
            } catch (RuntimeException e) {
                refused = e;
            }
        }
        a.result.get(30, TimeUnit.SECONDS); // A ended without a throw
        assertTrue(b.result.get(30, TimeUnit.SECONDS), "B closed the manager");
        assertTrue(m.isClosed());
        assertNull(handed, "a handle was handed out by a manager that closed without seeing it");
        assertInstanceOf(DeviceUnavailableException.class, refused);
        assertFalse(lifecycle.unsettled && !lifecycle.closed);
        assertEquals(0, up.liveBytes(), "every chunk went back");
    }

    /**
     * The cached path's window: the decision looked under every pool's lock (the cached block is not
     * live) and waits to end; meanwhile the block is named from the cache. The close must refuse it.
     */
    @Test
    void aNameFromAThreadCacheDuringAClosingDecisionIsRefused() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PoolEngine m = new PoolEngine(up, config(), PoolSettings.defaults(), null);
        Lifecycle lifecycle = field(m, "lifecycle");
        Pool[] pools = field(m, "pools");
        ReentrantLock first = pools[0].lock;
        m.deallocate(m.allocate(4 * KiB, Device.cpu())); // into this thread's cache: not live

        first.lock();
        Started d = started(() -> m.closeIfUnused());
        awaitQueued(first, d.thread); // deciding: unsettled is set
        MemoryHandle handed = null;
        Throwable refused = null;
        synchronized (lifecycle) {
            first.unlock();
            awaitBlockedInDecided(d.thread); // looked (nothing live) and waits to decide
            try {
                handed = m.allocate(4 * KiB, Device.cpu()); // the cached block, named outside the locks
            } catch (RuntimeException e) {
                refused = e;
            }
        }
        assertTrue(d.result.get(30, TimeUnit.SECONDS), "the decision closed the manager");
        assertNull(handed, "a handle was handed out by a manager that closed without seeing it");
        assertInstanceOf(DeviceUnavailableException.class, refused);
        assertEquals(0, up.liveBytes(), "every chunk went back");
    }

    /**
     * The name refused there was never handed out, so the close must not report it as a live
     * allocation. Its owner withdraws it after the refusal, outside any lock, while the close goes on:
     * held there ({@link Lifecycle#refusedForTests}) until the close has ended, the close looks first.
     */
    @Test
    void aNameRefusedByAClosingDecisionIsNoReportedLeak() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        List<String> warnings = new CopyOnWriteArrayList<>();
        PoolEngine m = new PoolEngine(up, config(), PoolSettings.defaults().withLog(warningsInto(warnings)), null);
        Lifecycle lifecycle = field(m, "lifecycle");
        Pool[] pools = field(m, "pools");
        ReentrantLock first = pools[0].lock;
        m.deallocate(m.allocate(4 * KiB, Device.cpu())); // into this thread's cache

        first.lock();
        Started d = started(() -> m.closeIfUnused());
        awaitQueued(first, d.thread);
        Thread self = Thread.currentThread();
        Lifecycle.refusedForTests = () -> {
            if (Thread.currentThread() == self) {
                try {
                    d.result.get(30, TimeUnit.SECONDS); // the close ended before the name goes
                } catch (Exception e) {
                    throw new AssertionError("the close never ended", e);
                }
            }
        };
        Throwable refused = null;
        try {
            synchronized (lifecycle) {
                first.unlock();
                awaitBlockedInDecided(d.thread);
                try {
                    m.allocate(4 * KiB, Device.cpu());
                } catch (RuntimeException e) {
                    refused = e;
                }
            }
        } finally {
            Lifecycle.refusedForTests = null;
        }
        assertInstanceOf(DeviceUnavailableException.class, refused);
        assertTrue(d.result.get(30, TimeUnit.SECONDS));
        assertEquals(0, up.liveBytes(), "every chunk went back");
        assertTrue(warnings.stream().noneMatch(w -> w.contains("live allocation")),
                "no allocation reported that no one was given: " + warnings);
    }

    /** The same window, the decision refusing (another block is live): the cached name is handed out. */
    @Test
    void aNameFromAThreadCacheDuringARefusingDecisionIsHandedOut() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PoolEngine m = new PoolEngine(up, config(), PoolSettings.defaults(), null);
        Lifecycle lifecycle = field(m, "lifecycle");
        Pool[] pools = field(m, "pools");
        ReentrantLock first = pools[0].lock;
        MemoryHandle live = m.allocate(4 * KiB, Device.cpu());
        m.deallocate(m.allocate(4 * KiB, Device.cpu())); // into this thread's cache

        first.lock();
        Started d = started(() -> m.closeIfUnused());
        awaitQueued(first, d.thread);
        MemoryHandle handed;
        synchronized (lifecycle) {
            first.unlock();
            awaitBlockedInDecided(d.thread); // looked (live is live) and waits to decide
            handed = m.allocate(4 * KiB, Device.cpu());
        }
        assertFalse(d.result.get(30, TimeUnit.SECONDS), "the decision saw the live block");
        assertFalse(m.isClosed());
        assertFalse(lifecycle.unsettled, "the refusal settled the manager");
        assertTrue(m.owns(handed));
        m.deallocate(handed);
        m.deallocate(live);
        m.close();
        assertEquals(0, up.liveBytes(), "every chunk went back");
    }

    private static MemoryManagerConfig config() {
        return MemoryManagerConfig.defaults().withAutoGc(false, 0.85).withPoolConfig(
                MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).alignment(256).build());
    }

    private static PoolLog warningsInto(List<String> warnings) {
        return new PoolLog() {
            @Override
            public void warn(String message, Throwable cause) {
                warnings.add(message);
            }

            @Override
            public void info(String message) {
            }
        };
    }

    /** @return true if {@code t} is blocked entering {@link Lifecycle#decided}: its look is done */
    private static boolean blockedInDecided(Thread t) {
        StackTraceElement[] stack = t.getStackTrace();
        return t.getState() == Thread.State.BLOCKED && stack.length > 0
                && stack[0].getClassName().equals(Lifecycle.class.getName()) && stack[0].getMethodName().equals("decided");
    }

    /** Waits (at most 30 s) until {@code t} is blocked entering {@link Lifecycle#decided}: its look is done. */
    private static void awaitBlockedInDecided(Thread t) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (true) {
            if (blockedInDecided(t)) {
                return;
            }
            assertTrue(System.nanoTime() < deadline, t.getName() + " never waited to decide: " + t.getState());
            Thread.onSpinWait();
        }
    }

    record Started(Thread thread, CompletableFuture<Boolean> result) {}

    private static Started started(java.util.function.BooleanSupplier call) {
        CompletableFuture<Boolean> result = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                result.complete(call.getAsBoolean());
            } catch (Throwable e) {
                result.completeExceptionally(e);
            }
        });
        t.start();
        return new Started(t, result);
    }

    private static void awaitQueued(ReentrantLock lock, Thread t) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!lock.hasQueuedThread(t)) {
            assertTrue(System.nanoTime() < deadline, t.getName() + " never queued for the lock: " + t.getState());
            Thread.onSpinWait();
        }
    }

    /** Under {@code lifecycle}'s monitor: how many conditional closes are deciding. */
    private static int deciding(Lifecycle lifecycle) throws ReflectiveOperationException {
        Field f = Lifecycle.class.getDeclaredField("deciding");
        f.setAccessible(true);
        return f.getInt(lifecycle);
    }

    @SuppressWarnings("unchecked")
    private static <T> T field(PoolEngine m, String name) throws ReflectiveOperationException {
        Field f = PoolEngine.class.getDeclaredField(name);
        f.setAccessible(true);
        return (T) f.get(m);
    }
}
