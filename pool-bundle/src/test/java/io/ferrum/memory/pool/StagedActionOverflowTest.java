package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.MemoryAccess;

/**
 * A {@code StackOverflowError} at any point of a staged {@code withMapped} action's start or end
 * (memory the CPU cannot address) leaves the calling thread no staging copy of the block: its later
 * reads of the block, and of the block object once another handle names it, read the device, and its
 * writes go there; no hold, share, scope or lock is left either. Runs {@link
 * StagedActionOverflowProbe} in an interpreted child JVM with 256 KiB stacks, where every call is a
 * real frame. Checked, no fix needed: the push of the staging copy and both its pops run in the
 * action's frame after the staging buffer's allocation and the device's copy from that same frame,
 * which reach deeper, so an overflow lands there first (docs/RELIABILITY.md).
 */
class StagedActionOverflowTest {
    @Test
    void aStackOverflowAroundAStagedActionLeavesTheThreadNoStagingCopy() throws IOException, InterruptedException {
        String java = ProcessHandle.current().info().command().orElseThrow();
        Process p = new ProcessBuilder(java, "-Xint", "-Xss256k", "-cp", System.getProperty("java.class.path"),
                StagedActionOverflowProbe.class.getName(), "40").redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
        assertTrue(p.waitFor(3, TimeUnit.MINUTES), "the probe must end");
        assertEquals(0, p.exitValue(), out);
        List<String> lines = out.lines().filter(l -> l.contains("staging copy left")).toList();
        assertEquals(MemoryAccess.values().length, lines.size(), out);
        for (String line : lines) {
            assertTrue(line.endsWith(": staging copy left 0/40; stale read 0/40; write failed 0/40; stale fresh block"
                    + " 0/40; hold left 0/40; free refused 0/40; lock left held 0/40"), out);
        }
    }
}
