package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.management.ThreadMXBean;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.EventHandle;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryException;
import io.ferrum.memory.api.StreamHandle;

/**
 * An attack on {@link HostStreamManager} itself (a helper, 2026-12): order on one stream, events,
 * destroy and close with work queued, an executor that refuses, interrupts of a waiting thread.
 * Every interleaving is forced with latches in the work or a thread's observed state; every wait is
 * bounded and fails the test when it runs out.
 */
class StreamAttackTest {
    private static final Device CPU0 = Device.cpu(0);
    /** A guard against a hang, never a figure the test asserts on. */
    private static final long WAIT_S = 30;

    private final List<HostStreamManager> toClose = new ArrayList<>();
    private final List<CountDownLatch> toRelease = new ArrayList<>();

    @AfterEach
    void closeAll() {
        toRelease.forEach(CountDownLatch::countDown);
        toClose.forEach(HostStreamManager::close);
    }

    private HostStreamManager manager(ExecutorService executor, long closeWaitNanos) {
        HostStreamManager m = new HostStreamManager(CPU0, executor, StreamIds.MAX_SEQUENCE, closeWaitNanos);
        toClose.add(m);
        return m;
    }

    private HostStreamManager manager() {
        return manager(Executors.newCachedThreadPool(), TimeUnit.SECONDS.toNanos(10));
    }

    private CountDownLatch gate() {
        CountDownLatch g = new CountDownLatch(1);
        toRelease.add(g);
        return g;
    }

    private static void await(CountDownLatch latch) {
        try {
            if (!latch.await(WAIT_S, TimeUnit.SECONDS)) {
                throw new AssertionError("a latch was not released within " + WAIT_S + " s");
            }
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
    }

    private static void get(CompletableFuture<?> f, String what) throws Exception {
        try {
            f.get(WAIT_S, TimeUnit.SECONDS);
        } catch (TimeoutException e) {
            throw new AssertionError(what + " did not complete within " + WAIT_S + " s", e);
        }
    }

    /** Waits (bounded) until {@code t} is in one of {@code states} or has ended; @return its state then. */
    private static Thread.State awaitState(Thread t, Thread.State... states) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
        while (true) {
            Thread.State s = t.getState();
            for (Thread.State wanted : states) {
                if (s == wanted) {
                    return s;
                }
            }
            if (s == Thread.State.TERMINATED) {
                return s;
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError(t.getName() + " never reached " + List.of(states) + "; it is " + s);
            }
            Thread.onSpinWait();
        }
    }

    /** Waits (bounded) until {@code t} is parked with {@code method} of the stream manager on its stack. */
    private static void awaitParkedIn(Thread t, String method) {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
        while (true) {
            if (t.getState() == Thread.State.WAITING) {
                for (StackTraceElement f : t.getStackTrace()) {
                    if (f.getClassName().equals(HostStreamManager.class.getName()) && f.getMethodName().equals(method)) {
                        return;
                    }
                }
            }
            if (System.nanoTime() > deadline) {
                throw new AssertionError(t.getName() + " never parked in " + method + "; it is " + t.getState());
            }
            Thread.onSpinWait();
        }
    }

    // ------------------------------------------------------------------ order on one stream

    @Test
    void workFromTwoSubmittersRunsOnceEachInTheOrderEachSubmittedIt() throws Exception {
        HostStreamManager m = manager();
        StreamHandle s = m.createStream(CPU0);
        CountDownLatch hold = gate();
        m.submit(s, () -> await(hold)); // everything below queues behind it
        List<String> ran = Collections.synchronizedList(new ArrayList<>());
        AtomicInteger running = new AtomicInteger();
        AtomicInteger overlaps = new AtomicInteger();
        CountDownLatch go = new CountDownLatch(1);
        List<CompletableFuture<Void>> last = new ArrayList<>();
        List<Thread> submitters = new ArrayList<>();
        for (String who : List.of("a", "b")) {
            CompletableFuture<Void> done = new CompletableFuture<>();
            last.add(done);
            Thread t = new Thread(() -> {
                await(go);
                CompletableFuture<Void> f = null;
                for (int i = 0; i < 500; i++) {
                    String item = who + i;
                    f = m.submit(s, () -> {
                        if (running.incrementAndGet() != 1) {
                            overlaps.incrementAndGet();
                        }
                        ran.add(item);
                        running.decrementAndGet();
                    });
                }
                f.whenComplete((v, e) -> done.complete(null));
            }, "submitter-" + who);
            submitters.add(t);
            t.start();
        }
        go.countDown();
        for (Thread t : submitters) {
            t.join(TimeUnit.SECONDS.toMillis(WAIT_S));
            assertFalse(t.isAlive(), t.getName() + " ended");
        }
        assertTrue(ran.isEmpty(), "nothing ran past the held work: " + ran.size());
        hold.countDown();
        for (CompletableFuture<Void> f : last) {
            get(f, "the last work of a submitter");
        }
        get(m.synchronizeStream(s).toCompletableFuture(), "the stream");
        assertEquals(1000, ran.size(), "each piece of work ran once");
        assertEquals(0, overlaps.get(), "two pieces of one stream's work never overlap");
        for (String who : List.of("a", "b")) {
            List<String> mine = ran.stream().filter(x -> x.startsWith(who)).toList();
            for (int i = 0; i < 500; i++) {
                assertEquals(who + i, mine.get(i), "the order " + who + " submitted in");
            }
        }
    }

