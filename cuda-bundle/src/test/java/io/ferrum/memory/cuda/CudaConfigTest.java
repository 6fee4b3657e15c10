package io.ferrum.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.MemoryUsageHint;

/** Configuration checks, chunk kinds, advice and factory refusals: everything that needs no driver. */
class CudaConfigTest {

    @Test
    void defaultsAreAccepted() {
        assertNull(CudaDeviceConfigs.refusal(CudaDeviceConfigs.DEFAULTS, 0, 1));
    }

    @Test
    void indexBeyondTheDevicesIsRefused() {
        String r = CudaDeviceConfigs.refusal(CudaDeviceConfigs.of(Map.of("index", 2)), 2, 2);
        assertEquals("Configuration of cuda:2 refused: index=2, but the driver reports 2 CUDA devices (use 0 to 1)", r);
    }

    @Test
    void badZeroingAndStagingAreRefusedNamingTheValue() {
        assertTrue(CudaDeviceConfigs.refusal(CudaDeviceConfigs.of(Map.of("zeroing", "often")), 0, 1).contains("'often'"));
        assertTrue(CudaDeviceConfigs.refusal(CudaDeviceConfigs.of(Map.of("stagingSlots", 99)), 0, 1)
                .contains("stagingSlots 99"));
    }

    @Test
    void memoryTypesPickTheirChunkKind() {
        assertEquals(ChunkKind.PINNED, ChunkKind.of(MemoryType.PINNED));
        assertEquals(ChunkKind.MANAGED, ChunkKind.of(MemoryType.MAPPED));
        assertEquals(ChunkKind.DEVICE, ChunkKind.of(MemoryType.TENSOR));
        assertTrue(ChunkKind.MANAGED.hostAddressable());
        assertTrue(!ChunkKind.DEVICE.hostAddressable());
    }

    @Test
    void hintsWithoutCudaAdviceAreNoOps() {
        assertEquals(-1, CudaUpstream.advice(MemoryUsageHint.SEQUENTIAL));
        assertEquals(jcuda.driver.CUmem_advise.CU_MEM_ADVISE_SET_READ_MOSTLY, CudaUpstream.advice(MemoryUsageHint.READ_MOSTLY));
    }

    @Test
    void factoryRefusesOtherKindsAndMissingGpus() {
        assertTrue(CudaMemoryManagerFactory.refusal(Device.cpu(0), 1).contains("not served by the cuda backend"));
        assertEquals("No cuda:3: the driver reports 1 CUDA device", CudaMemoryManagerFactory.refusal(Device.cuda(3), 1));
        assertNull(CudaMemoryManagerFactory.refusal(Device.cuda(0), 1));
    }
}
