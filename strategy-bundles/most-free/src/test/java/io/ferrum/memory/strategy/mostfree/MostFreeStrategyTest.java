package io.ferrum.memory.strategy.mostfree;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryInfo;

class MostFreeStrategyTest {
    static MemoryInfo free(long total, long used) {
        return new MemoryInfo(total, used, total - used, total, 0, 0.0, OptionalDouble.empty());
    }

    final MostFreeStrategy s = new MostFreeStrategy();
    final Device a = Device.cpu(0);
    final Device b = Device.cpu(1);
    final Device c = Device.cpu(2);

    @Test
    void theDeviceWithTheMostFreeBytesWins() {
        Map<Device, MemoryInfo> m = Map.of(a, free(1000, 500), b, free(1000, 900), c, free(2000, 0));
        assertEquals(Optional.of(c), s.selectDevice(100, AllocationRequirements.defaults(), List.of(a, b, c), m));
        assertEquals(Optional.of(a), s.selectDevice(100, AllocationRequirements.defaults(), List.of(a, b), m));
        assertEquals(Optional.empty(), s.selectDevice(2001, AllocationRequirements.defaults(), List.of(a, b, c), m));
    }

    @Test
    void onATieThePreferredDeviceThenTheEarlierOneWins() {
        Map<Device, MemoryInfo> m = Map.of(a, free(1000, 100), b, free(1000, 100));
        assertEquals(Optional.of(a), s.selectDevice(1, AllocationRequirements.defaults(), List.of(a, b), m));
        assertEquals(Optional.of(b), s.selectDevice(1, AllocationRequirements.defaults().preferring(b), List.of(a, b), m));
        assertEquals("most-free", s.name());
    }
}