    /**
     * The executor refuses (a pool out of threads): accepted work runs on the submitting thread. It
     * ran there inside {@code submit}'s hold of the stream, before the stream's tail was moved past
     * it: work it submitted to its own stream chained on the old, completed tail and ran at once,
     * nested inside it, ahead of its end.
     */
    @Test
    void workSubmittedFromInsideStreamWorkRunsAfterItAlsoWhenTheExecutorRefuses() throws Exception {
        SwitchableExecutor executor = new SwitchableExecutor();
        HostStreamManager m = manager(executor, TimeUnit.SECONDS.toNanos(10));
        StreamHandle s = m.createStream(CPU0);
        executor.reject.set(true);
        List<String> order = Collections.synchronizedList(new ArrayList<>());
        AtomicReference<CompletableFuture<Void>> inner = new AtomicReference<>();
        CompletableFuture<Void> outer = m.submit(s, () -> {
            order.add("outer starts");
            inner.set(m.submit(s, () -> order.add("inner")));
            order.add("outer ends");
        });
        get(outer, "the outer work");
        get(inner.get(), "the inner work");
        assertEquals(List.of("outer starts", "outer ends", "inner"), order,
                "work submitted to a stream runs after the work before it ends");
        // The stream still knows which work ran last: an event now follows nothing unfinished.
        assertTrue(m.isStreamReady(s));
        CompletableFuture<Void> next = m.submit(s, () -> order.add("next"));
        get(next, "the next work");
        assertEquals("next", order.getLast());
    }

    /**
     * The executor refuses: the work ran on the submitting thread while that thread held the
     * stream's monitor, so every other thread's call on the stream (isStreamReady, recordEvent,
     * submit) blocked for the whole of the work, and one the work waited for deadlocked.
     */
    @Test
    void workRunOnTheSubmitterWhenTheExecutorRefusesHoldsNoLockOtherCallsNeed() throws Exception {
        SwitchableExecutor executor = new SwitchableExecutor();
        HostStreamManager m = manager(executor, TimeUnit.SECONDS.toNanos(10));
        StreamHandle s = m.createStream(CPU0);
        executor.reject.set(true);
        CountDownLatch inside = new CountDownLatch(1);
        CountDownLatch hold = gate();
        Thread submitter = new Thread(() -> m.submit(s, () -> {
            inside.countDown();
            await(hold);
        }), "submitter");
        submitter.start();
        await(inside);
        AtomicReference<Object> answer = new AtomicReference<>();
        Thread asker = new Thread(() -> answer.set(m.isStreamReady(s) ? "ready" : m.recordEvent(s)), "asker");
        asker.start();
        // Until the asker ends, or blocks on a monitor the submitter holds (a moment's BLOCKED on a
        // class loader's lock is no finding).
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        boolean blockedBySubmitter = false;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
        while (asker.isAlive() && !blockedBySubmitter) {
            ThreadInfo info = mx.getThreadInfo(asker.threadId());
            blockedBySubmitter = info != null && info.getThreadState() == Thread.State.BLOCKED
                    && info.getLockOwnerId() == submitter.threadId();
            assertTrue(System.nanoTime() < deadline, "the asker neither ended nor blocked");
            Thread.onSpinWait();
        }
        hold.countDown();
        asker.join(TimeUnit.SECONDS.toMillis(WAIT_S));
        submitter.join(TimeUnit.SECONDS.toMillis(WAIT_S));
        assertFalse(blockedBySubmitter, "another thread's isStreamReady waited for work that runs on the submitter");
        assertInstanceOf(EventHandle.class, answer.get(), "busy while the work runs, and an event recorded");
    }

