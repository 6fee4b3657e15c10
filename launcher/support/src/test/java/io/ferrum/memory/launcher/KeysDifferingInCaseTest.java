package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class KeysDifferingInCaseTest {
    @TempDir
    Path dir;

    @Test
    void everySetOfKeysDifferingOnlyInCaseIsNamedInTheOrderOfTheFile() throws Exception {
        Path file = Files.writeString(dir.resolve("io.ferrum.memory.cpu.config"),
                "maxSize=L\"64\"\ncapacity=\"1g\"\nmaxsize=L\"128\"\nCapacity=\"2g\"\nMAXSIZE=L\"1\"\ncapacity=\"3g\"\n",
                StandardCharsets.ISO_8859_1);
        assertEquals(List.of("maxSize, maxsize and MAXSIZE", "capacity and Capacity"), KeysDifferingInCase.clashes(file));
    }

    @Test
    void aKeyGivenTwiceInOneCaseIsNoClash() throws Exception {
        Path file = Files.writeString(dir.resolve("io.ferrum.memory.cpu.cfg"), "capacity=1g\ncapacity=2g\n",
                StandardCharsets.ISO_8859_1);
        assertEquals(List.of(), KeysDifferingInCase.clashes(file));
    }
}
