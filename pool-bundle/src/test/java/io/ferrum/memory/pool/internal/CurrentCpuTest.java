package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;

/** The CPU the caller runs on, as Linux reports it for the thread in {@code /proc/thread-self/stat}. */
class CurrentCpuTest {
    private static final Path STAT = Path.of("/proc/thread-self/stat");

    @Test
    void onLinuxItIsTheCpuTheKernelReportsForTheThread() throws IOException {
        assumeTrue(Files.isReadable(STAT), "not Linux: no /proc/thread-self/stat to compare with");
        assertTrue(CurrentCpu.available(), "glibc has sched_getcpu");
        int agreed = 0;
        for (int i = 0; i < 200; i++) {
            int before = CurrentCpu.id();
            int kernel = processor();
            int after = CurrentCpu.id();
            assertTrue(before >= 0 && after >= 0, "a CPU number, not -1");
            if (before == kernel && after == kernel) {
                agreed++; // the thread did not move between the three readings
            }
        }
        assertTrue(agreed > 0, "agrees with the kernel whenever the thread stays put");
    }

    /** @return field 39 of the calling thread's stat line: the CPU it last ran on */
    private static int processor() throws IOException {
        String stat = Files.readString(STAT);
        String[] after = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        return Integer.parseInt(after[39 - 3]);
    }
}
