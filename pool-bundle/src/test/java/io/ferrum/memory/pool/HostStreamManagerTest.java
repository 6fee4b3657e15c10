package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.EventHandle;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.StreamHandle;

/**
 * The host stream manager on its own: ids that tell managers apart, events that are refused unless
 * recorded here, and the submit contract the engine relies on to release the pins of an async copy
 * (the work either is refused before it is accepted, or runs exactly once and its stage completes).
 */
class HostStreamManagerTest {
    private static final Device CPU0 = Device.cpu(0);
    private static final Device CPU1 = Device.cpu(1);
    /** A guard against a hang, never a figure the test asserts on. */
    private static final long WAIT_S = 30;

    private final List<HostStreamManager> toClose = new ArrayList<>();

    @AfterEach
    void closeAll() {
        for (HostStreamManager m : toClose) {
            m.close();
        }
    }

    private HostStreamManager manager(Device d) {
        HostStreamManager m = new HostStreamManager(d);
        toClose.add(m);
        return m;
    }

    private HostStreamManager manager(Device d, ExecutorService executor) {
        HostStreamManager m = new HostStreamManager(d, executor);
        toClose.add(m);
        return m;
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

    // ------------------------------------------------------------------ ids (defect 18)

    @Test
    void streamAndEventIdsAreUniqueAcrossManagersAndNeverTheDefault() {
        HostStreamManager a = manager(CPU0);
        HostStreamManager b = manager(CPU1);
        Set<Long> seen = new HashSet<>();
        for (int i = 0; i < 100; i++) {
            for (HostStreamManager m : List.of(a, b)) {
                StreamHandle s = m.createStream(m.device());
                assertFalse(s.isDefault(), "the default stream's id was issued: " + s);
                assertTrue(seen.add(s.id()), "stream id " + s.id() + " issued twice (" + m.device() + ")");
                EventHandle e = m.recordEvent(s);
                assertTrue(seen.add(e.id()), "event id " + e.id() + " issued twice (" + m.device() + ")");
            }
        }
    }

    @Test
    void aStreamOfAnotherManagerIsRefusedAsAnotherDevicesStream() {
        HostStreamManager a = manager(CPU0);
        HostStreamManager b = manager(CPU1);
        StreamHandle mine = a.createStream(CPU0);
        StreamHandle theirs = b.createStream(CPU1);
        AtomicInteger ran = new AtomicInteger();
        List<Runnable> calls = List.of(
                () -> a.submit(theirs, ran::incrementAndGet),
                () -> a.isStreamReady(theirs),
                () -> a.synchronizeStream(theirs),
                () -> a.recordEvent(theirs),
                () -> a.waitEvent(theirs, a.recordEvent(mine)),
                () -> a.destroyStream(theirs));
        for (Runnable call : calls) {
            InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class, call::run);
            assertTrue(e.getMessage().contains(Long.toString(theirs.id())), e.getMessage());
            assertTrue(e.getMessage().contains("belongs to the stream manager of cpu:1"), e.getMessage());
        }
        assertEquals(0, ran.get(), "work for another manager's stream never runs here");
        assertTrue(b.isStreamReady(theirs), "its own manager still serves it");
    }

