package io.ferrum.memory.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.OptionalDouble;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class MemoryInfoTest {

    private static MemoryInfo info(long total, long used) {
        return new MemoryInfo(total, used, total - used, total, 1, 0.0, OptionalDouble.empty());
    }

    @Test
    void utilizationIsUsedOverTotalInPercent() {
        assertEquals(25.0, info(400, 100).utilizationPercent(), 1e-12);
        assertEquals(100.0, info(7, 7).utilizationPercent(), 1e-12);
        assertEquals(0.0, info(7, 0).utilizationPercent(), 1e-12);
    }

    @Test
    void utilizationOfAnEmptyDeviceIsZeroNotNaN() {
        MemoryInfo empty = new MemoryInfo(0, 0, 0, 0, 0, 0.0, OptionalDouble.empty());
        assertEquals(0.0, empty.utilizationPercent());
        assertEquals(MemoryPressure.LOW, empty.pressureLevel());
    }

    // The seed's thresholds are inclusive at their lower edge: 70 % is MEDIUM, 69.99 % is LOW.
    @ParameterizedTest
    @CsvSource({
        "0, LOW", "6999, LOW", "7000, MEDIUM", "7001, MEDIUM", "8499, MEDIUM", "8500, HIGH",
        "9499, HIGH", "9500, CRITICAL", "9999, CRITICAL", "10000, CRITICAL",
    })
    void pressureThresholdsAtAndAroundTheirEdges(long usedOfTenThousand, MemoryPressure expected) {
        assertEquals(expected, info(10_000, usedOfTenThousand).pressureLevel());
    }

    @Test
    void pressureFromPercentMatchesTheSeed() {
        assertEquals(MemoryPressure.LOW, MemoryPressure.forUtilization(69.999));
        assertEquals(MemoryPressure.MEDIUM, MemoryPressure.forUtilization(70.0));
        assertEquals(MemoryPressure.HIGH, MemoryPressure.forUtilization(85.0));
        assertEquals(MemoryPressure.CRITICAL, MemoryPressure.forUtilization(95.0));
        assertEquals(MemoryPressure.LOW, MemoryPressure.forUtilization(Double.NaN));
    }

    @Test
    void pressureLevelsAreOrderedBySeverity() {
        assertTrue(MemoryPressure.LOW.compareTo(MemoryPressure.MEDIUM) < 0);
        assertTrue(MemoryPressure.MEDIUM.compareTo(MemoryPressure.HIGH) < 0);
        assertTrue(MemoryPressure.HIGH.compareTo(MemoryPressure.CRITICAL) < 0);
        assertTrue(MemoryPressure.HIGH.isAtLeast(MemoryPressure.MEDIUM));
        assertTrue(MemoryPressure.HIGH.isAtLeast(MemoryPressure.HIGH));
        assertTrue(!MemoryPressure.MEDIUM.isAtLeast(MemoryPressure.HIGH));
    }

    @Test
    void rejectsNegativeCountsAndRatiosOutsideZeroToOne() {
        assertThrows(InvalidMemoryRequestException.class, () -> new MemoryInfo(-1, 0, 0, 0, 0, 0, OptionalDouble.empty()));
        assertThrows(InvalidMemoryRequestException.class, () -> new MemoryInfo(1, 0, 1, 0, -1, 0, OptionalDouble.empty()));
        assertThrows(InvalidMemoryRequestException.class, () -> new MemoryInfo(1, 0, 1, 0, 0, 1.01, OptionalDouble.empty()));
        assertThrows(InvalidMemoryRequestException.class, () -> new MemoryInfo(1, 0, 1, 0, 0, -0.1, OptionalDouble.empty()));
        assertThrows(InvalidMemoryRequestException.class, () -> new MemoryInfo(1, 0, 1, 0, 0, Double.NaN, OptionalDouble.empty()));
        assertThrows(NullPointerException.class, () -> new MemoryInfo(1, 0, 1, 0, 0, 0, null));
    }

    @Test
    void defragmentationAndAccessStatsValidate() {
        assertEquals(3, new DefragmentationStats(10, 3, 1, 0.5, 0.0).blocksMoved());
        assertThrows(InvalidMemoryRequestException.class, () -> new DefragmentationStats(-1, 0, 0, 0, 0));
        assertThrows(InvalidMemoryRequestException.class, () -> new DefragmentationStats(0, 0, 0, 2, 0));
        assertThrows(InvalidMemoryRequestException.class,
                () -> new MemoryAccessStats(-1, 0, 0, 0, java.time.Instant.EPOCH, AccessPatternType.UNKNOWN));
        assertThrows(InvalidMemoryRequestException.class, () -> new MemoryAccessStats(0, 0, 0, 0, null, AccessPatternType.UNKNOWN));
    }

    @Test
    void handleInfoRejectsNonPowerOfTwoAlignmentAndEmptySize() {
        MemoryHandle h = new MemoryHandle(5);
        java.time.Instant now = java.time.Instant.now();
        assertEquals(256, new MemoryHandleInfo(h, 1, Device.cpu(), 256, now, false, MemoryType.GENERAL).alignment());
        assertThrows(InvalidMemoryRequestException.class, () -> new MemoryHandleInfo(h, 1, Device.cpu(), 24, now, false, MemoryType.GENERAL));
        assertThrows(InvalidMemoryRequestException.class, () -> new MemoryHandleInfo(h, 0, Device.cpu(), 8, now, false, MemoryType.GENERAL));
    }
}
