package io.ferrum.memory.monitor;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

import io.ferrum.memory.api.AllocationStrategy;

/**
 * The repository of strategies: which are present, and which one is active.
 *
 * <p>The active strategy is the one named in the configuration if it is present; otherwise the
 * highest service ranking, {@value #DEFAULT_NAME} first among equals, then the oldest service (lowest
 * service id). Invariants: {@link #all()} is always in that precedence order; {@link #active()} is
 * chosen anew by every change (writers are serialised) and read without a lock, because the router
 * reads it on every allocation.
 */
final class StrategyRegistry {
    static final String DEFAULT_NAME = "best-fit";

    /**
     * One strategy service.
     *
     * @param name      its {@code memory.strategy.name}, or the strategy's own name when the property is absent
     * @param serviceId its service id; {@code Long.MAX_VALUE} when unknown (it then yields to every service)
     */
    record Entry(AllocationStrategy strategy, String name, int ranking, long serviceId) {
    }

    private static final Comparator<Entry> PRECEDENCE = Comparator.comparingInt(Entry::ranking).reversed()
            .thenComparing(e -> DEFAULT_NAME.equals(e.name()) ? 0 : 1)
            .thenComparingLong(Entry::serviceId);

    private volatile List<Entry> entries = List.of();
    private volatile String configured = "";
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
        l.removeIf(e -> e.strategy() == s);
        entries = List.copyOf(l);
        active = choose();
    }

    /** @param name the configured strategy's name; null or blank: none configured */
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
                if (name.equals(e.name())) {
                    return e;
                }
            }
        }
        return l.isEmpty() ? null : l.get(0);
    }
}
