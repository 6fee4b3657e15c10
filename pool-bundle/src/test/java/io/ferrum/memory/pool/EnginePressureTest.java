package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryObserver;
import io.ferrum.memory.api.MemoryPressure;

/**
 * Pressure: the callback and observers hear each level crossing once, both ways; a throwing
 * callback is logged and cannot break allocation or free.
 */
class EnginePressureTest extends EngineTestSupport {
    @Test
    void pressureCallbackFiresOncePerCrossingBothWays() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        // 100 blocks of 102400 bytes fill exactly 10 chunks of 1024000 bytes: each block is 1 %.
        PooledMemoryManager m = manager(up, config(pool(1_024_000, 1_024_000)), PoolSettings.defaults().withCapacity(10_240_000));
        List<MemoryPressure> seen = new CopyOnWriteArrayList<>();
        List<String> observed = new CopyOnWriteArrayList<>();
        m.setPressureCallback(seen::add);
        m.addPressureObserver(new MemoryObserver() {
            @Override
            public void pressureChanged(Device d, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
                observed.add(previous + ">" + current + "@" + Math.round(info.utilizationPercent()));
            }
        });
        List<MemoryHandle> hs = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            hs.add(m.allocate(102_400, CPU));
        }
        assertEquals(List.of(MemoryPressure.MEDIUM, MemoryPressure.HIGH, MemoryPressure.CRITICAL), seen);
        assertEquals(List.of("LOW>MEDIUM@70", "MEDIUM>HIGH@85", "HIGH>CRITICAL@95"), observed);
        for (int i = 99; i >= 0; i--) {
            m.deallocate(hs.get(i));
        }
        assertEquals(List.of(MemoryPressure.MEDIUM, MemoryPressure.HIGH, MemoryPressure.CRITICAL,
                MemoryPressure.HIGH, MemoryPressure.MEDIUM, MemoryPressure.LOW), seen);
    }

    /**
     * Observers get the figures that caused the change with it. A pressure callback that frees on
     * HIGH (what callbacks are for) ran before the observers' figures were read, so they heard
     * "MEDIUM>HIGH" with figures of 55 %, a LOW level, and then "HIGH>LOW" with the same figures.
     */
    @Test
    void observersHearEachChangeWithTheFiguresThatCausedIt() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        // 100 blocks of 102400 bytes fill exactly 10 chunks of 1024000 bytes: each block is 1 %.
        PooledMemoryManager m = manager(up, config(pool(1_024_000, 1_024_000)), PoolSettings.defaults().withCapacity(10_240_000));
        List<MemoryHandle> hs = new ArrayList<>();
        m.setPressureCallback(p -> {
            if (p == MemoryPressure.HIGH) {
                for (int i = 0; i < 30; i++) {
                    m.deallocate(hs.remove(hs.size() - 1));
                }
            }
        });
        List<String> observed = new CopyOnWriteArrayList<>();
        m.addPressureObserver(new MemoryObserver() {
            @Override
            public void pressureChanged(Device d, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
                observed.add(previous + ">" + current + "@" + Math.round(info.utilizationPercent()) + " " + info.pressureLevel());
            }
        });
        for (int i = 0; i < 85; i++) {
            hs.add(m.allocate(102_400, CPU));
        }
        assertEquals(List.of("LOW>MEDIUM@70 MEDIUM", "MEDIUM>HIGH@85 HIGH", "HIGH>LOW@55 LOW"), observed);
    }

    @Test
    void aThrowingPressureCallbackIsLoggedAndCannotBreakAllocation() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        List<String> warnings = new CopyOnWriteArrayList<>();
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB)), PoolSettings.defaults().withCapacity(MiB).withLog(warningsInto(warnings)));
        m.setPressureCallback(p -> {
            throw new IllegalStateException("callback broke");
        });
        MemoryHandle h = m.allocate(800 * KiB, CPU);
        assertTrue(m.owns(h));
        m.deallocate(h);
        assertFalse(m.owns(h), "the free went through too");
        assertEquals(2, warnings.size(), warnings.toString());
        assertTrue(warnings.get(0).contains("LOW -> MEDIUM") && warnings.get(0).contains("callback broke"), warnings.get(0));
        assertTrue(warnings.get(1).contains("MEDIUM -> LOW"), warnings.get(1));
    }
}
