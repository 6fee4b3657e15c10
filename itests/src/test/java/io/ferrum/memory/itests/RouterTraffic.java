package io.ferrum.memory.itests;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

import org.osgi.framework.AllServiceListener;
import org.osgi.framework.BundleContext;
import org.osgi.framework.InvalidSyntaxException;
import org.osgi.framework.ServiceReference;
import org.osgi.util.tracker.ServiceTracker;

/**
 * Traffic through the {@code MemoryRouter} while bundles come and go: one thread allocates a block,
 * writes a pattern through {@code mapMemory}, maps it again to read the pattern back, and frees it,
 * round after round. When the router goes away it waits for the next one (a service tracker).
 *
 * <p>What reaches it is sorted: the exceptions a stopping service may document
 * ({@code DeviceUnavailableException}, and {@code InvalidHandleException} for a block whose manager
 * went away) and a view that its manager closed under an access ({@link IllegalStateException}
 * from a closed view, as {@code mapMemory} documents) are counted as refusals; anything else, and a
 * pattern read back wrong, is a failure, kept with its stack; a refused free of a block that a
 * running manager still holds is kept apart (issue 13, defect 20). After a refusal that only a
 * service change can lift (no device, no strategy) it waits for one, at most 20 ms, rather than spin.
 *
 * <p>The worker never names an API type (see {@link ApiRevision}), so one thread lives through every
 * revision of every bundle.
 */
final class RouterTraffic implements Runnable {
    /** Thread-cached, pooled and mid-size blocks; multiples of 8 so that the pattern is whole longs. */
    private static final long[] SIZES = {1024, 4096, 24_576, 65_536, 262_144, 1 << 20};
    private static final long MIX = 0x9E3779B97F4A7C15L;

    private final BundleContext context;
    private final ServiceTracker<Object, Object> routers;
    private final AtomicLong rounds = new AtomicLong();
    private final Map<String, Refusal> refusals = new ConcurrentSkipListMap<>();
    private final List<String> failures = new CopyOnWriteArrayList<>();
    private final List<String> falseRefusals = new CopyOnWriteArrayList<>();
    private final LongAdder interruptsAfterClosedViews = new LongAdder();
    private final Object gate = new Object();
    private boolean pauseWanted;
    private boolean paused;
    private volatile boolean stopped;
    private volatile Thread thread;
    /** What the worker is doing, for failure messages. */
    private volatile String step = "starting";
    /** What the test is doing, for failure messages. */
    private volatile String phase = "start";
    /** Registrations, modifications and unregistrations of our services seen so far. */
    private final AtomicLong serviceEvents = new AtomicLong();
    private final AllServiceListener changes = e -> {
        serviceEvents.incrementAndGet();
        synchronized (gate) {
            gate.notifyAll();
        }
    };
    /** The API revision of the last service used; worker thread only. */
    private ApiRevision api;

    RouterTraffic(BundleContext context) throws InvalidSyntaxException {
        this.context = context;
        this.routers = new ServiceTracker<>(context, context.createFilter("(objectClass=" + ApiRevision.ROUTER + ")"), null);
        // All services, so that the framework never checks (or dynamically wires) the api package for the probe.
        routers.open(true);
        context.addServiceListener(changes, "(objectClass=io.ferrum.memory.*)");
    }

    // ================================================================ control

    /** @return rounds completed: allocated, written, read back and freed */
    long rounds() {
        return rounds.get();
    }

    /** @return undocumented exceptions and wrong results, each with its stack or details */
    List<String> failures() {
        return List.copyOf(failures);
    }

    /**
     * @return refusals to free a block that a running manager still held (issue 13, defect 20: a
     *         stopped router says the block's device went away and its memory was released)
     */
    List<String> falseRefusals() {
        return List.copyOf(falseRefusals);
    }

    /** @param what what the test does now, named in failures */
    void during(String what) {
        phase = what;
    }

