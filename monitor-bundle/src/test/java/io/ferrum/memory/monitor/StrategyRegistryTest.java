package io.ferrum.memory.monitor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.AllocationStrategy;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryInfo;

/** Which strategy is active: configured, else by ranking, best-fit among equals, then the oldest. */
class StrategyRegistryTest {

    /** A strategy that is only a name. */
    record Named(String name) implements AllocationStrategy {
        @Override
        public Optional<Device> selectDevice(long size, AllocationRequirements requirements, List<Device> available,
                                             Map<Device, MemoryInfo> memoryInfo) {
            return Optional.empty();
        }
    }

    private final StrategyRegistry registry = new StrategyRegistry();

    private StrategyRegistry.Entry add(String name, int ranking, long serviceId) {
        StrategyRegistry.Entry e = new StrategyRegistry.Entry(new Named(name), name, ranking, serviceId);
        registry.add(e);
        return e;
    }

    private List<String> names() {
        return registry.all().stream().map(StrategyRegistry.Entry::name).toList();
    }

    @Test
    void noStrategyMeansNoneActive() {
        assertNull(registry.active());
        registry.configure("best-fit");
        assertNull(registry.active());
    }

    @Test
    void theHighestRankingIsActiveThenBestFitAmongEqualsThenTheOldest() {
        StrategyRegistry.Entry older = add("most-free", 0, 1);
        add("round-robin", 0, 2);
        assertSame(older, registry.active(), "equal rankings, no best-fit: the oldest service");

        StrategyRegistry.Entry bestFit = add("best-fit", 0, 3);
        assertSame(bestFit, registry.active(), "best-fit first among equals, though younger");

        StrategyRegistry.Entry ranked = add("preferred-order", 10, 4);
        assertSame(ranked, registry.active(), "a higher ranking wins over best-fit");
        assertEquals(List.of("preferred-order", "best-fit", "most-free", "round-robin"), names());
    }

    @Test
    void theConfiguredStrategyIsActiveWhilePresentAndPrecedenceRulesOtherwise() {
        StrategyRegistry.Entry bestFit = add("best-fit", 0, 1);
        registry.configure(" round-robin ");
        assertEquals("round-robin", registry.configured(), "the name is stripped");
        assertSame(bestFit, registry.active(), "configured but absent: precedence decides");

        StrategyRegistry.Entry rr = add("round-robin", -5, 2);
        assertSame(rr, registry.active(), "present now: configured wins over a higher ranking");

        registry.remove(rr.strategy());
        assertSame(bestFit, registry.active(), "gone again");

        registry.configure(null);
        assertEquals("", registry.configured());
    }

    @Test
    void removingTheActiveStrategyChoosesAgain() {
        StrategyRegistry.Entry a = add("a", 5, 1);
        StrategyRegistry.Entry b = add("b", 1, 2);
        assertSame(a, registry.active());

        registry.remove(a.strategy());

        assertSame(b, registry.active());
        assertEquals(List.of("b"), names());
        registry.remove(b.strategy());
        assertNull(registry.active());
    }
}
