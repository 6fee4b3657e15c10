package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;

import org.junit.jupiter.api.Test;

/** How a {@code -c} script is split into the statements the console runs one by one. */
class StatementsTest {
    @Test
    void splitsAtSemicolonsAndNewLinesAndDropsBlankStatements() {
        assertEquals(List.of("mem:devices", "h = mem:alloc 1m", "mem:free $h"),
                Statements.split(" mem:devices;h = mem:alloc 1m\n\n ; mem:free $h ;"));
    }

    @Test
    void keepsSemicolonsInsideQuotesBracketsAndAfterABackslash() {
        assertEquals(List.of("mem:write $h 0 \"a;b\"", "each [1;2] { echo $it; }", "echo 'x;y'", "echo a\\;b"),
                Statements.split("mem:write $h 0 \"a;b\"; each [1;2] { echo $it; }; echo 'x;y'; echo a\\;b"));
    }

    @Test
    void anEmptyScriptHasNoStatements() {
        assertEquals(List.of(), Statements.split(" ;\n; "));
    }
}
