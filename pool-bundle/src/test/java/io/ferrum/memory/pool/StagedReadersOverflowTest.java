package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

/**
 * A {@code StackOverflowError} in the caller of a READ_ONLY {@code withMapped} action on memory the
 * CPU cannot address leaves neither the pool's lock held nor a reader's share of the block counted.
 * Runs {@link StagedReadersOverflowProbe} in an interpreted child JVM with 256 KiB stacks, where every
 * call is a real frame, with a helper thread holding the pool's lock as each action ends. Before, the
 * join and the leave each took the pool's lock before their {@code try}: ReentrantLock's critical
 * sections finish on reserved stack and throw the overflow as they return (the JVM warns "Potentially
 * dangerous stack overflow in ReservedStackAccess annotated method ReentrantLock$Sync.tryLock"), so
 * the lock stayed held by the caller: "readers: lock left held 40/40". With only that mended, the
 * unlock after the count in, and the leave's wait for the lock, still left shares counted ("share
 * left 29/40"): every later write of the block was refused.
 */
class StagedReadersOverflowTest {
    @Test
    void aStackOverflowInAReadersCallerLeavesNeitherTheLockNorItsShare() throws IOException, InterruptedException {
        String java = ProcessHandle.current().info().command().orElseThrow();
        Path log = Files.createTempFile("staged-readers-overflow", ".log");
        try {
            Process p = new ProcessBuilder(java, "-Xint", "-Xss256k", "-cp", System.getProperty("java.class.path"),
                    StagedReadersOverflowProbe.class.getName(), "40").redirectErrorStream(true)
                    .redirectOutput(log.toFile()).start();
            boolean ended = p.waitFor(3, TimeUnit.MINUTES);
            if (!ended) {
                p.destroyForcibly().waitFor(); // a hang fails the test, never the build
            }
            String out = Files.readString(log).strip();
            assertTrue(ended, "the probe hung (the pool's lock left held?): " + out);
            assertEquals(0, p.exitValue(), out);
            String line = out.lines().filter(l -> l.startsWith("readers:")).findFirst().orElse(out);
            assertEquals("readers: lock left held 0/40; share left 0/40; free refused 0/40", line, out);
        } finally {
            Files.delete(log);
        }
    }
}
