package io.ferrum.memory.strategy.bestfit;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalDouble;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryInfo;

class BestFitStrategyTest {
    static final Device A = Device.cpu(0);
    static final Device B = Device.cpu(1);
    static final Device C = Device.cpu(2);
    static final Device Z = Device.cpu(3);

    static MemoryInfo info(long total, long used) {
        return new MemoryInfo(total, used, total - used, total, 0, 0.0, OptionalDouble.empty());
    }

    // A: half used; B: 90 % used; C: empty and twice as large.
    final Map<Device, MemoryInfo> infos = Map.of(A, info(1000, 500), B, info(1000, 900), C, info(2000, 0), Z, info(0, 0));
    final BestFitStrategy s = new BestFitStrategy();
    final AllocationRequirements none = AllocationRequirements.defaults();

    @Test
    void scoresAreTheSeedsFormula() {
        // A: 1 - (500-100)/1000 - |0.5-0.5|*0.5 = 0.6
        assertEquals(0.6, BestFitStrategy.score(100, infos.get(A)), 1e-12);
        // B: 1 - 0/1000 - |0.9-0.5|*0.5 = 0.8
        assertEquals(0.8, BestFitStrategy.score(100, infos.get(B)), 1e-12);
        // C: 1 - 1900/2000 - |0-0.5|*0.5 = -0.2
        assertEquals(-0.2, BestFitStrategy.score(100, infos.get(C)), 1e-12);
        assertEquals(0.2, BestFitStrategy.preferenceBonus(0), 1e-12);
        assertEquals(0.1, BestFitStrategy.preferenceBonus(1), 1e-12);
        assertEquals(0.05, BestFitStrategy.preferenceBonus(3), 1e-12);
        assertEquals(0.0, BestFitStrategy.preferenceBonus(-1));
    }

    @Test
    void theTightestFitWins() {
        assertEquals(Optional.of(B), s.selectDevice(100, none, List.of(A, B, C), infos));
        assertEquals(Optional.of(B), s.selectDevice(100, none, List.of(C, A, B), infos), "wherever it stands");
        assertEquals(Optional.of(B), s.selectDevice(100, none, List.of(B, C, A), infos));
        assertEquals(Optional.of(C), s.selectDevice(100, none, List.of(Z, C), infos), "alone, the worst score still wins");
    }

    @Test
    void devicesWithTooLittleFreeAreSkipped() {
        assertEquals(Optional.of(C), s.selectDevice(600, none, List.of(A, B, C), infos));
        assertEquals(Optional.of(A), s.selectDevice(500, none, List.of(A, B, C), infos), "free == size fits: A scores 1.0");
    }

    @Test
    void nothingFitsGivesEmpty() {
        assertEquals(Optional.empty(), s.selectDevice(5000, none, List.of(A, B, C), infos));
        assertEquals(Optional.empty(), s.selectDevice(1, none, List.of(), infos));
    }

    @Test
    void zeroTotalAndUnknownDevicesAreSkipped() {
        assertEquals(Optional.empty(), s.selectDevice(1, none, List.of(Z), infos));
        assertEquals(Optional.of(A), s.selectDevice(100, none, List.of(Device.cuda(0), A), infos));
    }

    @Test
    void thePreferenceBonusCanDecide() {
        Device e = Device.cpu(4);
        Device f = Device.cpu(5);
        Map<Device, MemoryInfo> m = Map.of(e, info(1000, 400), f, info(1000, 500));
        // E scores 1 - 0.5 - 0.05 = 0.45; F scores 0.6.
        assertEquals(Optional.of(f), s.selectDevice(100, none, List.of(e, f), m));
        // Preferred first, E gets +0.2 = 0.65 > 0.6.
        assertEquals(Optional.of(e), s.selectDevice(100, none.preferring(e), List.of(e, f), m));
        // Preferred second, E gets +0.1 = 0.55 < 0.6.
        assertEquals(Optional.of(f), s.selectDevice(100, none.preferring(Device.cuda(0), e), List.of(e, f), m));
    }

    @Test
    void onATieTheEarlierAvailableDeviceWins() {
        Map<Device, MemoryInfo> same = Map.of(A, info(1000, 300), B, info(1000, 300));
        assertEquals(Optional.of(A), s.selectDevice(10, none, List.of(A, B), same));
        assertEquals(Optional.of(B), s.selectDevice(10, none, List.of(B, A), same));
        assertEquals("best-fit", s.name());
    }
}
