package io.ferrum.memory.shell;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

import io.ferrum.memory.api.InvalidMemoryRequestException;

class ShellFormatsTest {

    /** Issue 17: success lines give amounts as the tables do, exact where the human form rounds. */
    @Test
    void amountsReadAsTheTablesShowSizes() {
        assertEquals("1 byte", Sizes.amount(1));
        assertEquals("100 bytes", Sizes.amount(100));
        assertEquals("1.0 KiB (1024 bytes)", Sizes.amount(1024));
        assertEquals("50.0 MiB (52428800 bytes)", Sizes.amount(52428800));
    }

    /** Issue 17: ages in s, min and h, rounded down. */
    @ParameterizedTest
    @CsvSource({"0, 0 s", "59, 59 s", "60, 1 min", "3599, 59 min", "3600, 1.0 h", "9000, 2.5 h", "86399, 23.9 h"})
    void agesReadInSecondsMinutesOrHours(long seconds, String shown) {
        assertEquals(shown, Sizes.age(seconds));
    }

    @ParameterizedTest
    @CsvSource({"4096, 4096", "64k, 65536", "64K, 65536", "64KiB, 65536", "64kb, 65536", "512MiB, 536870912",
        "512m, 536870912", "2g, 2147483648", "2GiB, 2147483648", "1t, 1099511627776", "100B, 100", "' 7 ', 7", "0, 0"})
    void sizesParseAsPeopleTypeThem(String text, long bytes) {
        assertEquals(bytes, Sizes.parse(text));
    }

    /** A unit in any case, as the shell takes memory types and devices: 64KIB is what 64KiB means. */
    @ParameterizedTest
    @CsvSource({"64KIB, 65536", "64kIb, 65536", "512MIB, 536870912", "2GIB, 2147483648", "1TIB, 1099511627776",
        "64KB, 65536", "100b, 100"})
    void sizeUnitsParseInAnyCase(String text, long bytes) {
        assertEquals(bytes, Sizes.parse(text));
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "k", "-1", "1.5g", "12 parsecs", "64KB2", "99999999999999999999", "9999999999t"})
    void badSizesAreRejectedNamingTheText(String text) {
        InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class, () -> Sizes.parse(text));
        assertTrue(e.getMessage().contains("'" + text + "'"), e.getMessage());
    }

    @Test
    void sizesPrintHumanReadably() {
        assertEquals("0 B", Sizes.human(0));
        assertEquals("1023 B", Sizes.human(1023));
        assertEquals("1.0 KiB", Sizes.human(1024));
        assertEquals("1.5 GiB", Sizes.human(3L << 29));
        assertEquals("512.0 MiB", Sizes.human(512L << 20));
    }

    /** A size just under a unit rounds to one of it, not to 1024 of the unit below (a 1 TiB device with 2 KiB used). */
    @Test
    void aSizeThatRoundsToTheNextUnitIsShownInIt() {
        assertEquals("1.0 MiB", Sizes.human((1L << 20) - 1));
        assertEquals("1.0 TiB", Sizes.human((1L << 40) - 2048));
        assertEquals("1023.9 KiB", Sizes.human((1L << 20) - 103), "what rounds below 1024.0 stays in its unit");
        assertEquals("8.0 EiB", Sizes.human(Long.MAX_VALUE));
    }

    @Test
    void tablesAlignTheirColumns() {
        String t = new Table("DEVICE", "TOTAL").row("cpu:0", "1.0 GiB").row("cpu:12", "5 B").toString();
        String nl = System.lineSeparator();
        assertEquals("DEVICE    TOTAL" + nl + "cpu:0   1.0 GiB" + nl + "cpu:12      5 B", t);
    }

    /** A text column (mem:backends' NOTE) reads from its start: a long note does not push the header right. */
    @Test
    void textColumnsAlignLeft() {
        String t = new Table("ID", "STATE", "NOTE").text("NOTE").row("2", "ACTIVE", "").row("3", "ACTIVE", "inactive: no CUDA driver")
                .toString();
        String nl = System.lineSeparator();
        assertEquals("ID   STATE  NOTE" + nl + "2   ACTIVE" + nl + "3   ACTIVE  inactive: no CUDA driver", t);
    }

    @Test
    void hexDumpShowsOffsetsBytesAndText() {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment s = a.allocate(20);
            for (int i = 0; i < 20; i++) {
                s.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) ('A' + i));
            }
            List<String> lines = BytesCommands.hex(s.asSlice(2), 2);
            assertEquals(2, lines.size());
            assertTrue(lines.get(0).startsWith("00000002  43 44 45"), lines.get(0));
            assertTrue(lines.get(0).endsWith("|CDEFGHIJKLMNOPQR|"), lines.get(0));
            assertTrue(lines.get(1).startsWith("00000012  53 54"), lines.get(1));
            assertTrue(lines.get(1).endsWith("|ST|"), lines.get(1));
        }
    }
}
