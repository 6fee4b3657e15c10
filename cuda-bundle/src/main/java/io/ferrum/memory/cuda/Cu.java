package io.ferrum.memory.cuda;

import jcuda.driver.CUresult;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryException;
import io.ferrum.memory.api.OutOfDeviceMemoryException;

/**
 * Result codes of the driver API into this project's exceptions. JCuda's own exceptions are a
 * JVM-wide switch another bundle may flip; this backend leaves it alone and checks every code.
 */
final class Cu {
    private Cu() {
    }

    /**
     * @param rc     a driver call's result
     * @param device the device it concerned
     * @param call   the call, for the message ({@code cuMemcpyHtoDAsync})
     * @throws MemoryException naming the call, the result and the device, unless rc is success
     */
    static void check(int rc, Device device, String call) {
        if (rc != CUresult.CUDA_SUCCESS) {
            throw new MemoryException(call + " failed on " + device + ": " + CUresult.stringFor(rc)
                    + " (CUDA error " + rc + ")");
        }
    }

    /**
     * As {@link #check}, for a call that reserves memory: out of memory becomes the API's
     * {@link OutOfDeviceMemoryException}, so the pool can trim and retry or try another device.
     *
     * @param bytes the bytes asked for
     */
    static void checkReserve(int rc, Device device, String call, long bytes) {
        if (rc == CUresult.CUDA_ERROR_OUT_OF_MEMORY) {
            throw new OutOfDeviceMemoryException(device, bytes, 0, call + " could not provide " + bytes
                    + " bytes on " + device + " (CUDA_ERROR_OUT_OF_MEMORY)");
        }
        check(rc, device, call);
    }
}
