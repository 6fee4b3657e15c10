package io.ferrum.memory.pool;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Executor;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.EventHandle;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryException;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.api.StreamManager;

/**
 * Streams run by host threads, for devices whose copies the CPU drives (host memory; any upstream
 * without streams of its own). Each stream is a chain of futures: work submitted to it runs in
 * order on a shared thread pool, different streams run concurrently, and the default stream runs
 * work on the caller's thread before {@link #submit} returns. An event is the stream's chain at the
 * moment it was recorded; waiting on it appends that future to another stream's chain, so no thread
 * blocks to wait.
 *
 * <p><b>Ids</b> ({@link StreamIds}): a stream or event id names its manager, so a manager tells its
 * own ids from another's (refused as belonging to another stream manager), and an event it
 * recorded and has since swept (it had completed: waiting on it is a no-op) from an id it never
 * recorded as an event (refused).
 *
 * <p>Thread-safe. {@link #close()} refuses new work with {@link DeviceUnavailableException} and
 * lets the work it had accepted run (see {@link #submit} and {@link #close()}).
 */
public final class HostStreamManager implements StreamManager, StreamExecutor {
    private static final int EVENT_SWEEP_THRESHOLD = 4096;
    private static final long CLOSE_WAIT_NANOS = TimeUnit.SECONDS.toNanos(10);

    private final Device device;
    private final ExecutorService executor;
    /** Hands work to {@link #executor}, or runs it on the calling thread when the executor refuses it. */
    private final Executor runner = this::execute;
    private final StreamIds ids;
    private final ConcurrentHashMap<Long, Stream> streams = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Long, Recorded> events = new ConcurrentHashMap<>();
    /** Work accepted on a stream and not yet finished; close waits for it, and the executor stops only at 0. */
    private final AtomicLong pending = new AtomicLong();
    private volatile boolean closed;
    /** Guarded by {@link #pending}: a close's executor shutdown threw; the next close tries again. */
    private boolean shutdownFailed;
    /** How long {@link #close()} waits for accepted work. */
    private final long closeWaitNanos;
    /**
     * The pieces of this manager's stream work the calling thread is running now (the entry is
     * removed when empty): a {@link #close()} called from
     * inside stream work (a callback that stops the backend) must not wait for work that cannot end
     * before it returns, and a wait on the default stream from inside it must not block on an event
     * that follows it.
     */
    private final ThreadLocal<List<Running>> runningHere = ThreadLocal.withInitial(ArrayList::new);
    /** Guarded by itself: the stream work of this manager now blocked in a wait on the default stream, by thread. */
    private final Map<Thread, BlockedWait> blockedWaits = new HashMap<>();
    /** Tests: runs in {@link #waitEvent} between its open check and its event lookup (a close forced there). */
    volatile Runnable beforeEventLookup;
    /** Tests: runs in {@link #createStream} and {@link #recordEvent} between the open check and the id's issue (a close forced there). */
    volatile Runnable beforeIssue;

    private static final class Stream {
        /** Never completes exceptionally, so that work after a failure still runs. */
        CompletableFuture<Void> tail = CompletableFuture.completedFuture(null);
        /** Guarded by this: how much work was submitted to it; the n-th piece is number n. */
        long submitted;
        /** The number of its last work that has ended (work on a stream ends in order). */
        volatile long ended;
        /**
         * Guarded by this: for other streams, the number of their last unfinished work that its tail
         * waits for (waitEvent); work that has ended is dropped, so this stays as small as that.
         */
        Map<Stream, Long> after = Map.of();

        /** Under this: the unfinished work of each stream that its tail comes after, its own included. */
        Map<Stream, Long> frontier() {
            Map<Stream, Long> f = unfinished(after, Map.of());
            if (ended < submitted) {
                f.put(this, submitted);
            }
            return f;
        }
    }

