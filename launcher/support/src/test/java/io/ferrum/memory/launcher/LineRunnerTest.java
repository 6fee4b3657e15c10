package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.felix.service.command.CommandSession;
import org.junit.jupiter.api.Test;

/** The console's words for a failed line, Ctrl-C's drop of a line, and a line the framework's stop cut short. */
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

    /**
     * Gogo's own failures name what the line held ({@code Command not found: ...}), and a command's
     * failure line is shown as it came: a control character in either (a raw ESC from a script)
     * reached the terminal, which took the sequence. The error line now shows it as a Java escape.
     */
    @Test
    void anErrorLineShowsControlCharactersEscaped() {
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        LineRunner runner = new LineRunner(recording(new ArrayList<>()), new PrintStream(new ByteArrayOutputStream()),
                new PrintStream(err, true), n -> { }, () -> false);
        runner.fail("error: Command not found: x\u001b[31m\u202eok\u00e9\u0085");
        assertEquals("error: Command not found: x\\u001b[31m\\u202eok\u00e9\\u0085" + System.lineSeparator(), err.toString());
    }

    /** A command that throws reaches the console wrapped by Gogo's reflective call; the line said "InvocationTargetException". */
    @Test
    void aFailureWrappedByTheReflectiveCallSaysWhyNotTheWrapper() {
        Exception wrapped = new java.lang.reflect.InvocationTargetException(
                new org.osgi.framework.BundleException("Unable to read the update location"));
        assertEquals("Unable to read the update location", LineRunner.message(wrapped, "update 6"));
        assertEquals("NullPointerException", LineRunner.message(
                new java.lang.reflect.InvocationTargetException(new NullPointerException()), "x"));
    }

    /**
     * {@code exit N} takes the digits 0-9 and no sign, as every number of the shell does (docs/SHELL.md:
     * "No number takes a sign"): Integer.parseInt also took {@code +3} and other scripts' digits
     * ({@code ٣}, {@code ０}), and the script ended with a code nothing in it wrote.
     */
    @Test
    void anExitCodeWithASignOrOtherDigitsIsRefusedNamingIt() {
        for (String code : List.of("+3", "\u0663", "\uff10", "-0")) {
            ByteArrayOutputStream err = new ByteArrayOutputStream();
            PrintStream sink = new PrintStream(new ByteArrayOutputStream());
            LineRunner runner = new LineRunner(recording(new ArrayList<>()), sink, new PrintStream(err, true), failures -> { },
                    () -> false);
            assertEquals(LineRunner.Next.CONTINUE, runner.runLine("exit " + code), "exit " + code + " ended the script");
            assertEquals("error: Invalid exit code '" + code + "': use exit or quit, optionally with a code 0-255",
                    err.toString().strip());
            assertEquals(1, runner.exitCode(true));
        }
        PrintStream sink = new PrintStream(new ByteArrayOutputStream());
        LineRunner runner = new LineRunner(recording(new ArrayList<>()), sink, sink, failures -> { }, () -> false);
        assertEquals(LineRunner.Next.EXIT, runner.runLine("exit 007"));
        assertEquals(7, runner.exitCode(true));
    }

    /**
     * A statement nested deeper than Gogo's recursive parser can follow (here 100,000 brackets) threw
     * a StackOverflowError, which is no Exception: it went past the runner and ended the console's
     * thread, its stack trace on standard error, and a {@code -c} script or piped session never
     * exited (the framework ran on without a console). It is now one failed statement, and the
     * session goes on. Run on a thread with a small stack, as the console's is, so that it overflows
     * at a known depth.
     */
    @Test
    void aStatementThatOverflowsTheParsersStackIsOneFailureAndTheSessionGoesOn() throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        org.apache.felix.gogo.runtime.threadio.ThreadIOImpl io = new org.apache.felix.gogo.runtime.threadio.ThreadIOImpl();
        io.start();
        try {
            org.apache.felix.gogo.runtime.CommandProcessorImpl processor = new org.apache.felix.gogo.runtime.CommandProcessorImpl(io);
            CommandSession session = processor.createSession(new java.io.ByteArrayInputStream(new byte[0]),
                    new PrintStream(out, true), new PrintStream(err, true));
            LineRunner runner = new LineRunner(session, new PrintStream(out, true), new PrintStream(err, true), failures -> { },
                    () -> false);
            List<Object> result = new ArrayList<>();
            Thread console = new Thread(null, () -> {
                try {
                    result.add(runner.runLine("x = " + "[".repeat(100_000) + "]".repeat(100_000)));
                    result.add(runner.runLine("y = 42"));
                } catch (Throwable t) {
                    result.add(t);
                }
            }, "small-stack console", 512 * 1024);
            console.start();
            console.join();
            assertEquals(List.of(LineRunner.Next.CONTINUE, LineRunner.Next.CONTINUE), result, "the runner and its thread went on");
            assertEquals("error: the statement is nested too deeply for the shell to read or run (a stack overflow); it"
                    + " was cut short", err.toString().strip());
            assertEquals("42", out.toString().strip(), "the next statement ran");
            assertEquals(1, runner.exitCode(true));
        } finally {
            io.stop();
        }
    }

    /**
     * An Error out of a statement (here the JDK's refusal of a String too long for an array, which
     * Gogo's reflective call wraps) was shown by its message alone, {@code error: Requested array size
     * exceeds VM limit}, which does not say that it was an OutOfMemoryError (a NoClassDefFoundError's
     * message is a class name alone). The line now names its type; the session goes on.
     */
    @Test
    void anErrorOfAStatementIsShownWithItsType() throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        org.apache.felix.gogo.runtime.threadio.ThreadIOImpl io = new org.apache.felix.gogo.runtime.threadio.ThreadIOImpl();
        io.start();
        try {
            org.apache.felix.gogo.runtime.CommandProcessorImpl processor = new org.apache.felix.gogo.runtime.CommandProcessorImpl(io);
            CommandSession session = processor.createSession(new java.io.ByteArrayInputStream(new byte[0]),
                    new PrintStream(out, true), new PrintStream(err, true));
            LineRunner runner = new LineRunner(session, new PrintStream(out, true), new PrintStream(err, true), failures -> { },
                    () -> false);
            assertEquals(LineRunner.Next.CONTINUE, runner.runLine("x = (\"x\" repeat 2147483647); y = 42"));
            assertEquals("error: OutOfMemoryError: Requested array size exceeds VM limit", err.toString().strip());
            assertEquals("42", out.toString().strip(), "the next statement ran");
        } finally {
            io.stop();
        }
    }

    /** @return a session that records the statements it is asked to run and answers nothing */
    private static CommandSession recording(List<String> ran) {
        return (CommandSession) Proxy.newProxyInstance(CommandSession.class.getClassLoader(),
                new Class<?>[] {CommandSession.class}, (proxy, method, args) -> {
                    if (method.getName().equals("execute")) {
                        ran.add(String.valueOf(args[0]));
                    }
                    return null;
                });
    }

    /**
     * Ctrl-C after the line was read and before its first statement started (no job to interrupt
     * yet) must still drop the line. The flag was reset when the line started to run, so that
     * Ctrl-C was forgotten and every statement ran (seen in ConsoleIT on a loaded machine: sixteen
     * 3 GiB fills after a Ctrl-C).
     */
    @Test
    void ctrlCBetweenReadingALineAndRunningItDropsTheLine() {
        List<String> ran = new ArrayList<>();
        PrintStream sink = new PrintStream(new ByteArrayOutputStream());
        LineRunner runner = new LineRunner(recording(ran), sink, sink, failures -> { }, () -> false);
        runner.beginLine();
        runner.cancel(); // the line was accepted; its first statement has not started
        runner.runLine("mem:fill $h 1; mem:fill $h 1");
        assertEquals(List.of(), ran, "statements ran after Ctrl-C");
        runner.beginLine(); // the next line is read: Ctrl-C no longer stands
        runner.runLine("mem:devices; mem:handles");
        assertEquals(List.of("mem:devices", "mem:handles"), ran);
    }

    /**
     * {@code stop 0; mem:devices}: the framework stops the monitor before it deactivates the console,
     * so a statement that runs in between answers "No memory monitor is running". Cut short by the
     * session's end, it is no failure, and the script still exits 0; it was counted (ConsoleIT
     * failed so on a loaded machine, exit code 1). Here the framework begins to stop while the
     * statement runs, and the statement answers that failure.
     */
    @Test
    void aFailureAnsweredAfterTheFrameworkBeganToStopIsNotCounted() {
        List<String> ran = new ArrayList<>();
        Map<String, Object> variables = new HashMap<>();
        AtomicBoolean frameworkStopping = new AtomicBoolean();
        CommandSession session = (CommandSession) Proxy.newProxyInstance(CommandSession.class.getClassLoader(),
                new Class<?>[] {CommandSession.class}, (proxy, method, args) -> {
                    switch (method.getName()) {
                        case "put" -> variables.put((String) args[0], args[1]);
                        case "get" -> {
                            return variables.get((String) args[0]);
                        }
                        case "execute" -> {
                            ran.add(String.valueOf(args[0]));
                            frameworkStopping.set(true); // the stop takes the monitor under it
                            @SuppressWarnings("unchecked")
                            List<String> failed = (List<String>) variables.get(LineRunner.FAILURES);
                            failed.add("error: No memory monitor is running: start the bundle io.ferrum.memory.monitor");
                        }
                        default -> { }
                    }
                    return null;
                });
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PrintStream sink = new PrintStream(new ByteArrayOutputStream());
        List<Integer> told = new ArrayList<>();
        LineRunner runner = new LineRunner(session, sink, new PrintStream(err), told::add, frameworkStopping::get);
        runner.runLine("mem:devices; mem:handles");
        assertEquals(List.of("mem:devices"), ran, "a statement ran after the framework began to stop");
        assertEquals(List.of(), told, "a failure was counted: " + err);
        assertEquals(0, runner.exitCode(true), err.toString());
    }
}
