package io.ferrum.memory.monitor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.AllocationStrategy;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * An attack on the router, the device registry and the notifications around them (a router review):
 * each test failed before its fix; races are forced with a manager that pauses at a chosen call.
 */
class RouterAttackTest {
    static final long MiB = 1 << 20;
    static final Device CPU1 = Device.cpu(1);
    static final Device CPU2 = Device.cpu(2);

    private final List<AutoCloseable> toClose = new ArrayList<>();
    private long nextServiceId = 100;

    @AfterEach
    void closeAll() throws Exception {
        for (AutoCloseable c : toClose.reversed()) {
            c.close();
        }
    }

    private MemoryMonitor monitor() {
        MemoryMonitor m = new MemoryMonitor(null, MonitorBuilder.config("", 0, 4), null);
        toClose.add(m::deactivate);
        return m;
    }

    private PooledMemoryManager device(Device d, long capacity, MemoryPoolConfig general) {
        PooledMemoryManager m = PooledMemoryManager.create(new ArenaUpstream(d, 256 * MiB, true),
                MemoryManagerConfig.defaults().withAutoGc(false, 0.85).withPoolConfig(MemoryType.GENERAL, general),
                PoolSettings.defaults().withCapacity(capacity), null);
        toClose.add(m);
        return m;
    }

    private Map<String, Object> props(Device d) {
        return Map.of(DeviceMemoryManager.DEVICE_PROPERTY, d.toString(), "service.ranking", 0,
                "service.id", nextServiceId++);
    }

    /** Picks the first device offered that has the room, in device order: cpu:1 before cpu:2. */
    static final class FirstFitting implements AllocationStrategy {
        @Override
        public Optional<Device> selectDevice(long size, AllocationRequirements r, List<Device> available,
                                             Map<Device, MemoryInfo> info) {
            return available.stream().filter(d -> info.get(d) != null && info.get(d).freeBytes() >= size).findFirst();
        }

        @Override
        public String name() {
            return "first-fitting";
        }
    }

    /**
     * A device whose pool refuses a request by its own limits (its maxSize, its chunk size for an
     * alignment) cannot take that allocation, exactly as a full one cannot: the router leaves it out
     * and asks again. Before, the pool's InvalidMemoryRequestException ended the routed allocation,
     * and cpu:2, which had the room, was never tried.
     */
    @Test
    void aDeviceWhosePoolRefusesTheRequestIsLeftOutAndTheNextOneTried() {
        MemoryMonitor mon = monitor();
        PooledMemoryManager capped = device(CPU1, 64 * MiB,
                MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).maxSize(MiB).build());
        PooledMemoryManager open = device(CPU2, 16 * MiB,
                MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).build());
        mon.addManager(capped, props(CPU1));
        mon.addManager(open, props(CPU2));
        mon.addStrategy(new FirstFitting(), Map.of(AllocationStrategy.NAME_PROPERTY, "first-fitting"));

        MemoryHandle h = mon.allocate(2 * MiB, AllocationRequirements.defaults());
        assertEquals(Optional.of(CPU2), mon.owner(h), "cpu:1's GENERAL pool may hold 1 MiB at most; cpu:2 has the room");
        MemoryHandle again = mon.allocate(2 * MiB, AllocationRequirements.defaults());
        assertEquals(Optional.of(CPU2), mon.owner(again), "on fresh figures too (the second call's fast path)");

        // Refused by every device: the request's own error, naming each device's reason.
        InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class,
                () -> mon.allocate(64, AllocationRequirements.defaults().withAlignment(1L << 40)));
        assertTrue(e.getMessage().contains(CPU1.toString()) && e.getMessage().contains(CPU2.toString())
                && e.getMessage().contains("1099511627776"), e.getMessage());
    }
}