    /** @return the entries of {@code a} and {@code b} whose work has not ended, the later number of each stream */
    private static Map<Stream, Long> unfinished(Map<Stream, Long> a, Map<Stream, Long> b) {
        Map<Stream, Long> out = new HashMap<>();
        for (Map<Stream, Long> m : List.of(a, b)) {
            m.forEach((stream, n) -> {
                if (stream.ended < n) {
                    out.merge(stream, n, Math::max);
                }
            });
        }
        return out;
    }

    /** An event: the stream's chain when it was recorded, and the unfinished work of each stream it comes after. */
    private record Recorded(CompletableFuture<Void> at, Map<Stream, Long> after) {
    }

    /** A piece of stream work a thread runs: its stream and its number there. */
    private record Running(Stream stream, long number) {
    }

    /** Stream work blocked in a wait on the default stream: the pieces its thread runs, and the event. */
    private record BlockedWait(List<Running> running, Recorded on) {
    }

    /**
     * @param device the device whose streams these are
     * @throws MemoryException when the JVM has no stream manager number left (after 2^22 - 1)
     */
    public HostStreamManager(Device device) {
        this(device, threads(device), StreamIds.MAX_SEQUENCE);
    }

    /** Tests: runs stream work on {@code executor} (one that refuses work, say). */
    HostStreamManager(Device device, ExecutorService executor) {
        this(device, executor, StreamIds.MAX_SEQUENCE);
    }

    /** Tests: at most {@code sequenceLimit} ids of each kind per number, so that numbers run out quickly. */
    HostStreamManager(Device device, ExecutorService executor, long sequenceLimit) {
        this(device, executor, sequenceLimit, CLOSE_WAIT_NANOS);
    }

    /** Tests: {@link #close()} waits at most {@code closeWaitNanos} for accepted work. */
    HostStreamManager(Device device, ExecutorService executor, long sequenceLimit, long closeWaitNanos) {
        this.device = device;
        this.executor = executor;
        this.ids = new StreamIds(device, sequenceLimit);
        this.closeWaitNanos = closeWaitNanos;
    }

    private static ExecutorService threads(Device device) {
        AtomicInteger n = new AtomicInteger();
        return Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "ferrum-stream-" + device + "-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
    }

    // ================================================================ checks

    private void checkOpen() {
        if (closed) {
            throw new DeviceUnavailableException(device, "The stream manager of " + device
                    + " is closed (its backend was stopped)");
        }
    }

    private void checkDevice(Device d) {
        if (!device.equals(d)) {
            throw new InvalidMemoryRequestException("Device " + d + " is not served by this stream manager, which serves "
                    + device);
        }
    }

    private Stream stream(StreamHandle handle) {
        if (handle == null) {
            throw new InvalidMemoryRequestException("Stream handle is null; use StreamHandle.DEFAULT for the default stream");
        }
        Stream s = streams.get(handle.id());
        if (s == null) {
            // close() forgets every stream: a call that raced it hears why, not "unknown stream".
            checkOpen();
            throw unknownStream(handle.id());
        }
        return s;
    }

    private InvalidMemoryRequestException unknownStream(long id) {
        if (!ids.isOwn(id)) {
            return new InvalidMemoryRequestException(ids.foreign("Stream", id));
        }
        if (StreamIds.isEvent(id)) {
            return new InvalidMemoryRequestException("Id " + id + " on " + device
                    + " is an event, not a stream: create a stream with createStream");
        }
        if (ids.issuedStream(id)) {
            return new InvalidMemoryRequestException("The stream " + id + " on " + device + " was already destroyed");
        }
        return new InvalidMemoryRequestException("Unknown stream " + id + " on " + device
                + ": it was never created here; create it with createStream");
    }

