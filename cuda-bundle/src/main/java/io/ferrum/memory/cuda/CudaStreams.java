package io.ferrum.memory.cuda;

import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;

import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;

import io.ferrum.memory.api.Device;
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
 * <p>A destroyed stream's {@code CUstream} is destroyed once the work submitted before has run;
 * {@link #close()} waits for accepted work (as {@link HostStreamManager#close()} does), destroys
 * every {@code CUstream}, and releases its context retain.
 */
final class CudaStreams implements StreamManager, StreamExecutor {
    private final HostStreamManager host;
    private final PrimaryContext context;
    private final Map<Long, CUstream> cuStreams = new ConcurrentHashMap<>();

    /** @param context a retain of the device's primary context; released on {@link #close()} */
    CudaStreams(PrimaryContext context) {
        this.context = context;
        this.host = new HostStreamManager(context.device());
    }

    @Override
    public Device device() {
        return host.device();
    }

    @Override
    public boolean knows(StreamHandle stream) {
        return host.knows(stream);
    }

    @Override
    public StreamHandle createStream(Device device) {
        StreamHandle h = host.createStream(device);
        CUstream s = new CUstream();
        try {
            context.makeCurrent();
            Cu.check(JCudaDriver.cuStreamCreate(s, CUstream_flags.CU_STREAM_NON_BLOCKING), device(), "cuStreamCreate");
        } catch (RuntimeException | Error e) {
            host.destroyStream(h);
            throw e;
        }
        cuStreams.put(h.id(), s);
        return h;
    }

    /**
     * Destroys the {@code CUstream} once the work accepted before has run. The stream's monitor keeps
     * {@link #submit} out between taking the tail and destroying the host stream: work accepted in
     * between would run after the tail, on a {@code CUstream} already destroyed.
     */
    @Override
    public void destroyStream(StreamHandle stream) {
        CUstream s = stream == null ? null : cuStreams.get(stream.id());
        if (s == null) {
            // Not one of ours, the default stream, or destroyed: the host manager refuses it with its message.
            host.destroyStream(stream);
            return;
        }
        synchronized (s) {
            CompletionStage<Void> drained = host.synchronizeStream(stream);
            host.destroyStream(stream);
            cuStreams.remove(stream.id(), s);
            drained.whenComplete((ok, failed) -> destroy(s));
        }
    }

    private void destroy(CUstream s) {
        context.makeCurrent();
        JCudaDriver.cuStreamDestroy(s);
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
        CUstream s = stream == null || stream.equals(StreamHandle.DEFAULT) ? CurrentStream.DEFAULT : cuStreams.get(stream.id());
        if (s == null) {
            // Not one of ours (or destroyed): the host manager refuses it with its message.
            return host.submit(stream, work);
        }
        if (s == CurrentStream.DEFAULT) {
            return host.submit(stream, () -> CurrentStream.run(device(), s, work));
        }
        // Accepted under the stream's monitor, so that destroyStream's wait covers it (see there).
        synchronized (s) {
            return host.submit(stream, () -> CurrentStream.run(device(), s, work));
        }
    }

    @Override
    public void close() {
        try {
            host.close();
            context.makeCurrent();
            for (CUstream s : cuStreams.values()) {
                JCudaDriver.cuStreamDestroy(s);
            }
            cuStreams.clear();
        } finally {
            context.close();
        }
    }
}
