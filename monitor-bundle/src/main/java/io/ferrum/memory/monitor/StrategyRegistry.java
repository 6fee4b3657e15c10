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
    /** The entry {@link #active()} returns, chosen again on every change (the router reads it on every call). */
    private volatile Entry active;

    synchronized void add(Entry e) {
        List<Entry> l = new ArrayList<>(entries);
        l.add(e);
        l.sort(PRECEDENCE);
        entries = List.copyOf(l);
        active = choose();
    }

    synchronized void remove(AllocationStrategy s) {
        List<Entry> l = new ArrayList<>(entries);
        l.removeIf(e -> e.strategy == s);
        entries = List.copyOf(l);
        active = choose();
    }

    synchronized void configure(String name) {
        configured = name == null ? "" : name.strip();
        active = choose();
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
        return active;
    }

    /** @return the configured strategy if present, else the first in precedence order, else null */
    private Entry choose() {
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