    private InvalidMemoryRequestException unknownEvent(EventHandle event) {
        if (event == null) {
            return new InvalidMemoryRequestException("Event is null on " + device + ": record one with recordEvent");
        }
        long id = event.id();
        if (!ids.isOwn(id)) {
            return new InvalidMemoryRequestException(ids.foreign("Event", id));
        }
        if (!StreamIds.isEvent(id)) {
            return new InvalidMemoryRequestException("Unknown event " + id + " on " + device
                    + ": that id is a stream's, not an event's; record an event with recordEvent");
        }
        return new InvalidMemoryRequestException("Event " + id + " was never recorded on " + device
                + ": record it with recordEvent on this stream manager first");
    }

    // ================================================================ streams and events

    @Override
    public Device device() {
        return device;
    }

    /**
     * Whether this manager runs work on {@code stream}: the default stream, or one of its live
     * streams. O(1) and without a lock, for the engine's check of an async copy's stream before it
     * pins the copy's blocks. It does not look at whether the manager is open ({@link #submit} does).
     *
     * @param stream a stream handle; {@code null} stands for the default stream, as in {@link #submit}
     * @return true for the default stream or a live stream of this manager; false for a destroyed
     *         stream, another stream manager's stream, an event id, or an id never issued
     */
    @Override
    public boolean knows(StreamHandle stream) {
        return stream == null || stream.isDefault() || streams.containsKey(stream.id());
    }

    @Override
    public StreamHandle createStream(Device d) {
        checkOpen();
        checkDevice(d);
        Runnable hook = beforeIssue;
        if (hook != null) {
            hook.run();
        }
        long id = ids.issue(false);
        streams.put(id, new Stream());
        if (closed) {
            // A close that ran since the open check forgot every stream before this one was listed.
            streams.remove(id);
            checkOpen();
        }
        return new StreamHandle(id);
    }

    @Override
    public void destroyStream(StreamHandle handle) {
        checkOpen();
        if (handle != null && handle.isDefault()) {
            throw new InvalidMemoryRequestException("The default stream of " + device + " cannot be destroyed");
        }
        stream(handle);
        if (streams.remove(handle.id()) == null) {
            throw new InvalidMemoryRequestException("The stream " + handle.id() + " on " + device + " was already destroyed");
        }
        // Work already submitted still runs to completion on the executor.
    }

    @Override
    public CompletionStage<Void> synchronizeStream(StreamHandle handle) {
        checkOpen();
        if (handle == null || handle.isDefault()) {
            return CompletableFuture.completedFuture(null);
        }
        Stream s = stream(handle);
        synchronized (s) {
            return s.tail.copy();
        }
    }

    @Override
    public boolean isStreamReady(StreamHandle handle) {
        checkOpen();
        if (handle == null || handle.isDefault()) {
            return true;
        }
        Stream s = stream(handle);
        synchronized (s) {
            return s.tail.isDone();
        }
    }

    @Override
    public StreamHandle defaultStream(Device d) {
        checkDevice(d);
        return StreamHandle.DEFAULT;
    }

    @Override
    public EventHandle recordEvent(StreamHandle handle) {
        checkOpen();
        Recorded at;
        if (handle == null || handle.isDefault()) {
            at = new Recorded(CompletableFuture.completedFuture(null), Map.of());
        } else {
            Stream s = stream(handle);
            synchronized (s) {
                at = new Recorded(s.tail, s.frontier());
            }
        }
        Runnable hook = beforeIssue;
        if (hook != null) {
            hook.run();
        }
        if (events.size() >= EVENT_SWEEP_THRESHOLD) {
            events.values().removeIf(r -> r.at().isDone());
        }
        long id = ids.issue(true);
        events.put(id, at);
        if (closed) {
            // A close that ran since the open check forgot every event before this one was stored:
            // refused, as every call after close is, and not kept.
            events.remove(id);
            checkOpen();
        }
        return new EventHandle(id);
    }

