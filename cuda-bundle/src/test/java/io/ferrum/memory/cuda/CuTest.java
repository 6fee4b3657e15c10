package io.ferrum.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;

import jcuda.CudaException;
import jcuda.driver.CUresult;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.OutOfDeviceMemoryException;

/**
 * A driver call's result, whether JCuda returns it or, with its JVM-wide exceptions turned on by
 * another bundle ({@code JCudaDriver.setExceptionsEnabled(true)}, as {@code GpuBenchmark} does),
 * throws it: each lambda here fails as JCuda's {@code checkResult} does then.
 */
class CuTest {
    private static int jcudaThrows(int result) {
        throw new CudaException(CUresult.stringFor(result));
    }

    @Test
    void aResultJCudaThrowsIsTheResultAJCudaCallReturns() {
        assertEquals(CUresult.CUDA_SUCCESS, Cu.rc(() -> CUresult.CUDA_SUCCESS));
        assertEquals(CUresult.CUDA_ERROR_OUT_OF_MEMORY, Cu.rc(() -> CUresult.CUDA_ERROR_OUT_OF_MEMORY));
        assertEquals(CUresult.CUDA_ERROR_OUT_OF_MEMORY, Cu.rc(() -> jcudaThrows(CUresult.CUDA_ERROR_OUT_OF_MEMORY)));
        assertEquals(CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
                Cu.rc(() -> jcudaThrows(CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)));
        assertEquals(CUresult.CUDA_ERROR_UNKNOWN, Cu.rc(() -> {
            throw new CudaException("not a result's name");
        }));
    }

    /** The engine trims and retries, or tries another device, on OutOfDeviceMemoryException only. */
    @Test
    void outOfMemoryIsOutOfDeviceMemoryAlsoWhenJCudaThrowsIt() {
        OutOfDeviceMemoryException e = assertThrows(OutOfDeviceMemoryException.class, () -> Cu.checkReserve(
                Cu.rc(() -> jcudaThrows(CUresult.CUDA_ERROR_OUT_OF_MEMORY)), Device.cuda(0), "cuMemAlloc", 4096));
        assertEquals(4096, e.requestedBytes());
    }
}
