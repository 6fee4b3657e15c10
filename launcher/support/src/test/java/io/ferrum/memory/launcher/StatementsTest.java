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

    /**
     * A line ends at {@code \n}, {@code \r\n} or a lone {@code \r} (an old Mac file's), as piped input's
     * lines do ({@link InputLines}); a {@code -c} script split only at {@code \n}, so a lone {@code \r}
     * joined two commands into one, the second taken as the first's argument, and a comment before it
     * hid the next line's command.
     */
    @Test
    void aLoneCarriageReturnEndsAStatementAndACommentAsANewLineDoes() {
        assertEquals(List.of("mem:devices", "mem:gc", "mem:pressure"), Statements.split("mem:devices\rmem:gc\r\nmem:pressure\r"));
        assertEquals(List.of("mem:devices"), Statements.split("# a comment\rmem:devices"));
    }

    /**
     * Inside a closure the script's statements go to Gogo whole, and Gogo ends a statement there at a
     * {@code \n} but reads a {@code \r} as a space: {@code f = { mem:strategy<CR>mem:gc }} ran
     * {@code mem:strategy mem:gc}, refused. A lone {@code \r} there is now passed as a {@code \n}.
     */
    @Test
    void aLoneCarriageReturnInsideAClosureEndsItsStatementThereToo() {
        assertEquals(List.of("f = { mem:strategy\nmem:gc }", "f"), Statements.split("f = { mem:strategy\rmem:gc }\rf"));
        assertEquals(List.of("f = { mem:strategy\r\nmem:gc }"), Statements.split("f = { mem:strategy\r\nmem:gc }"));
        assertEquals(List.of("echo '\r'"), Statements.split("echo '\r'"), "a \\r inside quotes is kept");
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