    /**
     * {@inheritDoc}
     *
     * <p>An event this manager recorded and has since dropped (it had completed) is waited on at once:
     * a no-op. Any other id is refused: another stream manager's event, a stream's id, an id never
     * issued. A wait racing {@link #close()} either waits for the event or is refused with {@link
     * DeviceUnavailableException}; it never returns at once for an event whose work has not run. A
     * wait on the default stream blocks the caller: called from inside stream work, for an event that
     * comes after that work (recorded on its stream after it, or on a stream that waits on such an
     * event), or after other stream work blocked in such a wait for an event that does (a circle of
     * waits), it could never end, and is refused with {@link InvalidMemoryRequestException}. An
     * interrupt of the waiting thread ends that wait with {@link MemoryException} (cause {@link
     * InterruptedException}), its interrupt flag kept; the event stays recorded.
     */
    @Override
    public void waitEvent(StreamHandle handle, EventHandle event) {
        checkOpen();
        Runnable hook = beforeEventLookup;
        if (hook != null) {
            hook.run();
        }
        Recorded at = event == null ? null : events.get(event.id());
        // Checked again after the lookup: close sets closed before it forgets every event, so an event
        // missing because a racing close forgot it (its work perhaps not run) is refused here, never
        // taken below for one swept because it had completed.
        checkOpen();
        if (at == null) {
            if (event != null && ids.recordedEvent(event.id())) {
                // Recorded here and swept: only completed events are swept, so waiting on it is a no-op.
                if (handle != null && !handle.isDefault()) {
                    stream(handle);
                }
                return;
            }
            throw unknownEvent(event);
        }
        if (handle == null || handle.isDefault()) {
            awaitHere(event.id(), at);
            return;
        }
        Stream s = stream(handle);
        synchronized (s) {
            s.tail = s.tail.thenCombine(at.at(), (a, b) -> (Void) null);
            s.after = unfinished(s.after, at.after());
        }
    }

    /**
     * Blocks the calling thread until the event {@code id}, {@code at}, has completed. Stream work
     * that waits here is listed in {@link #blockedWaits} meanwhile: a wait that would close a circle
     * of such waits (an event that comes after the waiting work itself, or after other stream work
     * blocked here for an event that does) could never end, and is refused instead.
     */
    private void awaitHere(long id, Recorded at) {
        if (at.at().isDone()) {
            return;
        }
        List<Running> here = runningHere.get();
        Thread me = Thread.currentThread();
        boolean listed = false;
        if (here.isEmpty()) {
            // Not stream work: nothing of this manager waits for this thread.
            runningHere.remove();
        } else {
            List<Running> mine = List.copyOf(here);
            synchronized (blockedWaits) {
                int circle = circle(mine, at);
                if (circle == 1) {
                    // It completes only after the work this thread runs returns.
                    throw new InvalidMemoryRequestException("Event " + id + " on " + device + " comes after the"
                            + " stream work that calls this wait, so waiting for it here on the default stream would"
                            + " never end; wait for it on another stream (waitEvent(stream, event)) or after this work");
                }
                if (circle == 2) {
                    throw new InvalidMemoryRequestException("Event " + id + " on " + device + " comes after stream"
                            + " work that is blocked in a wait on the default stream for an event that comes after the"
                            + " stream work that calls this wait, so neither wait would ever end; wait for it on"
                            + " another stream (waitEvent(stream, event)) or after this work");
                }
                blockedWaits.put(me, new BlockedWait(mine, at));
                listed = true;
            }
        }
        try {
            at.at().get();
        } catch (InterruptedException interrupted) {
            // Ctrl-C in a shell, a component's deactivation: the caller stops waiting, the work and
            // the event stay as they were.
            Thread.currentThread().interrupt();
            throw new MemoryException("The wait on the default stream of " + device + " for event " + id
                    + " was interrupted before the work before the event had run; the event is still"
                    + " recorded: wait for it again", interrupted);
        } catch (ExecutionException | CancellationException never) {
            // An event is a chain of settled futures: it neither fails nor is cancelled.
            throw new IllegalStateException("Event " + id + " on " + device + " failed", never);
        } finally {
            if (listed) {
                synchronized (blockedWaits) {
                    blockedWaits.remove(me);
                }
            }
        }
    }

