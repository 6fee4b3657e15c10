package io.ferrum.memory.strategy.roundrobin;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryInfo;

class RoundRobinStrategyTest {
    static MemoryInfo free(long total, long used) {
        return new MemoryInfo(total, used, total - used, total, 0, 0.0, OptionalDouble.empty());
    }

    final Device a = Device.cpu(0);
    final Device b = Device.cpu(1);
    final Device c = Device.cpu(2);

    @Test
    void rotatesAmongDevicesThatFitInNaturalOrder() {
        RoundRobinStrategy s = new RoundRobinStrategy();
        Map<Device, MemoryInfo> m = Map.of(a, free(1000, 0), b, free(1000, 950), c, free(1000, 0));
        List<Device> picks = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            picks.add(s.selectDevice(100, AllocationRequirements.defaults(), List.of(c, b, a), m).orElseThrow());
        }
        assertEquals(List.of(a, c, a, c, a), picks, "b has 50 free and is skipped");
        assertEquals(Optional.of(b), s.selectDevice(10, AllocationRequirements.defaults(), List.of(b), m));
        assertEquals(Optional.empty(), s.selectDevice(2000, AllocationRequirements.defaults(), List.of(a, b, c), m));
        assertEquals("round-robin", s.name());
    }
}
