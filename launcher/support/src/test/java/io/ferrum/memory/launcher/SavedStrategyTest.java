package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SavedStrategyTest {
    @TempDir
    Path dir;

    @Test
    void aTypedConfigFileGetsAQuotedStrategyAndKeepsItsOtherLines() throws Exception {
        Path file = dir.resolve("io.ferrum.memory.monitor.config");
        Files.write(file, List.of("maxAttempts=I\"2\"", "strategy=\"round-robin\""));
        SavedStrategy.save(file, "most-free");
        assertEquals(List.of("maxAttempts=I\"2\"", "strategy=\"most-free\""), Files.readAllLines(file));
    }

    @Test
    void aQuotedNameEscapesWhatTheTypedFormatReads() {
        assertEquals("\"a\\\"b\\\\c\\u00e9\"", SavedStrategy.quoted("a\"b\\cé"));
    }
}
