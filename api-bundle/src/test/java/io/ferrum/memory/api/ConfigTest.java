package io.ferrum.memory.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class ConfigTest {

    @Test
    void poolDefaultsAreTheSeeds() {
        MemoryPoolConfig d = MemoryPoolConfig.defaults();
        assertEquals(1024L * 1024 * 1024, d.initialSize());
        assertEquals(OptionalLong.empty(), d.maxSize());
        assertEquals(512L * 1024 * 1024, d.growthIncrement());
        assertTrue(d.enableAutoExpansion());
        assertEquals(256, d.alignment());
        assertFalse(d.preAllocate());
        assertTrue(d.enableStats());
    }

    @Test
    void builderChangesOnlyWhatItIsToldAndValidatesTheResult() {
        MemoryPoolConfig c = MemoryPoolConfig.builder().initialSize(4096).maxSize(8192).growthIncrement(1024)
                .alignment(64).preAllocate(true).stats(false).build();
        assertEquals(new MemoryPoolConfig(4096, OptionalLong.of(8192), 1024, true, 64, true, false), c);
        assertEquals(OptionalLong.empty(), c.toBuilder().unlimited().build().maxSize());
        assertFalse(c.toBuilder().autoExpansion(false).growthIncrement(0).build().enableAutoExpansion());
        // Lowering max below initial is caught at build(), not half-way.
        assertThrows(InvalidMemoryRequestException.class, () -> c.toBuilder().maxSize(100).build());
        // ...while the same two changes in the other order pass through an invalid state and still build.
        assertEquals(100, c.toBuilder().maxSize(100).initialSize(50).build().maxSize().getAsLong());
    }

    @Test
    void aMaxSizeOfOneByteIsSaidInTheSingular() {
        assertEquals("Invalid pool configuration: maxSize 1 byte is smaller than initialSize 4096 bytes",
                assertThrows(InvalidMemoryRequestException.class,
                        () -> MemoryPoolConfig.builder().initialSize(4096).maxSize(1).build()).getMessage());
    }

    @ParameterizedTest
    @ValueSource(longs = {0, -8, 3, 24, 1000, Long.MIN_VALUE})
    void poolAlignmentMustBeAPowerOfTwo(long alignment) {
        InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class,
                () -> MemoryPoolConfig.builder().alignment(alignment).build());
        assertTrue(e.getMessage().contains(Long.toString(alignment)), e.getMessage());
    }

    @Test
    void poolRejectsContradictions() {
        assertTrue(assertThrows(InvalidMemoryRequestException.class,
                () -> MemoryPoolConfig.builder().initialSize(2048).maxSize(1024).build()).getMessage().contains("1024"));
        assertThrows(InvalidMemoryRequestException.class, () -> MemoryPoolConfig.builder().initialSize(-1).build());
        assertThrows(InvalidMemoryRequestException.class, () -> MemoryPoolConfig.builder().growthIncrement(-1).build());
        assertTrue(assertThrows(InvalidMemoryRequestException.class,
                () -> MemoryPoolConfig.builder().growthIncrement(0).build()).getMessage().contains("enableAutoExpansion"));
        assertThrows(InvalidMemoryRequestException.class,
                () -> new MemoryPoolConfig(0, null, 1, true, 8, false, true));
        // Equal initial and max is the fixed-size pool: allowed.
        assertEquals(4096, MemoryPoolConfig.builder().initialSize(4096).maxSize(4096).build().initialSize());
    }

    @Test
    void managerDefaultsAreTheSeeds() {
        MemoryManagerConfig d = MemoryManagerConfig.defaults();
        assertEquals(Map.of(MemoryType.GENERAL, MemoryPoolConfig.defaults()), d.poolConfigs());
        assertTrue(d.enableTracking());
        assertTrue(d.enableAutoGc());
        assertEquals(0.85, d.gcThreshold(), 1e-12);
        assertFalse(d.enableDebug());
        assertEquals(4, d.maxConcurrentTransfers());
    }

    @Test
    void poolConfigFallsBackToGeneralThenDefaults() {
        MemoryPoolConfig small = MemoryPoolConfig.builder().initialSize(1 << 20).build();
        MemoryPoolConfig cache = MemoryPoolConfig.builder().initialSize(1 << 22).build();
        MemoryManagerConfig c = MemoryManagerConfig.defaults().withPoolConfig(MemoryType.GENERAL, small)
                .withPoolConfig(MemoryType.CACHE, cache);
        assertSame(cache, c.poolConfig(MemoryType.CACHE));
        assertSame(small, c.poolConfig(MemoryType.TENSOR));
        MemoryManagerConfig none = new MemoryManagerConfig(Map.of(), true, false, 0.5, false, 1);
        assertEquals(MemoryPoolConfig.defaults(), none.poolConfig(MemoryType.PINNED));
    }

    @Test
    void managerConfigCopiesItsMapAndRejectsBadValues() {
        Map<MemoryType, MemoryPoolConfig> map = new HashMap<>();
        map.put(MemoryType.GENERAL, MemoryPoolConfig.defaults());
        MemoryManagerConfig c = new MemoryManagerConfig(map, true, true, 0.85, false, 4);
        map.put(MemoryType.CACHE, MemoryPoolConfig.defaults());
        assertEquals(1, c.poolConfigs().size(), "the record must not see later changes to the caller's map");
        assertThrows(UnsupportedOperationException.class, () -> c.poolConfigs().clear());

        assertEquals(0.0, c.withAutoGc(true, 0.0).gcThreshold());
        assertEquals(1.0, c.withAutoGc(true, 1.0).gcThreshold());
        assertThrows(InvalidMemoryRequestException.class, () -> c.withAutoGc(true, 1.0001));
        assertThrows(InvalidMemoryRequestException.class, () -> c.withAutoGc(true, -0.01));
        assertThrows(InvalidMemoryRequestException.class, () -> c.withAutoGc(true, Double.NaN));
        assertThrows(InvalidMemoryRequestException.class, () -> c.withMaxConcurrentTransfers(0));
        EnumMap<MemoryType, MemoryPoolConfig> withNull = new EnumMap<>(MemoryType.class);
        assertThrows(InvalidMemoryRequestException.class, () -> new MemoryManagerConfig(null, true, true, 0.5, false, 1));
        withNull.put(MemoryType.CACHE, null);
        assertThrows(InvalidMemoryRequestException.class, () -> new MemoryManagerConfig(withNull, true, true, 0.5, false, 1));
    }

    @Test
    void requirementsDefaultsAndWithers() {
        AllocationRequirements d = AllocationRequirements.defaults();
        assertEquals(List.of(), d.preferredDevices());
        assertEquals(MemoryType.GENERAL, d.memoryType());
        assertEquals(OptionalLong.empty(), d.alignment());
        assertFalse(d.critical());
        assertEquals(Optional.empty(), d.expectedLifetime());

        AllocationRequirements r = d.preferring(Device.cuda(1), Device.cpu()).withMemoryType(MemoryType.CACHE)
                .withAlignment(4096).withCritical(true).withExpectedLifetime(Duration.ofSeconds(3));
        assertEquals(List.of(Device.cuda(1), Device.cpu()), r.preferredDevices());
        assertEquals(0, r.preferenceOf(Device.cuda(1)));
        assertEquals(1, r.preferenceOf(Device.cpu()));
        assertEquals(-1, r.preferenceOf(Device.cuda(0)));
        assertEquals(MemoryType.CACHE, r.memoryType());
        assertEquals(4096, r.alignment().getAsLong());
        assertTrue(r.critical());
        assertEquals(Duration.ofSeconds(3), r.expectedLifetime().orElseThrow());
    }

    @Test
    void requirementsRejectBadAlignmentNullsAndNegativeLifetime() {
        AllocationRequirements d = AllocationRequirements.defaults();
        assertThrows(InvalidMemoryRequestException.class, () -> d.withAlignment(48));
        assertThrows(InvalidMemoryRequestException.class, () -> d.withAlignment(0));
        assertThrows(InvalidMemoryRequestException.class, () -> d.withMemoryType(null));
        assertThrows(InvalidMemoryRequestException.class, () -> d.preferring(Device.cpu(), null));
        assertThrows(InvalidMemoryRequestException.class, () -> d.withExpectedLifetime(Duration.ofMillis(-1)));
    }
}