    @Test
    void knowsTheDefaultStreamAndItsOwnLiveStreamsOnly() {
        HostStreamManager a = manager(CPU0);
        HostStreamManager b = manager(CPU1);
        StreamHandle mine = a.createStream(CPU0);
        StreamHandle theirs = b.createStream(CPU1);
        EventHandle event = a.recordEvent(mine);
        assertTrue(a.knows(StreamHandle.DEFAULT));
        assertTrue(a.knows(null), "null stands for the default stream, as in submit");
        assertTrue(a.knows(mine));
        assertFalse(a.knows(theirs), "another manager's stream");
        assertFalse(a.knows(new StreamHandle(event.id())), "an event's id");
        assertFalse(a.knows(new StreamHandle(mine.id() + 1)), "never created");
        assertFalse(a.knows(new StreamHandle(-1)));
        a.destroyStream(mine);
        assertFalse(a.knows(mine), "destroyed");
        InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class, () -> a.isStreamReady(mine));
        assertTrue(e.getMessage().contains("already destroyed"), e.getMessage());
    }

    @Test
    void aManagerWhoseSequenceRunsOutTakesANewNumberAndKeepsItsOldIds() {
        HostStreamManager a = new HostStreamManager(CPU0, Executors.newCachedThreadPool(), 2);
        toClose.add(a);
        HostStreamManager b = manager(CPU1);
        List<StreamHandle> made = new ArrayList<>();
        List<EventHandle> recorded = new ArrayList<>();
        Set<Long> seen = new HashSet<>();
        for (int i = 0; i < 7; i++) {
            StreamHandle s = a.createStream(CPU0);
            made.add(s);
            recorded.add(a.recordEvent(StreamHandle.DEFAULT));
            assertTrue(seen.add(s.id()) && seen.add(recorded.getLast().id()), "an id was issued twice");
            assertTrue(s.id() > 0 && recorded.getLast().id() > 0);
        }
        assertNotEquals(made.getFirst().id() >>> 41, made.getLast().id() >>> 41, "a new number after two ids of a kind");
        for (StreamHandle s : made) {
            assertTrue(a.knows(s), "still a live stream: " + s);
            assertTrue(a.isStreamReady(s));
        }
        for (EventHandle e : recorded) {
            a.waitEvent(made.getFirst(), e);
        }
        // Another manager's ids are still told apart from all of them.
        assertThrows(InvalidMemoryRequestException.class, () -> a.isStreamReady(b.createStream(CPU1)));
        EventHandle streamAsEvent = new EventHandle(made.getLast().id());
        assertThrows(InvalidMemoryRequestException.class, () -> a.waitEvent(made.getFirst(), streamAsEvent));
    }

    // ------------------------------------------------------------------ events (defect 23)

    @Test
    void waitEventRefusesAnIdThatWasNeverRecordedAsAnEvent() {
        HostStreamManager a = manager(CPU0);
        HostStreamManager b = manager(CPU1);
        StreamHandle s = a.createStream(CPU0);
        EventHandle recorded = a.recordEvent(s);
        a.waitEvent(s, recorded);
        // A stream's id is not an event, although the two once came from one counter.
        EventHandle streamId = new EventHandle(s.id());
        InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class, () -> a.waitEvent(s, streamId));
        assertTrue(e.getMessage().contains(Long.toString(streamId.id())), e.getMessage());
        // Never issued at all.
        EventHandle never = new EventHandle(recorded.id() + 1000);
        e = assertThrows(InvalidMemoryRequestException.class, () -> a.waitEvent(s, never));
        assertTrue(e.getMessage().contains(Long.toString(never.id())), e.getMessage());
        // Another manager's event: refused, not mistaken for one of ours.
        b.createStream(CPU1);
        EventHandle theirs = b.recordEvent(StreamHandle.DEFAULT);
        e = assertThrows(InvalidMemoryRequestException.class, () -> a.waitEvent(s, theirs));
        assertTrue(e.getMessage().contains("belongs to the stream manager of cpu:1"), e.getMessage());
        assertThrows(InvalidMemoryRequestException.class, () -> a.waitEvent(s, null));
    }

    @Test
    void waitingOnASweptCompletedEventIsANoOp() throws Exception {
        HostStreamManager a = manager(CPU0);
        StreamHandle s = a.createStream(CPU0);
        EventHandle first = a.recordEvent(StreamHandle.DEFAULT);
        for (int i = 0; i < 5000; i++) {
            a.recordEvent(StreamHandle.DEFAULT); // completed at once: the sweep drops them
        }
        a.waitEvent(s, first);
        AtomicInteger ran = new AtomicInteger();
        a.submit(s, ran::incrementAndGet).get(WAIT_S, TimeUnit.SECONDS);
        assertEquals(1, ran.get());
    }

    // ------------------------------------------------------------------ submit and close (defect 8)

    @Test
    void workAcceptedWhileTheExecutorRejectsRunsOnceOnTheCallingThread() throws Exception {
        SwitchableExecutor executor = new SwitchableExecutor();
        HostStreamManager a = manager(CPU0, executor);
        StreamHandle s = a.createStream(CPU0);
        executor.reject.set(true);
        AtomicInteger ran = new AtomicInteger();
        AtomicReference<Thread> where = new AtomicReference<>();
        CompletableFuture<Void> f = a.submit(s, () -> {
            ran.incrementAndGet();
            where.set(Thread.currentThread());
        });
        f.get(WAIT_S, TimeUnit.SECONDS);
        assertEquals(1, ran.get(), "accepted work runs exactly once");
        assertEquals(Thread.currentThread(), where.get());
        assertTrue(a.isStreamReady(s));
    }

    @Test
    void workQueuedBehindPendingWorkRunsOnceWhenTheExecutorRejectsIt() throws Exception {
        SwitchableExecutor executor = new SwitchableExecutor();
        HostStreamManager a = manager(CPU0, executor);
        StreamHandle s = a.createStream(CPU0);
        CountDownLatch started = new CountDownLatch(1);
        CountDownLatch gate = new CountDownLatch(1);
        CompletableFuture<Void> first = a.submit(s, () -> {
            started.countDown();
            await(gate);
        });
        AtomicInteger ran = new AtomicInteger();
        CompletableFuture<Void> second = a.submit(s, ran::incrementAndGet);
        await(started);
        executor.reject.set(true); // the second work reaches the executor only when the first is done
        gate.countDown();
        first.get(WAIT_S, TimeUnit.SECONDS);
        second.get(WAIT_S, TimeUnit.SECONDS);
        assertEquals(1, ran.get(), "queued work runs exactly once although the executor refused it");
        assertTrue(a.isStreamReady(s));
    }

    /**
     * A callback on a stream that stops the backend closes its stream manager from inside stream
     * work. That work, and the work behind it, can end only after close returns; a close that waited
     * for them waited its whole limit (10 s; an hour here, so that the old wait fails the test).
     */
    @Test
    void closeCalledFromInsideStreamWorkReturnsAtOnceAndTheWorkBehindItStillRuns() throws Exception {
        HostStreamManager a = new HostStreamManager(CPU0, Executors.newCachedThreadPool(), StreamIds.MAX_SEQUENCE,
                TimeUnit.HOURS.toNanos(1));
        toClose.add(a);
        StreamHandle s = a.createStream(CPU0);
        CountDownLatch gate = new CountDownLatch(1);
        CompletableFuture<Void> closing = a.submit(s, () -> {
            await(gate);
            a.close();
        });
        AtomicInteger behind = new AtomicInteger();
        CompletableFuture<Void> queued = a.submit(s, behind::incrementAndGet);
        gate.countDown();
        closing.get(60, TimeUnit.SECONDS);
        queued.get(60, TimeUnit.SECONDS);
        assertEquals(1, behind.get(), "the work accepted behind the closing work ran once");
        assertThrows(DeviceUnavailableException.class, () -> a.submit(s, behind::incrementAndGet));
    }

    /**
     * close() marked the manager closed, then shut its executor down, then forgot its stream and event
     * ids (a JVM-wide list of open managers' numbers): an executor whose shutdown throws left the
     * ids listed for good (another manager then named a closed one's stream as a live manager's), and
     * a second close returned at once. The ids go first now, and a second close shuts down again.
     */
    @Test
    void aCloseWhoseExecutorShutdownThrowsStillForgetsItsIdsAndASecondCloseShutsDown() {
        AtomicInteger refusals = new AtomicInteger(1);
        ExecutorService refusing = new java.util.concurrent.ThreadPoolExecutor(0, 4, 1, TimeUnit.SECONDS,
                new java.util.concurrent.SynchronousQueue<>()) {
            @Override
            public void shutdown() {
                if (refusals.getAndDecrement() > 0) {
                    throw new IllegalStateException("test: the executor refuses to shut down");
                }
                super.shutdown();
            }
        };
        HostStreamManager a = new HostStreamManager(CPU0, refusing, StreamIds.MAX_SEQUENCE, 0);
        HostStreamManager b = manager(CPU1);
        StreamHandle theirs = a.createStream(CPU0);
        IllegalStateException e = assertThrows(IllegalStateException.class, a::close);
        assertTrue(e.getMessage().contains("refuses to shut down"), e.getMessage());
        InvalidMemoryRequestException refused = assertThrows(InvalidMemoryRequestException.class,
                () -> b.submit(theirs, () -> { }));
        assertTrue(refused.getMessage().contains("was closed"),
                "the closed manager's ids are no live manager's: " + refused.getMessage());
        assertFalse(refusing.isShutdown());
        a.close();
        assertTrue(refusing.isShutdown(), "a second close shuts the executor down");
    }

    @Test
    void closeLetsAcceptedWorkRunAndRefusesNewWork() throws Exception {
        // close waits 10 s at most for accepted work; a loaded machine may take longer to run it.
        HostStreamManager a = new HostStreamManager(CPU0, Executors.newCachedThreadPool(), StreamIds.MAX_SEQUENCE,
                TimeUnit.HOURS.toNanos(1));
        toClose.add(a);
        StreamHandle s = a.createStream(CPU0);
        CountDownLatch started = new CountDownLatch(1);
        CountDownLatch gate = new CountDownLatch(1);
        a.submit(s, () -> {
            started.countDown();
            await(gate);
        });
        AtomicInteger ran = new AtomicInteger();
        CompletableFuture<Void> queued = a.submit(s, ran::incrementAndGet);
        await(started);
        AtomicInteger ranWhenCloseReturned = new AtomicInteger(-1);
        Thread closer = new Thread(() -> {
            a.close();
            ranWhenCloseReturned.set(ran.get());
        }, "closer");
        closer.start();
        // Wait until close has begun: then every call refuses.
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(WAIT_S);
        while (true) {
            try {
                a.isStreamReady(StreamHandle.DEFAULT);
                assertTrue(System.nanoTime() < deadline, "close never began");
                Thread.onSpinWait();
            } catch (DeviceUnavailableException closing) {
                break;
            }
        }
        AtomicInteger late = new AtomicInteger();
        assertThrows(DeviceUnavailableException.class, () -> a.submit(s, late::incrementAndGet));
        assertThrows(DeviceUnavailableException.class, () -> a.submit(StreamHandle.DEFAULT, late::incrementAndGet));
        gate.countDown();
        closer.join(TimeUnit.SECONDS.toMillis(WAIT_S));
        assertFalse(closer.isAlive(), "close returned");
        queued.get(WAIT_S, TimeUnit.SECONDS);
        assertEquals(1, ran.get(), "work accepted before close ran exactly once");
        assertEquals(1, ranWhenCloseReturned.get(), "close returned after the accepted work had run");
        assertEquals(0, late.get(), "work refused by a closed manager never runs");
    }

    @Test
    void submitRacingCloseEitherThrowsOrRunsTheWorkOnce() throws Exception {
        for (int round = 0; round < 200; round++) {
            HostStreamManager a = new HostStreamManager(CPU0);
            StreamHandle s = a.createStream(CPU0);
            int n = 64;
            AtomicInteger[] ran = new AtomicInteger[n];
            List<CompletableFuture<Void>> accepted = new ArrayList<>();
            List<Integer> acceptedIndex = new ArrayList<>();
            CountDownLatch go = new CountDownLatch(1);
            Thread closer = new Thread(() -> {
                await(go);
                a.close();
            }, "closer");
            closer.start();
            go.countDown();
            for (int i = 0; i < n; i++) {
                AtomicInteger r = ran[i] = new AtomicInteger();
                try {
                    accepted.add(a.submit(s, r::incrementAndGet));
                    acceptedIndex.add(i);
                } catch (DeviceUnavailableException refused) {
                    // refused before it was accepted: must never run
                }
            }
            closer.join(TimeUnit.SECONDS.toMillis(WAIT_S));
            assertFalse(closer.isAlive(), "close returned (round " + round + ")");
            for (int k = 0; k < accepted.size(); k++) {
                accepted.get(k).get(WAIT_S, TimeUnit.SECONDS);
            }
            for (int i = 0; i < n; i++) {
                int expected = acceptedIndex.contains(i) ? 1 : 0;
                assertEquals(expected, ran[i].get(), "work " + i + " of round " + round
                        + (expected == 1 ? " was accepted" : " was refused"));
            }
        }
    }

    /**
     * A wait on the default stream passes the open check; close runs before it looks the event up
     * and forgets every event; the wait then took the missing event for one swept because it had
     * completed, and returned at once although the work before the event had not run.
     */
    @Test
    void aDefaultStreamWaitRacingCloseIsRefusedNeverTakenForACompletedEvent() {
        HostStreamManager a = new HostStreamManager(CPU0, Executors.newCachedThreadPool(), StreamIds.MAX_SEQUENCE, 0);
        toClose.add(a);
        StreamHandle s = a.createStream(CPU0);
        CountDownLatch hold = new CountDownLatch(1);
        CompletableFuture<Void> held = a.submit(s, () -> await(hold));
        EventHandle event = a.recordEvent(s);
        // Forced: close (its wait for accepted work is 0 here) runs between the open check and the lookup.
        a.beforeEventLookup = a::close;
        try {
            assertThrows(DeviceUnavailableException.class, () -> a.waitEvent(StreamHandle.DEFAULT, event),
                    "a wait racing close is refused, not answered as if the held work had run");
            assertFalse(held.isDone(), "the work before the event had not run");
        } finally {
            a.beforeEventLookup = null;
            hold.countDown();
        }
        assertDoesNotThrow(() -> held.get(WAIT_S, TimeUnit.SECONDS), "the accepted work still ran");
    }

    /**
     * A record passes the open check; close runs before it issues the event's id and stores it, and
     * forgets every event and this manager's numbers. The record then stored its event in the closed
     * manager, answered with a handle as if it were open, and a sequence that ran out there drew a
     * new number that stayed in the JVM-wide map of open managers' numbers for good.
     */
    @Test
    void aRecordRacingCloseIsRefusedAndLeavesNoNumberBehind() {
        HostStreamManager b = manager(CPU1);
        StreamHandle theirs = b.createStream(CPU1);
        HostStreamManager a = new HostStreamManager(CPU0, Executors.newCachedThreadPool(), 1, 0);
        toClose.add(a);
        long number = a.recordEvent(StreamHandle.DEFAULT).id() >>> 41; // its one event id under this number
        // Forced: close runs between the open check and the issue, which then needs a new number.
        a.beforeIssue = a::close;
        try {
            assertThrows(DeviceUnavailableException.class, () -> a.recordEvent(StreamHandle.DEFAULT),
                    "a record racing close is refused, as every call after close is");
        } finally {
            a.beforeIssue = null;
        }
        EventHandle underNext = new EventHandle(((number + 1) << 41) | (1L << 40) | 1);
        InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class,
                () -> b.waitEvent(theirs, underNext));
        assertTrue(e.getMessage().contains("was closed") || e.getMessage().contains("never issued"),
                "the closed manager's number is not taken for an open one: " + e.getMessage());
    }

    /** As a record: a stream created past the open check while close ran was kept in the closed manager. */
    @Test
    void aStreamCreatedRacingCloseIsRefused() {
        HostStreamManager a = new HostStreamManager(CPU0, Executors.newCachedThreadPool(), StreamIds.MAX_SEQUENCE, 0);
        toClose.add(a);
        a.beforeIssue = a::close;
        try {
            assertThrows(DeviceUnavailableException.class, () -> a.createStream(CPU0),
                    "a stream created racing close is refused, as every call after close is");
        } finally {
            a.beforeIssue = null;
        }
        assertEquals(List.of(StreamHandle.DEFAULT), a.streams(), "no stream kept in the closed manager");
    }

    /**
     * Work on a stream waits, on the default stream, for an event recorded on that stream after it
     * (or on another stream that waits on such an event): the event completes only after the work
     * returns, so the wait, which blocks the stream's thread, never ended. A wait on an event that
     * does not follow the work still waits.
     */
    @Test
    void aDefaultStreamWaitFromInsideStreamWorkOnAnEventAfterThatWorkIsRefusedNotHung() throws Exception {
        HostStreamManager a = manager(CPU0);
        StreamHandle s = a.createStream(CPU0);
        StreamHandle t = a.createStream(CPU0);
        CountDownLatch recorded = new CountDownLatch(1);
        AtomicReference<EventHandle> sameStream = new AtomicReference<>();
        AtomicReference<EventHandle> throughT = new AtomicReference<>();
        AtomicReference<EventHandle> unrelated = new AtomicReference<>();
        AtomicReference<Throwable> first = new AtomicReference<>();
        AtomicReference<Throwable> second = new AtomicReference<>();
        AtomicInteger unrelatedRan = new AtomicInteger();
        CompletableFuture<Void> work = a.submit(s, () -> {
            await(recorded);
            first.set(assertThrows(Throwable.class, () -> a.waitEvent(StreamHandle.DEFAULT, sameStream.get())));
            second.set(assertThrows(Throwable.class, () -> a.waitEvent(StreamHandle.DEFAULT, throughT.get())));
            a.waitEvent(StreamHandle.DEFAULT, unrelated.get());
            assertEquals(1, unrelatedRan.get(), "a wait on an event that does not follow this work still waits");
        });
        sameStream.set(a.recordEvent(s));
        a.waitEvent(t, sameStream.get());
        throughT.set(a.recordEvent(t));
        StreamHandle u = a.createStream(CPU0);
        a.submit(u, unrelatedRan::incrementAndGet);
        unrelated.set(a.recordEvent(u));
        recorded.countDown();
        try {
            work.get(WAIT_S, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            throw new AssertionError("the work failed", e.getCause());
        }
        assertInstanceOf(InvalidMemoryRequestException.class, first.get(), "refused, not hung");
        assertTrue(first.get().getMessage().contains("Event " + sameStream.get().id()), first.get().getMessage());
        assertInstanceOf(InvalidMemoryRequestException.class, second.get(), "refused through the other stream too");
    }

    @Test
    void theDefaultStreamRunsWorkOnTheCallerAndReportsItsFailure() {
        HostStreamManager a = manager(CPU0);
        AtomicReference<Thread> where = new AtomicReference<>();
        CompletableFuture<Void> ok = a.submit(StreamHandle.DEFAULT, () -> where.set(Thread.currentThread()));
        assertTrue(ok.isDone());
        assertEquals(Thread.currentThread(), where.get());
        CompletableFuture<Void> failed = a.submit(null, () -> {
            throw new IllegalStateException("boom");
        });
        assertTrue(failed.isCompletedExceptionally());
        assertNotEquals(null, failed.exceptionNow());
    }
}
