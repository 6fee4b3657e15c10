package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** The console's words for a failed line. */
class LineRunnerTest {
    @Test
    void gogosAnswerToACallNoSignatureTakesNamesTheCommandWhatItGotAndWhatItTakes() {
        IllegalArgumentException gogo = new IllegalArgumentException(
                "Cannot coerce alloc(Token, Token) to any of [(String, String, String), (String, String, String, String)]");
        assertEquals("alloc cannot take '--size 4k'; it takes (String, String, String), (String, String, String, String);"
                + " see: help alloc", LineRunner.message(gogo, "mem:alloc --size 4k"));
        assertEquals("uninstall cannot take no arguments; it takes (Bundle...); see: help uninstall",
                LineRunner.message(new IllegalArgumentException("Cannot coerce uninstall() to any of [(Bundle[])]"), "uninstall"));
    }

    @Test
    void anyOtherFailureKeepsItsMessageOrNamesItsType() {
        assertEquals("Command not found: nope", LineRunner.message(new IllegalArgumentException("Command not found: nope"), "nope"));
        assertEquals("NullPointerException", LineRunner.message(new NullPointerException(), "x"));
    }
}
