package io.ferrum.memory.cuda;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.testkit.DeviceMemoryManagerContract;

/**
 * The GPU suite's manager contract ({@link CudaManagerContractTest}) with its settings, where there
 * is no GPU: the manager is built as for cuda:0, over host memory standing in for an 80 GiB GPU
 * whose blocks the CPU cannot address (views are host copies, as of device memory). A setting the
 * contract cannot run with fails here, not in the few minutes of a GPU machine.
 */
class CudaManagerContractConfigTest extends DeviceMemoryManagerContract {
    private static final long H100_BYTES = 80L << 30;

    @Override
    protected DeviceMemoryManager createManager() {
        return CudaDevice.newManager(new ArenaUpstream(Device.cuda(0), H100_BYTES, false),
                CudaManagerContractTest.CONFIG, null, null);
    }

    @Override
    protected boolean viewsAreDeviceMemory() {
        return new CudaManagerContractTest().viewsAreDeviceMemory();
    }
}
