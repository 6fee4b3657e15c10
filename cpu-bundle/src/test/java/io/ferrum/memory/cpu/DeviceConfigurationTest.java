package io.ferrum.memory.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * Configurations of the device components: cpu:0's PID takes no other index, a bad value is
 * refused with an error that names it, and a refused configuration changes nothing.
 */
class DeviceConfigurationTest {
    private static final long MiB = 1L << 20;

    private final Recording fw = new Recording();

    @Test
    void cpu0RefusesAnotherIndexAtActivationNamingItAndStartsWithItsDefaults() {
        DefaultCpuDevice cpu0 = new DefaultCpuDevice(fw.context(), TestConfigs.small(Map.of("index", 2)), fw.logger());
        try {
            DeviceMemoryManager m = fw.manager();
            assertEquals(Device.cpu(0), m.device(), "the component serves cpu:0 whatever the index");
            assertNotEquals(64 * MiB, m.memoryInfo().totalBytes(), "the refused configuration's capacity was not applied");
            assertEquals(1, fw.errors.size(), "one error: " + fw.errors);
            String error = fw.errors.get(0);
            assertTrue(error.contains("index=2") && error.contains(CpuBackend.DEVICE_FACTORY_PID)
                    && error.contains("starts with its defaults"), error);
        } finally {
            cpu0.deactivate();
        }
    }

    @Test
    void cpu0RefusesAnotherIndexOnUpdateAndKeepsRunningAsItWas() {
        DefaultCpuDevice cpu0 = new DefaultCpuDevice(fw.context(), TestConfigs.small(), fw.logger());
        try {
            DeviceMemoryManager before = fw.manager();
            long handle = before.allocate(4096, Device.cpu(0)).id();
            fw.events.clear();

            cpu0.modified(TestConfigs.small(Map.of("index", 3, "capacity", 32 * MiB)));

            assertEquals(List.of(), fw.events, "nothing was unregistered or registered");
            assertSame(before, fw.manager());
            assertFalse(((PooledMemoryManager) before).isClosed());
            assertEquals(64 * MiB, before.memoryInfo().totalBytes(), "the running configuration stays");
            assertTrue(before.owns(new io.ferrum.memory.api.MemoryHandle(handle)), "live blocks stay live");
            assertEquals(1, fw.errors.size(), "one error: " + fw.errors);
            assertTrue(fw.errors.get(0).contains("index=3") && fw.errors.get(0).contains("cpu:0 keeps running as it was"),
                    fw.errors.get(0));
        } finally {
            cpu0.deactivate();
        }
    }

    @Test
    void aValidUpdateRestartsCpu0WithTheNewConfiguration() {
        DefaultCpuDevice cpu0 = new DefaultCpuDevice(fw.context(), TestConfigs.small(), fw.logger());
        try {
            DeviceMemoryManager before = fw.manager();

            cpu0.modified(TestConfigs.small(Map.of("index", 0, "capacity", 32 * MiB)));

            DeviceMemoryManager after = fw.manager();
            assertTrue(((PooledMemoryManager) before).isClosed(), "the old manager is closed");
            assertEquals(Device.cpu(0), after.device());
            assertEquals(32 * MiB, after.memoryInfo().totalBytes());
            assertEquals(List.of(), fw.errors);
        } finally {
            cpu0.deactivate();
        }
        assertTrue(fw.services.isEmpty(), "deactivation unregisters everything: " + fw.services);
    }

    @Test
    void anUpdateWithABadValueIsRefusedLikeABadIndex() {
        DefaultCpuDevice cpu0 = new DefaultCpuDevice(fw.context(), TestConfigs.small(), fw.logger());
        try {
            DeviceMemoryManager before = fw.manager();

            cpu0.modified(TestConfigs.small(Map.of("zeroing", "sometimes")));
            cpu0.modified(TestConfigs.small(Map.of("alignment", 3L)));

            assertSame(before, fw.manager());
            assertFalse(((PooledMemoryManager) before).isClosed());
            assertEquals(2, fw.errors.size(), "two errors: " + fw.errors);
            assertTrue(fw.errors.get(0).contains("'sometimes'"), fw.errors.get(0));
            assertTrue(fw.errors.get(1).contains("alignment 3"), fw.errors.get(1));
        } finally {
            cpu0.deactivate();
        }
    }

    @Test
    void aFactoryConfigurationWithAnIndexBelowOneCreatesNoDevice() {
        for (int index : new int[] {0, -1}) {
            InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class,
                    () -> new ConfiguredCpuDevice(fw.context(), TestConfigs.small(Map.of("index", index)), fw.logger()));
            assertTrue(e.getMessage().contains("got " + index) && e.getMessage().contains(CpuBackend.DEFAULT_PID), e.getMessage());
        }
        assertTrue(fw.services.isEmpty(), "nothing registered: " + fw.services);
    }

    @Test
    void aFactoryDeviceKeepsRunningWhenItsConfigurationTurnsBadAndMovesWhenItsIndexChanges() {
        ConfiguredCpuDevice device = new ConfiguredCpuDevice(fw.context(), TestConfigs.small(Map.of("index", 4)), fw.logger());
        try {
            DeviceMemoryManager cpu4 = fw.manager();
            assertEquals(Device.cpu(4), cpu4.device());

            device.modified(TestConfigs.small(Map.of("index", 0)));
            assertSame(cpu4, fw.manager(), "a refused update changes nothing");
            assertTrue(fw.errors.get(0).contains("got 0") && fw.errors.get(0).contains("cpu:4 keeps running"), fw.errors.get(0));

            device.modified(TestConfigs.small(Map.of("index", 5)));
            assertEquals(Device.cpu(5), fw.manager().device(), "a valid new index restarts the device under it");
            assertTrue(((PooledMemoryManager) cpu4).isClosed());
        } finally {
            device.deactivate();
        }
    }
}
