package io.ferrum.memory.cuda;

import jcuda.driver.CUstream;
import jcuda.driver.CUstream_flags;
import jcuda.driver.JCudaDriver;

import io.ferrum.memory.api.Device;

/**
 * The driver calls {@link CudaStreams} makes, behind an interface so that tests can record their
 * order (a stream destroyed before the context retain is released, never after) without a GPU.
 */
interface StreamDriver {

    /** @return the device whose streams these are */
    Device device();

    /** Creates {@code stream} as a non-blocking stream of the device's primary context. */
    void create(CUstream stream);

    /** Destroys {@code stream}; the context retain is still held. */
    void destroy(CUstream stream);

    /** Releases the context retain, once, after the last stream was destroyed. */
    void release();

    /** @return the driver calls over one retain of {@code context}, which {@link #release()} releases */
    static StreamDriver of(PrimaryContext context) {
        return new StreamDriver() {
            @Override
            public Device device() {
                return context.device();
            }

            @Override
            public void create(CUstream stream) {
                context.makeCurrent();
                Cu.check(JCudaDriver.cuStreamCreate(stream, CUstream_flags.CU_STREAM_NON_BLOCKING), context.device(),
                        "cuStreamCreate");
            }

            @Override
            public void destroy(CUstream stream) {
                context.makeCurrent();
                Cu.check(JCudaDriver.cuStreamDestroy(stream), context.device(), "cuStreamDestroy");
            }

            @Override
            public void release() {
                context.close();
            }
        };
    }
}
