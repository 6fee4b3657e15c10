package io.ferrum.memory.cuda;

import org.junit.jupiter.api.Assumptions;

/** The GPU suite's gate: skips, with the probe's reason, where there is no driver or no device. */
final class Gpu {
    /** Probed once per test JVM. */
    static final Availability FOUND = Availability.probe(DriverCalls.JCUDA);
    private static final java.util.concurrent.atomic.AtomicBoolean SAID = new java.util.concurrent.atomic.AtomicBoolean();

    private Gpu() {
    }

    /**
     * Skips the calling test with the probe's reason when there is no GPU; the first skip in a test
     * JVM also prints the reason on standard error, so that a build's log says why the GPU suite did
     * not run (a skipped test's message is otherwise only in the XML report).
     */
    static void assumePresent() {
        if (!FOUND.available() && !SAID.getAndSet(true)) {
            System.err.println("GPU suite skipped: cuda backend " + FOUND.reason());
        }
        Assumptions.assumeTrue(FOUND.available(), () -> "GPU suite skipped: cuda backend " + FOUND.reason());
    }

    /** Skips the calling test where a CUDA driver can be loaded: it checks what happens without one. */
    static void assumeAbsent() {
        Assumptions.assumeTrue(FOUND.reason().contains("no CUDA driver"), () -> "a CUDA driver is present: " + FOUND.reason());
    }
}