    // ------------------------------------------------------------------ events

    @Test
    void anEventWaitedOnByAnotherStreamHoldsItsWorkUntilTheWorkBeforeTheEventEnds() throws Exception {
        HostStreamManager m = manager();
        StreamHandle s1 = m.createStream(CPU0);
        StreamHandle s2 = m.createStream(CPU0);
        CountDownLatch hold = gate();
        AtomicBoolean before = new AtomicBoolean();
        m.submit(s1, () -> {
            await(hold);
            before.set(true);
        });
        EventHandle e = m.recordEvent(s1);
        AtomicInteger afterRan = new AtomicInteger();
        AtomicBoolean sawBefore = new AtomicBoolean();
        m.submit(s1, () -> { }); // work after the event on s1 does not matter to s2
        m.waitEvent(s2, e);
        CompletableFuture<Void> after = m.submit(s2, () -> {
            sawBefore.set(before.get());
            afterRan.incrementAndGet();
        });
        CompletableFuture<Void> sync = m.synchronizeStream(s2).toCompletableFuture();
        assertFalse(after.isDone() || sync.isDone() || m.isStreamReady(s2), "s2 waits for the event");
        assertEquals(0, afterRan.get());
        hold.countDown();
        get(after, "the work after the wait");
        get(sync, "s2's synchronize");
        assertTrue(sawBefore.get(), "the work behind the wait saw the work before the event");
        assertEquals(1, afterRan.get());
    }

    @Test
    void anEventOfADestroyedStreamIsStillWaitedForAndItsQueuedWorkStillRunsOnce() throws Exception {
        HostStreamManager m = manager();
        StreamHandle s = m.createStream(CPU0);
        StreamHandle t = m.createStream(CPU0);
        CountDownLatch hold = gate();
        AtomicInteger queued = new AtomicInteger();
        m.submit(s, () -> await(hold));
        CompletableFuture<Void> q = m.submit(s, queued::incrementAndGet);
        EventHandle e = m.recordEvent(s);
        m.destroyStream(s);
        assertFalse(m.knows(s));
        assertEquals(List.of(StreamHandle.DEFAULT, t), m.streams());
        m.waitEvent(t, e);
        CompletableFuture<Void> behind = m.submit(t, () -> assertEquals(1, queued.get()));
        assertFalse(behind.isDone(), "t waits for the destroyed stream's event");
        assertThrows(InvalidMemoryRequestException.class, () -> m.submit(s, () -> { }), "destroyed: refused");
        assertThrows(InvalidMemoryRequestException.class, () -> m.recordEvent(s));
        hold.countDown();
        get(q, "the destroyed stream's queued work");
        get(behind, "the work behind its event");
        assertEquals(1, queued.get(), "queued work of a destroyed stream ran once");
    }

