package io.ferrum.memory.cuda;

import jcuda.driver.CUstream;

/**
 * The CUDA stream the calling thread's upstream calls are ordered on: the stream whose work
 * {@link CudaStreams} is running on this thread, else the default stream. Each upstream call
 * enqueues on it and synchronises it before returning, so the engine's pins end only after the
 * device finished with the memory.
 */
final class CurrentStream {
    /** The legacy default stream (handle 0). */
    static final CUstream DEFAULT = new CUstream();
    private static final ThreadLocal<CUstream> CURRENT = new ThreadLocal<>();

    private CurrentStream() {
    }

    static CUstream get() {
        CUstream s = CURRENT.get();
        return s != null ? s : DEFAULT;
    }

    /** Runs {@code work} with {@code stream} current on this thread. */
    static void run(CUstream stream, Runnable work) {
        CUstream previous = CURRENT.get();
        CURRENT.set(stream);
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
