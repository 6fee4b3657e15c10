package io.ferrum.memory.cuda;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Tag;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.pool.DeviceUpstream;
import io.ferrum.memory.pool.testkit.DeviceUpstreamContract;

/** GPU suite: the CUDA upstream of cuda:0 keeps every promise of {@link DeviceUpstream}. Skips without a GPU. */
@Tag("gpu")
class CudaUpstreamContractTest extends DeviceUpstreamContract {
    /** Skips the whole class, with the probe's reason, before any test or fixture runs. */
    @BeforeAll
    static void requireGpu() {
        Gpu.assumePresent();
    }

    @Override
    protected DeviceUpstream createUpstream() {
        Gpu.assumePresent();
        return new CudaUpstream(PrimaryContext.retain(Device.cuda(0)), CudaSettings.DEFAULTS, new PinnedRanges());
    }
}
