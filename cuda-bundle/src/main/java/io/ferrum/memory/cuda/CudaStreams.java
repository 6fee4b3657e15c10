package io.ferrum.memory.cuda;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;

import jcuda.driver.CUstream;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.EventHandle;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.api.StreamManager;
import io.ferrum.memory.pool.HostStreamManager;
import io.ferrum.memory.pool.StreamExecutor;

/**
 * A GPU's streams: each {@link StreamHandle} is a {@code CUstream} (non-blocking) plus the ordering,
 * ids and events of a {@link HostStreamManager}, which this class wraps. Work submitted to a stream
 * runs on a host thread with that stream as the thread's {@link CurrentStream}, so the upstream
 * enqueues its copies on the {@code CUstream}; each upstream call synchronises the stream before it
 * returns, so the host future of a piece of work completes after the device finished it, and an
 * event (the host chain at the moment it was recorded) completes when the device work before it has.
 * The default stream runs work on the caller's thread on CUDA's default stream.
 *
 * <p><b>Lifetimes.</b> Each {@code CUstream} counts the work accepted on it that has not finished.
 * Once no more can be accepted ({@link #destroyStream}, or {@link #close()}) it is destroyed when
 * that count is 0: at once, or by the thread that finishes its last piece of work. {@link #close()}
 * waits for accepted work as {@link HostStreamManager#close()} does (up to 10 s); work still running
 * after that (blocked, or {@code close} called from inside stream work) keeps its {@code CUstream},
 * and the context retain, until it ends. The retain is released after the last {@code CUstream} was
 * destroyed, so no stream is used or destroyed in a context this manager no longer holds.
 */
final class CudaStreams implements StreamManager, StreamExecutor {
    private final HostStreamManager host;
    private final StreamDriver driver;
    private final Map<Long, Lane> lanes = new ConcurrentHashMap<>();
    /** Guards {@link #closed}, {@link #live} and {@link #released}. */
    private final Object life = new Object();
    private boolean closed;
    /** {@code CUstream}s created and not yet destroyed (or being created). */
    private int live;
    private boolean released;

    /** A {@code CUstream} and its accepted, unfinished work; its monitor guards both counters. */
    private static final class Lane {
        final CUstream stream = new CUstream();
        /** Work accepted on the stream that has not finished running. */
        int pending;
        /** No more work can be accepted: the stream is destroyed once {@link #pending} is 0. */
        boolean retired;
    }

    /**
     * @param context a retain of the device's primary context; released on {@link #close()} once
     *                every stream was destroyed, or at once when this constructor throws
     */
    CudaStreams(PrimaryContext context) {
        this(StreamDriver.of(context), hostFor(context));
    }

    /** Tests: over a driver that records its calls. */
    CudaStreams(StreamDriver driver, HostStreamManager host) {
        this.driver = driver;
        this.host = host;
    }

    private static HostStreamManager hostFor(PrimaryContext context) {
        try {
            return new HostStreamManager(context.device());
        } catch (RuntimeException | Error e) {
            context.close();
            throw e;
        }
    }

    private DeviceUnavailableException closedError() {
        return new DeviceUnavailableException(device(), "The stream manager of " + device()
                + " is closed (its backend was stopped)");
    }

    @Override
    public Device device() {
        return host.device();
    }

    @Override
    public boolean knows(StreamHandle stream) {
        return host.knows(stream);
    }

    /**
     * A stream created while {@link #close()} runs is destroyed before this throws: counted as live
     * before its driver call, and listed only while the manager is open, so either close's sweep
     * sees it or this sees close.
     */
    @Override
    public StreamHandle createStream(Device device) {
        StreamHandle h = host.createStream(device);
        Lane l = new Lane();
        synchronized (life) {
            if (closed) {
                throw closedError();
            }
            live++;
        }
        try {
            driver.create(l.stream);
        } catch (RuntimeException | Error e) {
            try {
                host.destroyStream(h);
            } catch (RuntimeException closedMeanwhile) {
                e.addSuppressed(closedMeanwhile);
            }
            ended();
            throw e;
        }
        synchronized (life) {
            if (!closed) {
                lanes.put(h.id(), l);
                return h;
            }
        }
        RuntimeException failed = destroy(l);
        DeviceUnavailableException e = closedError();
        if (failed != null) {
            e.addSuppressed(failed);
        }
        throw e;
    }

