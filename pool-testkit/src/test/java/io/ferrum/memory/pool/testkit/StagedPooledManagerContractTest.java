package io.ferrum.memory.pool.testkit;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;

/** The manager suite over memory the CPU cannot address: views are host copies (staging). */
class StagedPooledManagerContractTest extends DeviceMemoryManagerContract {
    @Override
    protected DeviceMemoryManager createManager() {
        return PooledMemoryManager.create(new ArenaUpstream(Device.cpu(9), 64 * PooledManagerContractTest.MiB, false),
                PooledManagerContractTest.smallPools(), PoolSettings.defaults(), null);
    }

    @Override
    protected boolean viewsAreDeviceMemory() {
        return false;
    }
}
