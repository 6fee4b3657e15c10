package io.ferrum.memory.cuda;

import java.util.concurrent.atomic.AtomicBoolean;

import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.JCudaDriver;

import io.ferrum.memory.api.Device;

/**
 * One retain of a GPU's primary context (the context the runtime API and other libraries share),
 * made current on whichever thread calls the driver. Each owner (an upstream, a stream manager)
 * retains its own and releases it once on close; the driver counts the retains.
 */
final class PrimaryContext implements AutoCloseable {
    private final Device device;
    private final CUdevice cuDevice = new CUdevice();
    private final CUcontext context = new CUcontext();
    private final AtomicBoolean released = new AtomicBoolean();

    private PrimaryContext(Device device) {
        this.device = device;
        Cu.check(JCudaDriver.cuDeviceGet(cuDevice, device.index()), device, "cuDeviceGet");
        Cu.check(JCudaDriver.cuDevicePrimaryCtxRetain(context, cuDevice), device, "cuDevicePrimaryCtxRetain");
    }

    /**
     * @param device a {@code cuda:i} device; the driver must have been initialised (the probe did)
     * @return a retain of its primary context
     */
    static PrimaryContext retain(Device device) {
        return new PrimaryContext(device);
    }

    Device device() {
        return device;
    }

    CUdevice cuDevice() {
        return cuDevice;
    }

    CUcontext context() {
        return context;
    }

    /** Makes the context current on the calling thread (cheap; done before every driver call). */
    void makeCurrent() {
        if (released.get()) {
            throw new io.ferrum.memory.api.DeviceUnavailableException(device, "The context of " + device
                    + " was released: its backend stopped");
        }
        Cu.check(JCudaDriver.cuCtxSetCurrent(context), device, "cuCtxSetCurrent");
    }

    /** Releases this retain, once. */
    @Override
    public void close() {
        if (released.compareAndSet(false, true)) {
            Cu.check(JCudaDriver.cuDevicePrimaryCtxRelease(cuDevice), device, "cuDevicePrimaryCtxRelease");
        }
    }
}
