package io.ferrum.memory.strategy.preferredorder;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryInfo;

class PreferredOrderStrategyTest {
    static MemoryInfo free(long total, long used) {
        return new MemoryInfo(total, used, total - used, total, 0, 0.0, OptionalDouble.empty());
    }

    final PreferredOrderStrategy s = new PreferredOrderStrategy();
    final Device a = Device.cpu(0);
    final Device b = Device.cpu(1);
    final Device c = Device.cpu(2);
    final Map<Device, MemoryInfo> m = Map.of(a, free(1000, 500), b, free(1000, 900), c, free(2000, 0));

    @Test
    void theFirstPreferredDeviceThatFitsWins() {
        AllocationRequirements r = AllocationRequirements.defaults().preferring(b, a);
        assertEquals(Optional.of(b), s.selectDevice(100, r, List.of(a, b, c), m));
        assertEquals(Optional.of(a), s.selectDevice(200, r, List.of(a, b, c), m), "b has only 100 free");
        assertEquals(Optional.of(c), s.selectDevice(600, r, List.of(a, b, c), m), "no preferred device fits: any that does");
    }

    @Test
    void withoutPreferencesOrFitTheOrderOfAvailableDecides() {
        assertEquals(Optional.of(c), s.selectDevice(100, AllocationRequirements.defaults(), List.of(c, a), m));
        assertEquals(Optional.of(a), s.selectDevice(100, AllocationRequirements.defaults().preferring(Device.cuda(0)), List.of(a, c), m),
                "a preferred device that is not available is skipped");
        assertEquals(Optional.empty(), s.selectDevice(5000, AllocationRequirements.defaults(), List.of(a, b, c), m));
        assertEquals("preferred-order", s.name());
    }
}
