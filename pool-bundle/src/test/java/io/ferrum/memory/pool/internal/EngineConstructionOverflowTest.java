package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

/**
 * A {@code StackOverflowError} at any step of a manager's construction gives back what the
 * construction took: no use of the coarse clock is left counted (its thread would run for good),
 * and no chunk stays reserved. Runs {@link EngineConstructionOverflowProbe} in an interpreted child
 * JVM with 256 KiB stacks, where every call is a real frame. Before, the clock was taken before the
 * pools were built and given back only by a close of a pre-allocation that failed, and the clock
 * counted its use before it started its thread: "clock use left 20/20; stream manager left 20/20"
 * (151 uses counted after 20 runs, the thread ticking with every manager closed).
 */
class EngineConstructionOverflowTest {
    @Test
    void aStackOverflowDuringAConstructionLeavesNoClockUseAndNoChunk() throws IOException, InterruptedException {
        String java = ProcessHandle.current().info().command().orElseThrow();
        Process p = new ProcessBuilder(java, "-Xint", "-Xss256k", "-cp", System.getProperty("java.class.path"),
                EngineConstructionOverflowProbe.class.getName(), "10").redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        assertTrue(p.waitFor(3, TimeUnit.MINUTES), "the probe must end");
        assertEquals(0, p.exitValue(), out);
        String line = out.lines().filter(l -> l.startsWith("construction:")).findFirst().orElse(out);
        assertTrue(line.startsWith("construction: clock use left 0/10;"), line);
        assertTrue(line.contains("; chunks left 0/10;") && line.endsWith("clock users 0, ticking false"), line);
    }
}
