package io.ferrum.memory.cpu;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.pool.testkit.DeviceMemoryManagerContract;

/**
 * The manager of a configured CPU device, built by {@link CpuDevice#newManager} as a running device
 * builds it (FFM upstream, its zeroing and thread cache settings, the backend's peers), keeps the
 * contract of {@link DeviceMemoryManager} and {@link io.ferrum.memory.api.AdvancedMemoryManager}.
 * Its streams are private to it (null), so closing the manager closes them.
 */
class CpuManagerContractTest extends DeviceMemoryManagerContract {
    @Override
    protected DeviceMemoryManager createManager() {
        CpuDeviceConfig cfg = TestConfigs.small();
        return CpuDevice.newManager(new FfmUpstream(Device.cpu(6), CpuDevice.capacity(cfg), CpuBackend.HELD_BYTES), cfg, null, null);
    }
}
