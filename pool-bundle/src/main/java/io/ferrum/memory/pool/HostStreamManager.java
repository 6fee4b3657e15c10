package io.ferrum.memory.pool;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.EventHandle;
import io.ferrum.memory.api.InvalidMemoryRequestException;
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
 * <p>Thread-safe. {@link #close()} waits briefly for submitted work and then refuses new work with
 * {@link DeviceUnavailableException}.
 */
public final class HostStreamManager implements StreamManager, AutoCloseable {
    private static final int EVENT_SWEEP_THRESHOLD = 4096;

    private final Device device;
    private final ExecutorService executor;
    private final AtomicLong ids = new AtomicLong();
    private final ConcurrentHashMap<Long, Stream> streams = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<Long, CompletableFuture<Void>> events = new ConcurrentHashMap<>();
    private volatile boolean closed;

    private static final class Stream {
        /** Never completes exceptionally, so that work after a failure still runs. */
        CompletableFuture<Void> tail = CompletableFuture.completedFuture(null);
    }

    /**
     * @param device the device whose streams these are
     */
    public HostStreamManager(Device device) {
        this.device = device;
        AtomicInteger n = new AtomicInteger();
        this.executor = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "ferrum-stream-" + device + "-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        });
    }

    @Override
    public Device device() {
        return device;
    }

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
            throw new InvalidMemoryRequestException("Unknown stream " + handle.id() + " on " + device
                    + ": it was never created here or was already destroyed");
        }
        return s;
    }

    @Override
    public StreamHandle createStream(Device d) {
        checkOpen();
        checkDevice(d);
        long id = ids.incrementAndGet();
        streams.put(id, new Stream());
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
            throw new InvalidMemoryRequestException("Stream " + handle.id() + " on " + device + " was already destroyed");
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
        CompletableFuture<Void> at;
        if (handle == null || handle.isDefault()) {
            at = CompletableFuture.completedFuture(null);
        } else {
            Stream s = stream(handle);
            synchronized (s) {
                at = s.tail;
            }
        }
        if (events.size() >= EVENT_SWEEP_THRESHOLD) {
            events.values().removeIf(CompletableFuture::isDone);
        }
        long id = ids.incrementAndGet();
        events.put(id, at);
        return new EventHandle(id);
    }

    @Override
    public void waitEvent(StreamHandle handle, EventHandle event) {
        checkOpen();
        CompletableFuture<Void> at = event == null ? null : events.get(event.id());
        if (at == null) {
            if (event != null && event.id() > 0 && event.id() <= ids.get()) {
                // A swept event had completed: waiting on it is a no-op.
                return;
            }
            throw new InvalidMemoryRequestException("Unknown event " + (event == null ? "null" : event.id()) + " on "
                    + device + ": record it with recordEvent on this stream manager first");
        }
        if (handle == null || handle.isDefault()) {
            at.join();
            return;
        }
        Stream s = stream(handle);
        synchronized (s) {
            s.tail = s.tail.thenCombine(at, (a, b) -> (Void) null);
        }
    }

    @Override
    public List<StreamHandle> streams() {
        List<StreamHandle> out = new ArrayList<>();
        out.add(StreamHandle.DEFAULT);
        streams.keySet().stream().sorted().forEach(id -> out.add(new StreamHandle(id)));
        return out;
    }

    /**
     * Runs {@code work} on a stream: in order after everything submitted to that stream before, or
     * on the caller's thread for the default stream.
     *
     * @param handle the stream, or {@code null} for the default stream
     * @param work   what to run
     * @return completes when the work has run, exceptionally if it threw
     */
    public CompletableFuture<Void> submit(StreamHandle handle, Runnable work) {
        checkOpen();
        if (handle == null || handle.isDefault()) {
            try {
                work.run();
                return CompletableFuture.completedFuture(null);
            } catch (RuntimeException | Error e) {
                return CompletableFuture.failedFuture(e);
            }
        }
        Stream s = stream(handle);
        synchronized (s) {
            CompletableFuture<Void> f = s.tail.thenRunAsync(work, executor);
            CompletableFuture<Void> settled = f.exceptionally(e -> null);
            s.tail = settled;
            // Completes after the stream's tail: whoever sees this work done finds the stream ready.
            return settled.thenCompose(v -> f);
        }
    }

    /** Waits up to 10 s for submitted work, then stops the threads. Idempotent. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        executor.shutdown();
        try {
            if (!executor.awaitTermination(10, TimeUnit.SECONDS)) {
                executor.shutdownNow();
            }
        } catch (InterruptedException e) {
            executor.shutdownNow();
            Thread.currentThread().interrupt();
        }
        streams.clear();
        events.clear();
    }
}