    /**
     * Destroys the {@code CUstream} once the work accepted before has run. The stream's monitor keeps
     * {@link #submit} out while the host stream is destroyed: work is accepted either before (and
     * counted) or not at all.
     */
    @Override
    public void destroyStream(StreamHandle stream) {
        Lane l = stream == null ? null : lanes.get(stream.id());
        if (l == null) {
            // Not one of ours, the default stream, or destroyed: the host manager refuses it with its message.
            host.destroyStream(stream);
            return;
        }
        synchronized (l) {
            host.destroyStream(stream);
            lanes.remove(stream.id(), l);
        }
        RuntimeException failed = retire(l);
        if (failed != null) {
            throw failed;
        }
    }

    /** Marks {@code l} as taking no more work and destroys it if none is left; once per lane. */
    private RuntimeException retire(Lane l) {
        synchronized (l) {
            if (l.retired) {
                return null;
            }
            l.retired = true;
            if (l.pending > 0) {
                return null;
            }
        }
        return destroy(l);
    }

    /** A piece of work accepted on {@code l} ended; the last one of a retired lane destroys it. */
    private void finished(Lane l) {
        synchronized (l) {
            if (--l.pending > 0 || !l.retired) {
                return;
            }
        }
        // On a stream thread, after the work: a failure here is not the work's. The driver frees a
        // stream it failed to destroy with the context.
        destroy(l);
    }

    /** @return the driver's failure to destroy the stream, or null; the lane is no longer live either way */
    private RuntimeException destroy(Lane l) {
        try {
            driver.destroy(l.stream);
            return null;
        } catch (RuntimeException e) {
            return e;
        } finally {
            ended();
        }
    }

    /** One stream fewer; the last one after close releases the context retain. */
    private void ended() {
        boolean release;
        synchronized (life) {
            live--;
            release = closed && live == 0 && !released;
            released |= release;
        }
        if (release) {
            driver.release();
        }
    }

    @Override
    public CompletionStage<Void> synchronizeStream(StreamHandle stream) {
        return host.synchronizeStream(stream);
    }

    @Override
    public boolean isStreamReady(StreamHandle stream) {
        return host.isStreamReady(stream);
    }

    @Override
    public StreamHandle defaultStream(Device device) {
        return host.defaultStream(device);
    }

    @Override
    public EventHandle recordEvent(StreamHandle stream) {
        return host.recordEvent(stream);
    }

    @Override
    public void waitEvent(StreamHandle stream, EventHandle event) {
        host.waitEvent(stream, event);
    }

    @Override
    public List<StreamHandle> streams() {
        return host.streams();
    }

    @Override
    public CompletionStage<Void> submit(StreamHandle stream, Runnable work) {
        Lane l = stream == null || work == null ? null : lanes.get(stream.id());
        if (l == null) {
            if (work != null && (stream == null || stream.equals(StreamHandle.DEFAULT))) {
                return host.submit(stream, () -> CurrentStream.run(device(), CurrentStream.DEFAULT, work));
            }
            // No work, not one of ours, or destroyed: the host manager refuses it with its message.
            return host.submit(stream, work);
        }
        // Counted under the lane's monitor, so that retire sees every piece of work accepted.
        synchronized (l) {
            if (l.retired) {
                // Destroyed or closed: the host manager refuses it.
                return host.submit(stream, work);
            }
            l.pending++;
            try {
                return host.submit(stream, () -> {
                    try {
                        CurrentStream.run(device(), l.stream, work);
                    } finally {
                        finished(l);
                    }
                });
            } catch (RuntimeException | Error e) {
                // Not accepted: it will never run (HostStreamManager#submit's contract).
                l.pending--;
                throw e;
            }
        }
    }

    /**
     * Waits for accepted work ({@link HostStreamManager#close()}), then destroys every stream whose
     * work has ended; a stream with work still running is destroyed when that work ends, and the
     * context retain is released after the last stream. Idempotent.
     */
    /** @return true once {@link #close()} has begun */
    boolean isClosed() {
        synchronized (life) {
            return closed;
        }
    }

    @Override
    public void close() {
        synchronized (life) {
            if (closed) {
                return;
            }
            closed = true;
            live++; // this sweep: the context stays until it has seen every lane
        }
        RuntimeException failed = null;
        try {
            host.close();
        } finally {
            // Only now: until host.close() refused new work, a retired lane could still be given some.
            for (Lane l : lanes.values()) {
                RuntimeException e = retire(l);
                if (failed == null) {
                    failed = e;
                } else if (e != null) {
                    failed.addSuppressed(e);
                }
            }
            lanes.clear();
            ended();
        }
        if (failed != null) {
            throw failed;
        }
    }
}
