package io.ferrum.memory.cuda;

import java.util.HashMap;
import java.util.Map;
import java.util.function.IntSupplier;

import jcuda.CudaException;
import jcuda.driver.CUresult;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryException;
import io.ferrum.memory.api.OutOfDeviceMemoryException;

/**
 * Result codes of the driver API into this project's exceptions. JCuda's own exceptions are a
 * JVM-wide switch another bundle may flip; this backend leaves it alone and checks every code.
 */
final class Cu {
    /** Each result's name ({@code CUresult.stringFor}) to its code; the driver's codes are below 1000. */
    private static final Map<String, Integer> CODES = new HashMap<>();

    static {
        for (int code = 0; code < 1000; code++) {
            String name = CUresult.stringFor(code);
            if (name.startsWith("CUDA_")) {
                CODES.put(name, code);
            }
        }
    }

    private Cu() {
    }

    /**
     * Runs a driver call whose result this backend acts on (out of memory, peer access already
     * enabled) and returns its result code, also where another bundle turned JCuda's exceptions on
     * (a JVM-wide switch; {@code GpuBenchmark} does): JCuda then throws a {@link CudaException}
     * named after the result instead of returning it, which is turned back into the code here.
     *
     * @param call a JCuda driver call
     * @return its result code; {@code CUDA_ERROR_UNKNOWN} for an exception naming no known result
     */
    static int rc(IntSupplier call) {
        try {
            return call.getAsInt();
        } catch (CudaException e) {
            return CODES.getOrDefault(String.valueOf(e.getMessage()).strip(), CUresult.CUDA_ERROR_UNKNOWN);
        }
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