    /**
     * A wait on the default stream blocks its caller until the event's work has run. An interrupt of
     * that thread (Ctrl-C in a shell, a component's deactivation) was ignored: the wait went on, in
     * {@code CompletableFuture.join}, for as long as the work took, for ever if it never ended.
     */
    @Test
    void anInterruptEndsADefaultStreamWaitAndKeepsTheFlag() throws Exception {
        HostStreamManager m = manager();
        StreamHandle s = m.createStream(CPU0);
        CountDownLatch hold = gate();
        // Held until the test lets it go (or ends): a bounded hold would end the wait it is to outlast.
        CompletableFuture<Void> held = m.submit(s, () -> {
            try {
                hold.await();
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        });
        EventHandle e = m.recordEvent(s);
        AtomicReference<Throwable> thrown = new AtomicReference<>();
        AtomicBoolean flagKept = new AtomicBoolean();
        Thread waiter = new Thread(() -> {
            try {
                m.waitEvent(StreamHandle.DEFAULT, e);
            } catch (Throwable t) {
                thrown.set(t);
            }
            flagKept.set(Thread.currentThread().isInterrupted());
        }, "waiter");
        waiter.start();
        awaitState(waiter, Thread.State.WAITING);
        waiter.interrupt();
        waiter.join(TimeUnit.SECONDS.toMillis(WAIT_S));
        boolean stuck = waiter.isAlive();
        hold.countDown();
        waiter.join(TimeUnit.SECONDS.toMillis(WAIT_S));
        assertFalse(stuck, "the interrupted wait went on while the event's work was held");
        assertInstanceOf(MemoryException.class, thrown.get(), "the wait says it was interrupted");
        assertInstanceOf(InterruptedException.class, thrown.get().getCause());
        assertTrue(thrown.get().getMessage().contains("event " + e.id()), thrown.get().getMessage());
        assertTrue(flagKept.get(), "the interrupt stays set");
        get(held, "the held work");
        // The event is still there: a later wait waits for it (done by now) and returns.
        m.waitEvent(StreamHandle.DEFAULT, e);
    }

    /**
     * Two pieces of stream work on two streams, each waiting on the default stream (which blocks its
     * thread) for an event recorded on the other's stream after the other work: each event completes
     * only after the other work returns. The check for an event that follows the waiting work itself
     * did not see through the other thread, and both streams hung for good.
     */
    @Test
    void twoStreamWorksWaitingOnTheDefaultStreamForEachOthersEventAreNotBothHung() throws Exception {
        HostStreamManager m = manager();
        StreamHandle s1 = m.createStream(CPU0);
        StreamHandle s2 = m.createStream(CPU0);
        CountDownLatch go = gate();
        CountDownLatch firstWaits = new CountDownLatch(1);
        AtomicReference<EventHandle> e1 = new AtomicReference<>();
        AtomicReference<EventHandle> e2 = new AtomicReference<>();
        AtomicReference<Throwable> w1 = new AtomicReference<>();
        AtomicReference<Throwable> w2 = new AtomicReference<>();
        AtomicReference<Thread> firstThread = new AtomicReference<>();
        CompletableFuture<Void> work1 = m.submit(s1, () -> {
            await(go);
            firstThread.set(Thread.currentThread());
            firstWaits.countDown();
            try {
                m.waitEvent(StreamHandle.DEFAULT, e2.get());
            } catch (Throwable t) {
                w1.set(t);
            }
        });
        CompletableFuture<Void> work2 = m.submit(s2, () -> {
            await(firstWaits);
            // Forced: the first work is parked in its wait before this one waits.
            awaitParkedIn(firstThread.get(), "waitEvent");
            try {
                m.waitEvent(StreamHandle.DEFAULT, e1.get());
            } catch (Throwable t) {
                w2.set(t);
            }
        });
        e1.set(m.recordEvent(s1));
        e2.set(m.recordEvent(s2));
        go.countDown();
        get(work2, "the second work");
        get(work1, "the first work");
        assertEquals(null, w1.get(), "the first wait, made first, waited and ended when the second work ended");
        assertInstanceOf(InvalidMemoryRequestException.class, w2.get(), "the wait that closed the circle is refused");
        assertTrue(w2.get().getMessage().contains("Event " + e1.get().id()), w2.get().getMessage());
        // A wait on the default stream after both, from a plain thread, still waits and returns.
        m.waitEvent(StreamHandle.DEFAULT, e1.get());
        m.waitEvent(StreamHandle.DEFAULT, e2.get());
    }

    @Test
    void twoThreadsSynchronizingOneStreamBothWaitForItsWorkAndNeitherCancelsIt() throws Exception {
        HostStreamManager m = manager();
        StreamHandle s = m.createStream(CPU0);
        CountDownLatch hold = gate();
        AtomicBoolean ran = new AtomicBoolean();
        m.submit(s, () -> {
            await(hold);
            ran.set(true);
        });
        CompletableFuture<Void> a = m.synchronizeStream(s).toCompletableFuture();
        CompletableFuture<Void> b = m.synchronizeStream(s).toCompletableFuture();
        a.cancel(true); // one caller gives up: the stream and the other caller are not affected
        a.complete(null);
        assertFalse(b.isDone());
        assertFalse(m.isStreamReady(s), "a caller's stage is its own: completing it says nothing of the stream");
        hold.countDown();
        get(b, "the second synchronize");
        assertTrue(ran.get());
        assertTrue(m.isStreamReady(s));
    }

    // ------------------------------------------------------------------ failures, destroy and close

    @Test
    void workThatThrowsOrErrsFailsItsStageOnlyAndLeavesNothingPending() throws Exception {
        // A close that waited for work counted and never finished would wait this hour.
        HostStreamManager m = manager(Executors.newCachedThreadPool(), TimeUnit.HOURS.toNanos(1));
        StreamHandle s = m.createStream(CPU0);
        CompletableFuture<Void> boom = m.submit(s, () -> {
            throw new IllegalStateException("boom");
        });
        CompletableFuture<Void> error = m.submit(s, () -> {
            throw new AssertionError("an error");
        });
        AtomicInteger after = new AtomicInteger();
        CompletableFuture<Void> next = m.submit(s, after::incrementAndGet);
        get(next, "the work after two failures");
        assertTrue(boom.isCompletedExceptionally() && error.isCompletedExceptionally());
        assertInstanceOf(IllegalStateException.class, assertThrows(ExecutionException.class, boom::get).getCause());
        assertEquals(1, after.get());
        Thread closer = new Thread(m::close, "closer");
        closer.start();
        closer.join(TimeUnit.SECONDS.toMillis(WAIT_S));
        assertFalse(closer.isAlive(), "close found nothing pending after the failures");
    }

    @Test
    void closeWithWorkQueuedLetsItRunOnceAndThenStopsEveryThread() throws Exception {
        ExecutorService pool = Executors.newCachedThreadPool();
        HostStreamManager m = manager(pool, 0); // close does not wait: the work outlives it
        StreamHandle s = m.createStream(CPU0);
        StreamHandle t = m.createStream(CPU0);
        CountDownLatch hold = gate();
        AtomicInteger ran = new AtomicInteger();
        m.submit(s, () -> await(hold));
        CompletableFuture<Void> q1 = m.submit(s, ran::incrementAndGet);
        EventHandle e = m.recordEvent(s);
        m.waitEvent(t, e);
        CompletableFuture<Void> q2 = m.submit(t, ran::incrementAndGet);
        m.close();
        assertTrue(m.isClosed());
        assertFalse(pool.isShutdown(), "the pool runs on while accepted work is queued");
        assertThrows(DeviceUnavailableException.class, () -> m.submit(t, ran::incrementAndGet));
        assertThrows(DeviceUnavailableException.class, () -> m.waitEvent(StreamHandle.DEFAULT, e));
        hold.countDown();
        get(q1, "queued work on s");
        get(q2, "queued work on t, behind s's event");
        assertEquals(2, ran.get(), "each piece of queued work ran once");
        assertTrue(pool.awaitTermination(WAIT_S, TimeUnit.SECONDS), "the pool's threads stop after the last work");
    }

    @Test
    void idsOfADestroyedStreamAClosedManagerAndForgedOnesAreRefusedWithWhy() {
        HostStreamManager a = manager();
        HostStreamManager b = new HostStreamManager(Device.cpu(1));
        StreamHandle theirs = b.createStream(Device.cpu(1));
        EventHandle theirEvent = b.recordEvent(theirs);
        b.close();
        StreamHandle s = a.createStream(CPU0);
        AtomicInteger ran = new AtomicInteger();
        InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class,
                () -> a.submit(theirs, ran::incrementAndGet));
        assertTrue(e.getMessage().contains("was closed"), e.getMessage());
        e = assertThrows(InvalidMemoryRequestException.class, () -> a.waitEvent(s, theirEvent));
        assertTrue(e.getMessage().contains("was closed"), e.getMessage());
        for (long forged : new long[] {-1, Long.MIN_VALUE, Long.MAX_VALUE, s.id() + 1, s.id() | (1L << 40)}) {
            assertThrows(InvalidMemoryRequestException.class, () -> a.submit(new StreamHandle(forged), ran::incrementAndGet),
                    "forged stream " + forged);
            assertThrows(InvalidMemoryRequestException.class, () -> a.waitEvent(s, new EventHandle(forged)),
                    "forged event " + forged);
            assertFalse(a.knows(new StreamHandle(forged)));
        }
        assertEquals(0, ran.get(), "refused work never runs");
    }

    /**
     * Two stream managers of one device (the registered one and one a MemoryManagerFactory made):
     * the refusal of the other's stream said "belongs to the stream manager of cpu:0, not to this one
     * of cpu:0; use it with cpu:0's memory", which names no difference and sends the caller back to
     * the call that failed.
     */
    @Test
    void aStreamOfAnotherStreamManagerOfTheSameDeviceIsRefusedSayingSo() {
        HostStreamManager a = manager();
        HostStreamManager b = manager();
        StreamHandle theirs = b.createStream(CPU0);
        EventHandle theirEvent = b.recordEvent(theirs);
        StreamHandle mine = a.createStream(CPU0);
        InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class,
                () -> a.submit(theirs, () -> { }));
        assertTrue(e.getMessage().contains("another stream manager of cpu:0"), e.getMessage());
        assertFalse(e.getMessage().contains("use it with cpu:0's memory"), e.getMessage());
        e = assertThrows(InvalidMemoryRequestException.class, () -> a.waitEvent(mine, theirEvent));
        assertTrue(e.getMessage().contains("another stream manager of cpu:0"), e.getMessage());
    }
}
