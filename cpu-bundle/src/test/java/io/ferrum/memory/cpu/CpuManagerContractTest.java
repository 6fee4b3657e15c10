package io.ferrum.memory.cpu;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.pool.HostStreamManager;
import io.ferrum.memory.pool.testkit.DeviceMemoryManagerContract;

import org.junit.jupiter.api.AfterEach;

/**
 * The manager of a configured CPU device, built as {@link CpuDevice} builds it (FFM upstream, the
 * device's own streams, its zeroing and thread cache settings), keeps the contract of {@link
 * DeviceMemoryManager} and {@link io.ferrum.memory.api.AdvancedMemoryManager}.
 */
class CpuManagerContractTest extends DeviceMemoryManagerContract {
    private HostStreamManager streams;

    @Override
    protected DeviceMemoryManager createManager() {
        CpuDeviceConfig cfg = TestConfigs.small();
        Device device = Device.cpu(6);
        if (streams == null) {
            streams = new HostStreamManager(device);
        }
        return CpuDevice.newManager(new FfmUpstream(device, cfg.capacity(), CpuBackend.HELD_BYTES), cfg, null, streams);
    }

    @AfterEach
    void closeStreams() {
        if (streams != null) {
            streams.close();
        }
    }
}