    /**
     * Under {@link #blockedWaits}: whether stream work {@code mine} waiting for {@code event} on the
     * default stream would never end. An event that comes after a piece of blocked work completes only
     * after the event that work waits for, so the search follows those waits. No false alarm: an
     * event that comes after unfinished work has not completed.
     *
     * @return 0: it may end; 1: the event comes after {@code mine}; 2: it comes after blocked work
     *         whose wait, directly or through others, does
     */
    private int circle(List<Running> mine, Recorded event) {
        if (follows(event, mine)) {
            return 1;
        }
        ArrayDeque<Recorded> todo = new ArrayDeque<>();
        todo.add(event);
        Set<Thread> seen = new HashSet<>();
        while (!todo.isEmpty()) {
            Recorded e = todo.poll();
            for (Map.Entry<Thread, BlockedWait> b : blockedWaits.entrySet()) {
                if (!seen.contains(b.getKey()) && follows(e, b.getValue().running())) {
                    if (follows(b.getValue().on(), mine)) {
                        return 2;
                    }
                    seen.add(b.getKey());
                    todo.add(b.getValue().on());
                }
            }
        }
        return 0;
    }

    /** @return true if {@code event} comes after one of the pieces of stream work {@code works} */
    private static boolean follows(Recorded event, List<Running> works) {
        for (Running work : works) {
            Long last = event.after().get(work.stream());
            if (last != null && last >= work.number()) {
                return true;
            }
        }
        return false;
    }

    @Override
    public List<StreamHandle> streams() {
        List<StreamHandle> out = new ArrayList<>();
        out.add(StreamHandle.DEFAULT);
        streams.keySet().stream().sorted().forEach(id -> out.add(new StreamHandle(id)));
        return out;
    }

    // ================================================================ work

    /**
     * Runs {@code work} on a stream: in order after everything submitted to that stream before, or
     * on the caller's thread for the default stream.
     *
     * <p><b>Contract</b> (the engine relies on it to release the pins of an async copy, which its
     * work does): either this method throws, and then {@code work} was not accepted and will never
     * run, or it returns, and then {@code work} runs exactly once and the returned future completes.
     * It throws {@link DeviceUnavailableException} once {@link #close()} has begun and {@link
     * InvalidMemoryRequestException} for a stream that is not a live stream of this manager. Work
     * accepted runs even if the manager is closed meanwhile, and even if the thread pool refuses it
     * (no thread could be started): then it runs on the thread that finished the work before it on
     * the stream, or on the caller's thread if that work had already finished; in both cases after
     * the stream's tail has moved past it and outside the stream's monitor, so work it submits to its
     * own stream runs after it, and other calls on the stream go on meanwhile.
     *
     * @param handle the stream, or {@code null} for the default stream
     * @param work   what to run, not null
     * @return completes when the work has run, exceptionally if it threw (the stream goes on with
     *         the next work)
     */
    @Override
    public CompletableFuture<Void> submit(StreamHandle handle, Runnable work) {
        if (work == null) {
            throw new InvalidMemoryRequestException("Work is null on " + device + "'s stream manager");
        }
        if (handle == null || handle.isDefault()) {
            checkOpen();
            try {
                work.run();
                return CompletableFuture.completedFuture(null);
            } catch (RuntimeException | Error e) {
                return CompletableFuture.failedFuture(e);
            }
        }
        checkOpen();
        Stream s = stream(handle);
        // Counted before the closed check, and close sets closed before it reads the count: either
        // this call sees closed and backs out, or close sees the work and waits for it.
        pending.incrementAndGet();
        if (closed) {
            finished();
            checkOpen();
        }
        CompletableFuture<Void> f;
        CompletableFuture<Void> settled;
        CompletableFuture<Void> before;
        CompletableFuture<Void> start = new CompletableFuture<>();
        try {
            synchronized (s) {
                Running self = new Running(s, s.submitted + 1);
                Runnable counted = () -> {
                    List<Running> here = runningHere.get();
                    here.add(self);
                    try {
                        work.run();
                    } finally {
                        here.removeLast();
                        if (here.isEmpty()) {
                            runningHere.remove();
                        }
                        s.ended = self.number();
                        finished();
                    }
                };
                s.submitted = self.number();
                f = start.thenRunAsync(counted, runner);
                settled = f.exceptionally(e -> null);
                before = s.tail;
                s.tail = settled;
            }
        } catch (RuntimeException | Error e) {
            // Nothing was chained (out of memory, say): the work was not accepted.
            finished();
            throw e;
        }
        // Started only here, outside the stream's monitor and once the tail has moved past it: when
        // the executor refuses, the work runs on this thread (or on the one that ends the work before
        // it), and then it holds no lock another call on the stream needs, and work it submits to its
        // own stream chains behind it instead of running at once, nested inside it.
        before.whenComplete((v, e) -> start.complete(null));
        // Completes after the stream's tail: whoever sees this work done finds the stream ready.
        return settled.thenCompose(v -> f);
    }

