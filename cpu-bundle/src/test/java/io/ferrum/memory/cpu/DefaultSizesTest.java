package io.ferrum.memory.cpu;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * Issue 17: with the CPU backend's default configuration, nine small blocks of different memory
 * types (each type has its own pool) reserve a few MiB, not an initial size of 1 GiB per type.
 */
class DefaultSizesTest {
    private static final long MiB = 1L << 20;

    @Test
    void nineSmallBlocksOfDifferentTypesReserveAFewChunks() {
        Device cpu = Device.cpu(9);
        FfmUpstream up = new FfmUpstream(cpu, 0, new AtomicLong()); // the manager closes it
        try (PooledMemoryManager m = CpuDevice.newManager(up, CpuDeviceConfigs.DEFAULTS, null, null)) {
            MemoryType[] types = MemoryType.values();
            for (int i = 0; i < 9; i++) {
                m.allocate(64 << 10, types[i % types.length], cpu);
            }
            MemoryInfo info = m.memoryInfo();
            assertTrue(info.reservedBytes() <= types.length * 2 * MiB,
                    "one 2 MiB first chunk per type: " + info.reservedBytes() + " reserved for " + info.usedBytes() + " used");
        }
    }
}
