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

    /** As Gogo reads them: a backslash inside single quotes is itself, so the quote still ends there. */
    @Test
    void aBackslashInsideSingleQuotesDoesNotHideTheQuoteEnd() {
        assertEquals(List.of("mem:write --text $h 0 'a\\'", "mem:free 0x99"),
                Statements.split("mem:write --text $h 0 'a\\'; mem:free 0x99"));
    }

    @Test
    void aHashThatStartsAWordCommentsOutTheRestOfItsLine() {
        assertEquals(List.of("mem:pressure", "mem:devices"),
                Statements.split("# whole; mem:free 0x99\nmem:pressure # c; mem:gc\nmem:devices"));
        assertEquals(List.of("mem:write $h 0 a#b", "echo '# kept'"), Statements.split("mem:write $h 0 a#b; echo '# kept'"));
    }

    /** Inside a closure too: a quote or bracket in a comment opens nothing. */
    @Test
    void aCommentInsideAClosureHidesItsQuotesAndBrackets() {
        assertEquals(List.of("f = { mem:devices \n}", "exit 3"), Statements.split("f = { mem:devices # don't (\n}\nexit 3"));
    }

    @Test
    void anEmptyScriptHasNoStatements() {
        assertEquals(List.of(), Statements.split(" ;\n; "));
    }
}