    private void execute(Runnable task) {
        try {
            executor.execute(task);
        } catch (RejectedExecutionException | OutOfMemoryError notTaken) {
            // The pool did not take the task (shut down, or no thread could be started), so it has not
            // run: run it here, or accepted work would be dropped and its stage never run.
            task.run();
        }
    }

    private void finished() {
        if (pending.decrementAndGet() == 0 && closed) {
            synchronized (pending) {
                pending.notifyAll();
            }
            executor.shutdown();
        }
    }

    /**
     * @return true once {@link #close()} has begun (every later call is refused)
     * @since 2.5
     */
    public boolean isClosed() {
        return closed;
    }

    /**
     * Refuses every later call with {@link DeviceUnavailableException}, then waits up to 10 s for the
     * work already accepted on streams to run. Work accepted is never dropped: what has not run when
     * the wait ends (work behind a stream's work that still blocks) runs when the work before it
     * finishes, and the pool's threads stop after the last of it (they are never interrupted).
     * Called from inside this manager's stream work (a callback that stops the backend), it does not
     * wait at all: that work, and whatever is ordered after it, can only run after this returns.
     * Idempotent. An interrupt of the closing thread ends the wait, and its flag stays set. What the
     * executor's shutdown throws reaches the caller once the manager has forgotten its streams and
     * ids; the next close then tries the shutdown again.
     */
    @Override
    public void close() {
        long deadline = System.nanoTime() + closeWaitNanos;
        int own = runningHere.get().size();
        if (own == 0) {
            runningHere.remove();
        }
        synchronized (pending) {
            if (closed) {
                if (!shutdownFailed) {
                    return;
                }
                shutdownFailed = false; // this call tries again
            } else {
                closed = true;
                // Called from inside stream work, it does not wait: that work ends only after this
                // returns, and so does the work behind it, on its stream or waiting on its events.
                while (own == 0 && pending.get() > 0) {
                    long left = deadline - System.nanoTime();
                    if (left <= 0) {
                        break;
                    }
                    try {
                        TimeUnit.NANOSECONDS.timedWait(pending, left);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        break;
                    }
                }
            }
        }
        // The manager's own state first: its ids are listed JVM-wide, and an executor whose shutdown
        // throws must not keep them listed for good.
        ids.close();
        streams.clear();
        events.clear();
        if (pending.get() == 0) {
            boolean shut = false;
            try {
                executor.shutdown();
                shut = true;
            } finally {
                if (!shut) {
                    synchronized (pending) {
                        shutdownFailed = true; // the next close tries again
                    }
                }
            }
        }
    }
}
