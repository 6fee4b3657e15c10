package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Field;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
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
import io.ferrum.memory.pool.PoolSettings;

/**
 * Two {@link PoolEngine#closeIfUnused} calls at once: the first to refuse must not settle the
 * manager while the other still decides, or a block named outside the pools' locks (here from a
 * thread cache) between the other's look and its close is handed out by a manager that then closes.
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

        // Queue on the first pool's lock: decider A, a holder that parks between them, decider B.
        first.lock();
        Started a = started(() -> m.closeIfUnused());
        awaitQueued(first, a.thread);
        CountDownLatch letGo = new CountDownLatch(1);
        CompletableFuture<Boolean> holding = new CompletableFuture<>();
        Thread between = new Thread(() -> {
            first.lock();
            try {
                holding.complete(true);
                letGo.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                first.unlock();
            }
        });
        between.start();
        awaitQueued(first, between);
        Started b = started(() -> m.closeIfUnused());
        awaitQueued(first, b.thread);

        MemoryHandle handed = null;
        Throwable refused = null;
        synchronized (lifecycle) {
            first.unlock();
            awaitBlocked(a.thread); // A looked under every lock (a live block) and waits to decide
            m.deallocate(live); // into this thread's cache: not live
        }
        assertFalse(a.result.get(30, TimeUnit.SECONDS), "A saw the live block");
        holding.get(30, TimeUnit.SECONDS);
        synchronized (lifecycle) {
            letGo.countDown();
            awaitBlocked(b.thread); // B looked (no live block) and waits to decide
            try {
                handed = m.allocate(4 * KiB, Device.cpu()); // named from the cache, outside the locks
            } catch (RuntimeException e) {
                refused = e;
            }
        }
        assertTrue(b.result.get(30, TimeUnit.SECONDS), "B closed the manager");
        assertTrue(m.isClosed());
        assertNull(handed, "a handle was handed out by a manager that closed without seeing it");
        assertInstanceOf(DeviceUnavailableException.class, refused);
        assertFalse(lifecycle.unsettled && !lifecycle.closed);
        assertEquals(0, up.liveBytes(), "every chunk went back");
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

    private static void awaitBlocked(Thread t) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (t.getState() != Thread.State.BLOCKED) {
            assertTrue(System.nanoTime() < deadline, t.getName() + " never waited for the decision: " + t.getState());
            Thread.onSpinWait();
        }
    }

    @SuppressWarnings("unchecked")
    private static <T> T field(PoolEngine m, String name) throws ReflectiveOperationException {
        Field f = PoolEngine.class.getDeclaredField(name);
        f.setAccessible(true);
        return (T) f.get(m);
    }
}
