package io.ferrum.memory.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.MemoryUsageHint;
import io.ferrum.memory.pool.DeviceChunk;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;
import io.ferrum.memory.pool.ZeroingPolicy;

class FfmUpstreamTest {
    private static final long MiB = 1 << 20;

    @Test
    void chunksAreRealPageAlignedNativeMemoryAndAreCounted() {
        AtomicLong held = new AtomicLong();
        FfmUpstream up = new FfmUpstream(Device.cpu(), 0, held);
        assertTrue(up.physicalCapacity() > 256 * MiB, "physical memory from sysconf: " + up.physicalCapacity());
        DeviceChunk c = up.reserve(4 * MiB);
        assertEquals(4 * MiB, held.get());
        assertEquals(0, c.address() % FfmUpstream.CHUNK_ALIGNMENT);
        MemorySegment s = up.hostSegment(c).orElseThrow();
        s.set(ValueLayout.JAVA_LONG, 4 * MiB - 8, 0x1234_5678_9abc_def0L);
        assertEquals(0x1234_5678_9abc_def0L, s.get(ValueLayout.JAVA_LONG, 4 * MiB - 8));
        up.release(c);
        assertEquals(0, held.get());
    }

    @Test
    void copyWithinAChunkIsMemmoveAndFillSetsBytes() {
        FfmUpstream up = new FfmUpstream(Device.cpu(), 0, new AtomicLong());
        DeviceChunk c = up.reserve(64 * 1024);
        MemorySegment s = up.hostSegment(c).orElseThrow();
        for (int i = 0; i < 32; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) i);
        }
        up.copy(c, 0, c, 8, 24);
        for (int i = 0; i < 8; i++) {
            assertEquals(i, s.get(ValueLayout.JAVA_BYTE, i));
        }
        for (int i = 8; i < 32; i++) {
            assertEquals(i - 8, s.get(ValueLayout.JAVA_BYTE, i));
        }
        up.fill(c, 4, 4, (byte) 0x7f);
        assertEquals(0x7f, s.get(ValueLayout.JAVA_BYTE, 5));
        for (MemoryUsageHint h : MemoryUsageHint.values()) {
            up.advise(c, 0, 64 * 1024, h); // a hint never changes contents
        }
        up.prefetch(c, 0, 64 * 1024, Device.cpu());
        assertEquals(0x7f, s.get(ValueLayout.JAVA_BYTE, 5));
        assertEquals(0, s.get(ValueLayout.JAVA_BYTE, 8));
        up.release(c);
    }

    @Test
    void aManagerOverTheFfmUpstreamGivesEveryByteBackOnClose() {
        AtomicLong held = new AtomicLong();
        MemoryPoolConfig pool = MemoryPoolConfig.builder().initialSize(8 * MiB).growthIncrement(4 * MiB).build();
        PooledMemoryManager m = PooledMemoryManager.create(new FfmUpstream(Device.cpu(2), 64 * MiB, held),
                MemoryManagerConfig.defaults().withPoolConfig(MemoryType.GENERAL, pool), PoolSettings.defaults(), null);
        assertEquals(64 * MiB, m.memoryInfo().totalBytes());
        MemoryHandle a = m.allocate(3 * MiB, Device.cpu(2));
        MemoryHandle b = m.allocate(9 * MiB, Device.cpu(2));
        MemorySegment view = m.mapMemory(a, MemoryAccess.READ_WRITE);
        view.fill((byte) 5);
        m.unmapMemory(a);
        m.copy(a, b, 3 * MiB, 0, 6 * MiB);
        MemorySegment rb = m.mapMemory(b, MemoryAccess.READ_ONLY);
        assertEquals(5, rb.get(ValueLayout.JAVA_BYTE, 9 * MiB - 1));
        m.unmapMemory(b);
        assertEquals(m.memoryInfo().reservedBytes(), held.get());
        m.close();
        assertEquals(0, held.get(), "closing the manager released every chunk");
    }

    @Test
    void configurationMapsToPoolAndManagerConfig() {
        assertEquals(ZeroingPolicy.NONE, CpuDevice.zeroing("none"));
        assertEquals(ZeroingPolicy.ON_ALLOCATE, CpuDevice.zeroing(" On-Allocate "));
        assertEquals(ZeroingPolicy.ON_FREE, CpuDevice.zeroing("on_free"));
        assertTrue(assertThrows(InvalidMemoryRequestException.class, () -> CpuDevice.zeroing("sometimes"))
                .getMessage().contains("sometimes"));
    }
}
