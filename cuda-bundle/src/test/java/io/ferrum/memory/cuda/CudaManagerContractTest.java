package io.ferrum.memory.cuda;

import java.util.Map;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.pool.testkit.DeviceMemoryManagerContract;

/** GPU suite: the manager of cuda:0, built as a running device builds it, keeps the manager contract. Skips without a GPU. */
@Tag("gpu")
class CudaManagerContractTest extends DeviceMemoryManagerContract {
    /**
     * The suite's GPU settings: a capacity of 64 MiB, as the contract asks (16 MiB to 1 GiB, so that
     * a test can fill the device); without one the manager's capacity is the whole GPU. {@link
     * CudaManagerContractConfigTest} runs the contract with them where there is no GPU.
     */
    static final CudaDeviceConfig CONFIG = CudaDeviceConfigs.of(Map.of("capacity", 64L << 20,
            "initialSize", 16L << 20, "growthIncrement", 16L << 20));

    /** Skips the whole class, with the probe's reason, before any test or fixture runs. */
    @BeforeAll
    static void requireGpu() {
        Gpu.assumePresent();
    }

    @Override
    protected DeviceMemoryManager createManager() {
        Gpu.assumePresent();
        return CudaDevice.newManager(new CudaUpstream(PrimaryContext.retain(Device.cuda(0)),
                CudaDeviceConfigs.settings(CONFIG), new PinnedRanges()), CONFIG, null, null);
    }

    /** The contract's blocks are GENERAL ones, device memory: a view of one is a host copy. */
    @Override
    protected boolean viewsAreDeviceMemory() {
        return false;
    }
}
