package io.ferrum.memory.cuda;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.pool.testkit.DeviceMemoryManagerContract;

/** GPU suite: the manager of cuda:0, built as a running device builds it, keeps the manager contract. Skips without a GPU. */
@Tag("gpu")
class CudaManagerContractTest extends DeviceMemoryManagerContract {
    /** Skips the whole class, with the probe's reason, before any test or fixture runs. */
    @BeforeAll
    static void requireGpu() {
        Gpu.assumePresent();
    }

    @Override
    protected DeviceMemoryManager createManager() {
        Gpu.assumePresent();
        CudaDeviceConfig cfg = CudaDeviceConfigs.of(java.util.Map.of("initialSize", 16L << 20, "growthIncrement", 16L << 20));
        return CudaDevice.newManager(new CudaUpstream(PrimaryContext.retain(Device.cuda(0)),
                CudaDeviceConfigs.settings(cfg), new PinnedRanges()), cfg, null, null);
    }

    @Override
    protected boolean viewsAreDeviceMemory() {
        return true;
    }
}
