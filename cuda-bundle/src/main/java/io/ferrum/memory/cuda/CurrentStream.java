package io.ferrum.memory.cuda;

import jcuda.driver.CUstream;

import io.ferrum.memory.api.Device;

/**
 * The CUDA stream the calling thread's upstream calls are ordered on: the stream whose work
 * {@link CudaStreams} is running on this thread, else the default stream. Each upstream call
 * enqueues on it and synchronises it before returning, so the engine's pins end only after the
 * device finished with the memory.
 *
 * <p>A stream belongs to its device's context, and the driver refuses an event of one context
 * recorded on a stream of another ({@code CUDA_ERROR_INVALID_HANDLE}: the staging ring's fences).
 * Work on a {@code cuda:0} stream may call {@code cuda:1}'s upstream (a copy of a peer's block, named
 * by an alias), so {@link #get} hands out the running stream only to an upstream of the device it
 * belongs to; any other gets its own default stream, which loses no order: the call synchronises it
 * before it returns, inside the stream's work.
 */
final class CurrentStream {
    /** The legacy default stream (handle 0) of whichever context is current. */
    static final CUstream DEFAULT = new CUstream();
    private static final ThreadLocal<Running> CURRENT = new ThreadLocal<>();

    /** A stream and the device whose context it was created in. */
    private record Running(Device device, CUstream stream) {
    }

    private CurrentStream() {
    }

    /**
     * @param device the device of the upstream asking
     * @return the stream running on this thread if it is {@code device}'s, else the default stream
     */
    static CUstream get(Device device) {
        Running r = CURRENT.get();
        return r != null && r.device().equals(device) ? r.stream() : DEFAULT;
    }

    /** Runs {@code work} with {@code stream}, a stream of {@code device}'s context, current on this thread. */
    static void run(Device device, CUstream stream, Runnable work) {
        Running previous = CURRENT.get();
        CURRENT.set(new Running(device, stream));
        try {
            work.run();
        } finally {
            if (previous == null) {
                CURRENT.remove();
            } else {
                CURRENT.set(previous);
            }
        }
    }
}