    /** @return documented refusals by step and exception, with their counts */
    String refusals() {
        StringBuilder sb = new StringBuilder();
        refusals.forEach((what, r) -> sb.append(String.format("%8d  %s (first during %s)%n", r.count.sum(), what, r.first)));
        if (interruptsAfterClosedViews.sum() > 0) {
            sb.append(String.format("%8d  interrupt flag found set after a view was closed under an access%n",
                    interruptsAfterClosedViews.sum()));
        }
        return sb.toString();
    }

    /**
     * Waits until the worker has completed {@code target} rounds in all.
     *
     * @param what what the rounds show, for the failure message
     */
    void awaitRounds(long target, String what) throws InterruptedException {
        synchronized (gate) {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Await.TIMEOUT_MS);
            while (rounds.get() < target) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new AssertionError("timed out waiting for " + what + ": " + rounds.get() + " of " + target
                            + " rounds; the worker is at '" + step + "'; documented refusals:" + System.lineSeparator()
                            + refusals() + "failures: " + failures);
                }
                TimeUnit.NANOSECONDS.timedWait(gate, left);
            }
        }
    }

    /** Waits until the worker has finished its round and holds no block; it waits until {@link #resume()}. */
    void pause() throws InterruptedException {
        synchronized (gate) {
            pauseWanted = true;
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(Await.TIMEOUT_MS);
            while (!paused) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    throw new AssertionError("the traffic worker did not pause within " + Await.TIMEOUT_MS + " ms; it is at '"
                            + step + "':" + System.lineSeparator() + stackOf(thread));
                }
                TimeUnit.NANOSECONDS.timedWait(gate, left);
            }
        }
    }

    void resume() {
        synchronized (gate) {
            pauseWanted = false;
            gate.notifyAll();
        }
    }

    /** Ends the worker after its round and waits for its thread to end. */
    void stop() throws InterruptedException {
        stopped = true;
        resume();
        Thread t = thread;
        if (t != null) {
            t.join(Await.TIMEOUT_MS);
            if (t.isAlive()) {
                throw new AssertionError("the traffic worker did not end; it is at '" + step + "':"
                        + System.lineSeparator() + stackOf(t));
            }
        }
        routers.close();
        context.removeServiceListener(changes);
    }

    // ================================================================ the worker

    @Override
    public void run() {
        thread = Thread.currentThread();
        long n = 0;
        try {
            while (!stopped) {
                holdWhilePaused();
                if (stopped) {
                    break;
                }
                Object router;
                try {
                    step = "waiting for a router";
                    router = routers.waitForService(20);
                } catch (InterruptedException e) {
                    continue;
                }
                if (router != null) {
                    round(router, n++);
                }
            }
        } catch (Throwable t) {
            fail("the worker died at '" + step + "': " + stackOf(t));
        } finally {
            api = null;
            step = "ended";
        }
    }

    private void holdWhilePaused() throws InterruptedException {
        synchronized (gate) {
            while (pauseWanted && !stopped) {
                if (!paused) {
                    paused = true;
                    step = "paused";
                    gate.notifyAll();
                }
                gate.wait();
            }
            paused = false;
        }
    }

    /** One block: allocate, write, read back, free; whatever is thrown is sorted here. */
    private void round(Object router, long n) {
        long size = SIZES[(int) (n % SIZES.length)];
        long seed = n * MIX;
        long id;
        long events = serviceEvents.get();
        try {
            step = "allocate";
            id = revisionOf(router).allocate(router, size);
        } catch (Throwable t) {
            sort(t);
            // No device or no strategy: nothing changes until a service of ours does.
            awaitServiceChange(events);
            return;
        }
        boolean freed = false;
        try {
            step = "owner";
            String device = revisionOf(router).owner(router, id);
            if (device == null) {
                refused("owner: no device knows the block just allocated (its device went away)");
                return;
            }
            writeAndVerify(device, id, size, seed);
            step = "free";
            revisionOf(router).deallocate(router, id);
            freed = true;
            rounds.incrementAndGet();
            synchronized (gate) {
                gate.notifyAll();
            }
        } catch (Throwable t) {
            sort(t);
        } finally {
            if (!freed) {
                release(router, id);
            }
        }
    }

    private void writeAndVerify(String device, long id, long size, long seed) throws InvalidSyntaxException {
        step = "find the manager";
        long events = serviceEvents.get();
        ServiceReference<?> ref = managerOf(device);
        Object manager = ref == null ? null : context.getService(ref);
        if (manager == null) {
            // The router still places blocks on a device whose manager is no longer registered: it is stopping.
            refused("find the manager: no AdvancedMemoryManager service for " + device);
            awaitServiceChange(events);
            return;
        }
        try {
            ApiRevision m = revisionOf(manager);
            long longs = size / Long.BYTES;
            step = "map for writing";
            MemorySegment w = m.map(manager, id, true);
            step = "write";
            try {
                for (long i = 0; i < longs; i++) {
                    w.setAtIndex(ValueLayout.JAVA_LONG, i, seed + i);
                }
            } catch (IllegalStateException e) {
                throw closedView(w, e);
            }
            step = "unmap after writing";
            m.unmap(manager, id);
            step = "map for reading";
            MemorySegment r = m.map(manager, id, false);
            step = "read back";
            try {
                for (long i = 0; i < longs; i++) {
                    long got = r.getAtIndex(ValueLayout.JAVA_LONG, i);
                    if (got != seed + i) {
                        fail(String.format("block 0x%016x of %d bytes on %s: long %d read back 0x%016x, written 0x%016x",
                                id, size, device, i, got, seed + i));
                        break;
                    }
                }
            } catch (IllegalStateException e) {
                throw closedView(r, e);
            }
            step = "unmap after reading";
            m.unmap(manager, id);
        } finally {
            context.ungetService(ref);
        }
    }

    /** @return the refusal for a view closed under an access, or {@code e} itself if the view is open */
    private RuntimeException closedView(MemorySegment view, IllegalStateException e) {
        if (view.scope().isAlive()) {
            return e;
        }
        // JDK 25: closing a shared arena under a reader can leave the reader's interrupt flag set.
        if (Thread.interrupted()) {
            interruptsAfterClosedViews.increment();
        }
        return new ClosedView(step, e);
    }

    /** A view closed by its manager (a free, a stop) under an access: documented by mapMemory. */
    private static final class ClosedView extends RuntimeException {
        private static final long serialVersionUID = 1L;

        ClosedView(String step, IllegalStateException cause) {
            super(step + ": the view was closed under the access", cause);
        }
    }

    /**
     * A block the round could not free normally: the router frees it, or must say why not. If it
     * refuses while a running manager still holds the block, it must say that it is stopped and the
     * block untouched; any other refusal is false (a caller who believed it would leak the block):
     * the block is freed there and the refusal is a failure.
     */
    private void release(Object router, long id) {
        try {
            step = "free after a failed round";
            revisionOf(router).deallocate(router, id);
            return;
        } catch (Throwable t) {
            if (!documented(t)) {
                fail("free after a failed round of 0x" + Long.toHexString(id) + " threw " + stackOf(t));
                return;
            }
            try {
                String holder = freeWhereStillHeld(id);
                String message = String.valueOf(t.getMessage());
                if (holder != null && message.contains("is stopped") && message.contains("untouched")) {
                    // A true refusal: a stopped router says so and that the block stays live (defect 20's fix);
                    // the caller frees it on the running router or its manager, as done here.
                    refused("free through a stopped router, then on its manager: " + t.getClass().getSimpleName());
                } else if (holder != null) {
                    falseRefusals.add(String.format("%s: the router refused to free block 0x%016x (%s: %s), but %s still"
                            + " held it; freed there", phase, id, t.getClass().getSimpleName(), t.getMessage(), holder));
                } else {
                    refused("free after a failed round: " + t.getClass().getSimpleName());
                }
            } catch (Throwable u) {
                fail("looking for a holder of 0x" + Long.toHexString(id) + " threw " + stackOf(u));
            }
        }
    }

    /** @return the device of a running manager that held block {@code id} (now freed there), or null */
    private String freeWhereStillHeld(long id) throws InvalidSyntaxException {
        ServiceReference<?>[] refs = context.getAllServiceReferences(ApiRevision.MANAGER, null);
        for (ServiceReference<?> ref : refs == null ? new ServiceReference<?>[0] : refs) {
            Object manager = context.getService(ref);
            if (manager == null) {
                continue;
            }
            try {
                ApiRevision m = revisionOf(manager);
                if (m.owns(manager, id)) {
                    try {
                        m.free(manager, id);
                    } catch (RuntimeException e) {
                        if (e.getClass().getSimpleName().equals("DeviceUnavailableException")) {
                            // The manager closed between owns and free: its close released the block.
                            continue;
                        }
                        throw e;
                    }
                    return String.valueOf(ref.getProperty(ApiRevision.DEVICE_PROPERTY));
                }
            } finally {
                context.ungetService(ref);
            }
        }
        return null;
    }

    private ServiceReference<?> managerOf(String device) throws InvalidSyntaxException {
        ServiceReference<?>[] refs = context.getAllServiceReferences(ApiRevision.ADVANCED_MANAGER,
                "(" + ApiRevision.DEVICE_PROPERTY + "=" + device + ")");
        if (refs == null) {
            return null;
        }
        // The highest ranking serves a device, as in the monitor.
        return Arrays.stream(refs).max(ServiceReference::compareTo).orElse(null);
    }

    /** @return the API of {@code service}'s revision: the one in use, or a new one when it changed */
    private ApiRevision revisionOf(Object service) {
        ApiRevision a = api;
        if (a == null || !a.serves(service)) {
            a = ApiRevision.of(service);
            api = a;
        }
        return a;
    }

    // ================================================================ sorting what came back

    private static boolean documented(Throwable t) {
        return ApiRevision.is(t, "DeviceUnavailableException") || ApiRevision.is(t, "InvalidHandleException");
    }

    private void sort(Throwable t) {
        if (t instanceof ClosedView) {
            refused(t.getMessage());
        } else if (documented(t)) {
            refused(step + ": " + t.getClass().getSimpleName());
        } else {
            fail(step + " threw " + stackOf(t));
        }
    }

    private void fail(String what) {
        failures.add(phase + ": " + what);
    }

    /** Waits until a service of ours changes after {@code seen} events, the test pauses or stops the worker, or 20 ms pass. */
    private void awaitServiceChange(long seen) {
        synchronized (gate) {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(20);
            while (serviceEvents.get() == seen && !pauseWanted && !stopped) {
                long left = deadline - System.nanoTime();
                if (left <= 0) {
                    return;
                }
                try {
                    TimeUnit.NANOSECONDS.timedWait(gate, left);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }
    }

    /** A kind of documented refusal: how often, and during which step of the test it came first. */
    private record Refusal(LongAdder count, String first) {
    }

    private void refused(String what) {
        refusals.computeIfAbsent(what, k -> new Refusal(new LongAdder(), phase)).count().increment();
    }

    static String stackOf(Throwable t) {
        StringWriter w = new StringWriter();
        t.printStackTrace(new PrintWriter(w));
        return w.toString();
    }

    static String stackOf(Thread t) {
        if (t == null) {
            return "(not started)";
        }
        StringBuilder sb = new StringBuilder();
        for (StackTraceElement e : t.getStackTrace()) {
            sb.append("\tat ").append(e).append(System.lineSeparator());
        }
        return sb.toString();
    }
}
