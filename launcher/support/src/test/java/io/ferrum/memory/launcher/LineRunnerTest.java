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
        assertEquals("uninstall cannot take '9999'; it takes (Bundle...); see: help uninstall", LineRunner.message(
                new IllegalArgumentException("Cannot coerce uninstall(Token) to any of [(Bundle[])]"), "b = uninstall 9999"));
        assertEquals("uninstall cannot take '7'; it takes (Bundle...); see: help uninstall", LineRunner.message(
                new IllegalArgumentException("Cannot coerce uninstall(Token) to any of [(Bundle[])]"), "felix:uninstall 7"));
    }

    @Test
    void anyOtherFailureKeepsItsMessageOrNamesItsType() {
        assertEquals("Command not found: nope", LineRunner.message(new IllegalArgumentException("Command not found: nope"), "nope"));
        assertEquals("NullPointerException", LineRunner.message(new NullPointerException(), "x"));
        assertEquals("interrupted", LineRunner.message(new InterruptedException(), "mem:fill $h 1"));
        assertEquals("a b", LineRunner.message(new IllegalStateException("a\n  b"), "x"), "one line");
    }
}
