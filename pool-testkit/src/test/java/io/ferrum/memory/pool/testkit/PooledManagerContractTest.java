package io.ferrum.memory.pool.testkit;

import java.util.Map;
import java.util.OptionalLong;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * The manager suite against the pool engine over the pool's own test upstream: the suite checks
 * itself here, and every backend runs it again over its own upstream.
 */
class PooledManagerContractTest extends DeviceMemoryManagerContract {
    static final long MiB = 1L << 20;

    static MemoryManagerConfig smallPools() {
        MemoryPoolConfig pool = new MemoryPoolConfig(4 * MiB, OptionalLong.empty(), 4 * MiB, true, 256, false, true);
        return new MemoryManagerConfig(Map.of(MemoryType.GENERAL, pool), true, true, 0.85, false, 4);
    }

    @Override
    protected DeviceMemoryManager createManager() {
        return PooledMemoryManager.create(new ArenaUpstream(Device.cpu(9), 64 * MiB, true), smallPools(),
                PoolSettings.defaults(), null);
    }
}
