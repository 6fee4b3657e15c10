package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ConfigFileGateTest {
    @TempDir
    Path dir;

    @Test
    void everySetOfKeysDifferingOnlyInCaseIsNamedInTheOrderOfTheFile() throws Exception {
        Path file = Files.writeString(dir.resolve("io.ferrum.memory.cpu.config"),
                "maxSize=L\"64\"\ncapacity=\"1g\"\nmaxsize=L\"128\"\nCapacity=\"2g\"\nMAXSIZE=L\"1\"\ncapacity=\"3g\"\n",
                StandardCharsets.ISO_8859_1);
        assertEquals(List.of("maxSize, maxsize and MAXSIZE", "capacity and Capacity"), ConfigFileGate.clashes(file));
    }

    @Test
    void aKeyGivenTwiceInOneCaseIsNoClash() throws Exception {
        Path file = Files.writeString(dir.resolve("io.ferrum.memory.cpu.cfg"), "capacity=1g\ncapacity=2g\n",
                StandardCharsets.ISO_8859_1);
        assertEquals(List.of(), ConfigFileGate.clashes(file));
    }

    /**
     * A file above 4 MiB (a log saved into config/ by mistake; here a sparse file, which reads as NULs) is
     * not read, as it was whole, however large: its size is said instead. One of 4 MiB is read.
     */
    @Test
    void aFileLargerThanFourMibIsNotRead() throws Exception {
        Path file = sparse("io.ferrum.memory.cpu.cfg", (4L << 20) + 1);
        IOException e = assertThrows(IOException.class, () -> ConfigFileEntries.read(file));
        assertEquals(file + " is 4.0 MiB (4194305 bytes), more than the 4 MiB a configuration file may be", e.getMessage());
        assertEquals(1, ConfigFileEntries.read(sparse("io.ferrum.memory.cuda.cfg", 4L << 20)).size(), "one key of NULs");
    }

    private Path sparse(String name, long size) throws IOException {
        Path file = dir.resolve(name);
        try (RandomAccessFile f = new RandomAccessFile(file.toFile(), "rw")) {
            f.setLength(size);
        }
        return file;
    }

    /** What FileInstall's typed reader throws on is found before it reads the file, with its key. */
    @Test
    void aTypedNumberItsTypeCannotTakeIsNamedOnlyInATypedFile() throws Exception {
        for (String[] c : new String[][] {{"I\"abc\"", "I: a whole number"}, {"I\" 3\"", "I: a whole number"},
                {"X\"300\"", "X: a whole number from -128 to 127"}, {"S\"70000\"", "S: a whole number from -32768 to 32767"},
                {"D\"0,85\"", "D: a decimal number"}, {"l\"1e3\"", "l: a whole number"}}) {
            Path file = Files.writeString(dir.resolve("io.ferrum.memory.cpu.config"), "index=I\"1\"\nvalue=" + c[0] + "\n",
                    StandardCharsets.ISO_8859_1);
            assertEquals("value=" + c[0] + ", which FileInstall cannot read as a typed value (" + c[1] + ")",
                    ConfigFileGate.badTypedValue(ConfigFileEntries.read(file)), c[0]);
        }
        Path good = Files.writeString(dir.resolve("good.config"), "a=I\"-3\"\nb=L\"+5\"\nc=F\"1.5\"\nd=D\"4607182418800017408\"\n"
                + "e=X\"-128\"\nf=T\"x\"\ng=[\"a\", \"b\"]\n", StandardCharsets.ISO_8859_1);
        assertEquals(null, ConfigFileGate.badTypedValue(ConfigFileEntries.read(good)));
        Path untyped = Files.writeString(dir.resolve("untyped.cfg"), "a=I\"abc\"\nb=3\n", StandardCharsets.ISO_8859_1);
        assertEquals(null, ConfigFileGate.badTypedValue(ConfigFileEntries.read(untyped)), "read as text: a is the text I\"abc\"");
    }

    /** A named pipe is not opened: the open would wait for a writer. */
    @Test
    void aNamedPipeIsNotOpened() throws Exception {
        Path pipe = dir.resolve("io.ferrum.memory.cpu.cfg");
        Process mkfifo;
        try {
            mkfifo = new ProcessBuilder("mkfifo", pipe.toString()).inheritIO().start();
        } catch (IOException e) {
            org.junit.jupiter.api.Assumptions.assumeTrue(false, "no mkfifo here: " + e.getMessage());
            return;
        }
        org.junit.jupiter.api.Assumptions.assumeTrue(mkfifo.waitFor() == 0 && Files.exists(pipe), "mkfifo failed");
        IOException e = assertThrows(IOException.class, () -> ConfigFileEntries.read(pipe));
        assertEquals(pipe + " is not a regular file (a pipe, a socket or a device)", e.getMessage());
    }
}
