package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.io.InputStreamReader;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import org.apache.felix.fileinstall.shaded.util.properties.TypedProperties;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** What FileInstall 3.7.4 keeps of a file is read with its own parser, as its ConfigInstaller reads a {@code .cfg} file. */
class DuplicateKeysTest {
    @TempDir
    Path dir;

    @Test
    void aKeyGivenTwiceIsNamedWithBothValuesAndTheOneFileInstallKeeps() throws Exception {
        Path file = Files.writeString(dir.resolve("io.ferrum.memory.cpu.device-t1.cfg"),
                "index=1\ncapacity=64m\n# later, by another hand\ncapacity = 1g\n", StandardCharsets.ISO_8859_1);
        assertEquals("1g", asFileInstallReads(file).get("capacity"), "FileInstall keeps the last, without a word");
        assertEquals(file + " gives capacity twice ('64m', then '1g'; '1g' applies): FileInstall keeps the last value of a"
                + " key and drops the others without a word; give each key once",
                DuplicateKeys.warning(file.toString(), DuplicateKeys.repeated(file)));
    }

    @Test
    void everyRepeatedKeyIsNamedInOneWarning() throws Exception {
        Path file = Files.writeString(dir.resolve("io.ferrum.memory.monitor.cfg"),
                "strategy=best-fit\nmaxAttempts: 3\nstrategy=most-free\nmaxAttempts 5\nstrategy=round-\\\n  robin\n",
                StandardCharsets.ISO_8859_1);
        assertEquals(Map.of("strategy", List.of("best-fit", "most-free", "round-robin"), "maxAttempts", List.of("3", "5")),
                DuplicateKeys.repeated(file));
        assertEquals("round-robin", asFileInstallReads(file).get("strategy"));
        assertEquals(file + " gives strategy 3 times ('best-fit', 'most-free', then 'round-robin'; 'round-robin' applies),"
                + " maxAttempts twice ('3', then '5'; '5' applies): FileInstall keeps the last value of a key and drops the"
                + " others without a word; give each key once", DuplicateKeys.warning(file.toString(), DuplicateKeys.repeated(file)));
    }

    @Test
    void aFileThatGivesEachKeyOnceIsNotNamed() throws Exception {
        Path file = Files.writeString(dir.resolve("io.ferrum.memory.cpu.cfg"),
                "# capacity=1g\ncapacity=64m\n! capacity=2g\ninitialSize=4m\n", StandardCharsets.ISO_8859_1);
        assertNull(DuplicateKeys.warning(file.toString(), DuplicateKeys.repeated(file)));
    }

    private static Map<String, Object> asFileInstallReads(Path file) throws Exception {
        TypedProperties p = new TypedProperties();
        try (Reader r = new InputStreamReader(Files.newInputStream(file), StandardCharsets.ISO_8859_1)) {
            p.load(r);
        }
        return p;
    }
}
