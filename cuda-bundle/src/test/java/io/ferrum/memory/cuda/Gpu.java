package io.ferrum.memory.cuda;

import org.junit.jupiter.api.Assumptions;

/** The GPU suite's gate: skips, with the probe's reason, where there is no driver or no device. */
final class Gpu {
    /** Probed once per test JVM. */
    static final Availability FOUND = Availability.probe(DriverCalls.JCUDA);

    private Gpu() {
    }

    static void assumePresent() {
        Assumptions.assumeTrue(FOUND.available(), () -> "GPU suite skipped: cuda backend " + FOUND.reason());
    }
}
