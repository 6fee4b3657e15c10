package io.ferrum.memory.api;

/**
 * How close a device is to full, from its utilisation (used / total). Ordered: {@code LOW <
 * MEDIUM < HIGH < CRITICAL}, so {@code compareTo} and {@link #isAtLeast} compare severity.
 *
 * <p>Thresholds, inclusive at their lower edge, from the seed contract: utilisation {@code >= 95 %}
 * is CRITICAL, {@code >= 85 %} HIGH, {@code >= 70 %} MEDIUM, anything below LOW.
 */
public enum MemoryPressure {
    /** Below 70 % used: plenty of memory available. */
    LOW(0.0),
    /** From 70 % used: be conservative. */
    MEDIUM(70.0),
    /** From 85 % used: consider cleanup or eviction. */
    HIGH(85.0),
    /** From 95 % used: free memory or reject requests. */
    CRITICAL(95.0);

    private final double thresholdPercent;

    MemoryPressure(double thresholdPercent) {
        this.thresholdPercent = thresholdPercent;
    }

    /** @return the lowest utilisation, in percent, at which this level applies */
    public double thresholdPercent() {
        return thresholdPercent;
    }

    /**
     * @param utilizationPercent used / total * 100; NaN counts as 0
     * @return the level for that utilisation
     */
    public static MemoryPressure forUtilization(double utilizationPercent) {
        if (utilizationPercent >= CRITICAL.thresholdPercent) {
            return CRITICAL;
        } else if (utilizationPercent >= HIGH.thresholdPercent) {
            return HIGH;
        } else if (utilizationPercent >= MEDIUM.thresholdPercent) {
            return MEDIUM;
        }
        return LOW;
    }

    /**
     * @param other a level
     * @return true when this level is as severe as {@code other} or more
     */
    public boolean isAtLeast(MemoryPressure other) {
        return compareTo(other) >= 0;
    }
}
