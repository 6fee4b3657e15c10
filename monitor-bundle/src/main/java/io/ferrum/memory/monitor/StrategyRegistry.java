package io.ferrum.memory.monitor;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

import io.ferrum.memory.api.AllocationStrategy;

/**
 * The strategies present and which one is active: the one named in the configuration if present,
 * else the highest service ranking, best-fit first among equals, then the oldest service.
 */
final class StrategyRegistry {
    static final String DEFAULT_NAME = "best-fit";

    record Entry(AllocationStrategy strategy, String name, int ranking, long serviceId) {
    }

    private static final Comparator<Entry> PRECEDENCE = Comparator.comparingInt(Entry::ranking).reversed()
            .thenComparing(e -> DEFAULT_NAME.equals(e.name) ? 0 : 1)
            .thenComparingLong(Entry::serviceId);

    private volatile List<Entry> entries = List.of();
    private volatile String configured = "";

    synchronized void add(Entry e) {
        List<Entry> l = new ArrayList<>(entries);
        l.add(e);
        l.sort(PRECEDENCE);
        entries = List.copyOf(l);
    }

    synchronized void remove(AllocationStrategy s) {
        List<Entry> l = new ArrayList<>(entries);
        l.removeIf(e -> e.strategy == s);
        entries = List.copyOf(l);
    }

    void configure(String name) {
        configured = name == null ? "" : name.strip();
    }

    String configured() {
        return configured;
    }

    /** @return every strategy present, in precedence order */
    List<Entry> all() {
        return entries;
    }

    /** @return the active strategy, or null when none is present */
    Entry active() {
        List<Entry> l = entries;
        String name = configured;
        if (!name.isEmpty()) {
            for (Entry e : l) {
                if (name.equals(e.name)) {
                    return e;
                }
            }
        }
        return l.isEmpty() ? null : l.get(0);
    }
}
