package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Set;

import org.junit.jupiter.api.Test;

class UnusedConfigurationsTest {
    /** The PIDs the distribution's bundles designate. */
    private static final Set<String> PIDS = Set.of("io.ferrum.memory.cpu", "io.ferrum.memory.cuda", "io.ferrum.memory.monitor");
    private static final Set<String> FACTORY_PIDS = Set.of("io.ferrum.memory.cpu.device", "io.ferrum.memory.cuda.device");

    /** A typo in our namespace made a file that configured nothing, without a word: it was not ours to judge. */
    @Test
    void aNamespaceATypoOrTwoFromOursIsNear() {
        for (String pid : List.of("io.ferum.memory.cpu", "io.ferrum.memmory.pool", "io.ferrum.memroy.monitor",
                "io.ferrum.memorycpu", "io.ferrum.memory", "IO.Ferrum.Memory.cpu", "io.ferrrum.memry.cpu.device")) {
            assertTrue(UnusedConfigurations.nearOurs(pid), pid);
        }
    }

    /** Other projects' PIDs, ours' neighbours included, are not named. */
    @Test
    void anotherNamespaceIsNotNear() {
        for (String pid : List.of("org.apache.felix.fileinstall", "org.apache.felix.eventadmin.impl.EventAdmin", "io.ferrum.other",
                "io.ferrum.mem", "com.example.memory.cpu", "io", "")) {
            assertFalse(UnusedConfigurations.nearOurs(pid), pid);
        }
    }

    @Test
    void theNearestPidOfOursIsNamedAsAFileWouldNameIt() {
        assertEquals("io.ferrum.memory.cpu", UnusedConfigurations.nearest("io.ferum.memory.cpu", false, PIDS, FACTORY_PIDS));
        assertEquals("io.ferrum.memory.monitor", UnusedConfigurations.nearest("io.ferrum.memroy.monitor", false, PIDS, FACTORY_PIDS));
        assertEquals("io.ferrum.memory.cuda.device-<name>",
                UnusedConfigurations.nearest("io.ferrum.memmory.cuda.device", false, PIDS, FACTORY_PIDS));
        // io.ferum.memory.cpu-1.cfg: a factory file, which only a factory PID makes a new device of
        assertEquals("io.ferrum.memory.cpu.device-<name>", UnusedConfigurations.nearest("io.ferum.memory.cpu", true, PIDS, FACTORY_PIDS));
        assertNull(UnusedConfigurations.nearest("io.ferum.memory.cpu", false, Set.of(), Set.of()));
    }
}
