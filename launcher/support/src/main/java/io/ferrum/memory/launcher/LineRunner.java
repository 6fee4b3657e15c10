package io.ferrum.memory.launcher;

import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;
import java.util.function.IntConsumer;
import java.util.stream.Collectors;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.felix.service.command.CommandSession;
import org.apache.felix.service.command.Converter;

/**
 * Runs the statements of the console in a Gogo session and prints what they answer: a value on the
 * output, formatted as Gogo formats it; a failure as one {@code error:} line on the error stream.
 * A failure is a command that throws (an unknown command, Gogo's own errors) or a {@code mem:*}
 * command that failed: those answer an {@code error:} line and also add it to the session variable
 * {@value #FAILURES} (the shell bundle's {@code Reply}), so a failure inside a pipeline or a
 * {@code &&} chain, whose value Gogo drops, still counts and is shown. It counts failures, so a
 * script can exit non-zero, and reports each one at once ({@code onFailure}), so the exit code is
 * right even when the framework is stopped under the session. {@code exit} and {@code quit}
 * (optionally with an exit code or a variable holding one) end the session without running anything.
 * An output that cannot be written (standard output closed, or a pipe whose reader left) is a failure
 * too, said once: a {@link PrintStream} only records that its writes failed, so the results would be
 * lost and the script still exit 0.
 */
final class LineRunner {
    /** What a statement asks of the session. */
    enum Next { CONTINUE, EXIT }

    /** The session variable where {@code mem:*} commands list their {@code error:} lines (shell bundle's contract). */
    static final String FAILURES = ".ferrum.failures";
    /** Gogo's answer to a call that fits none of a command's signatures. */
    private static final Pattern WRONG_CALL = Pattern.compile("Cannot coerce (\\S+)\\((.*)\\) to any of \\[(.*)\\]", Pattern.DOTALL);

    private final CommandSession session;
    private final PrintStream out;
    private final PrintStream err;
    private final IntConsumer onFailure;
    private final BooleanSupplier ending;
    private int failures;
    private Integer exitCode;
    /** Set once the output was found broken: said and counted once. */
    private boolean outputLost;
    /** Ctrl-C: the rest of the line being run is dropped. */
    private volatile boolean cancelled;

    /**
     * @param onFailure told the running failure count after each failure (the console keeps the
     *                  process's exit code up to date with it)
     * @param ending    true once the session is being ended under it (the framework or the console
     *                  stopping): a statement cut short then is not a failure, and none runs after;
     *                  asked again when a statement returns, since what it needed (a monitor, say) may
     *                  have stopped with the framework while it ran
     */
    LineRunner(CommandSession session, PrintStream out, PrintStream err, IntConsumer onFailure, BooleanSupplier ending) {
        this.session = session;
        this.out = out;
        this.err = err;
        this.onFailure = onFailure;
        this.ending = ending;
    }

    /**
     * @param line one line as typed or piped: its statements ({@link Statements}) run in order
     * @return whether the session goes on
     */
    Next runLine(String line) {
        for (String statement : Statements.split(line)) {
            if (cancelled) {
                break;
            }
            if (run(statement) == Next.EXIT) {
                return Next.EXIT;
            }
        }
        return Next.CONTINUE;
    }

    /**
     * A new line is about to be read: a {@link #cancel} from now on drops it. Called before the line
     * is read, not when it starts to run, so that a Ctrl-C landing between the two (the line
     * accepted, its first statement not started, no job yet to interrupt) still drops the line:
     * reset at the start of {@link #runLine}, it was forgotten, and a line of sixteen 3 GiB fills ran
     * whole under a loaded machine.
     */
    void beginLine() {
        cancelled = false;
    }

    /** Drops the statements of the current line that have not started (Ctrl-C at a terminal). */
    void cancel() {
        cancelled = true;
    }

    /**
     * @param statement one statement; blank ones and {@code #} comments do nothing
     * @return whether the session goes on
     */
    Next run(String statement) {
        String l = statement.strip();
        if (l.isEmpty() || l.startsWith("#")) {
            return Next.CONTINUE;
        }
        String[] words = l.split("\\s+");
        String first = words[0].toLowerCase(Locale.ROOT);
        if (first.equals("exit") || first.equals("quit")) {
            return exit(words);
        }
        if (ending.getAsBoolean()) {
            return Next.EXIT;
        }
        List<String> failed = new CopyOnWriteArrayList<>();
        session.put(FAILURES, failed);
        try {
            Object value = session.execute(l);
            if (ending.getAsBoolean()) {
                return Next.EXIT; // the session began to end under it: what failed was cut short
            }
            report(failed);
            if (value != null) {
                // The failures were shown on the error stream: a value made of them (a list of
                // results, say) is not shown again.
                String text = String.valueOf(session.format(value, Converter.INSPECT)).lines()
                        .filter(line -> !failed.contains(line)).collect(Collectors.joining(System.lineSeparator()));
                if (!text.isBlank()) {
                    out.println(text);
                }
            }
        } catch (Exception e) {
            if (ending.getAsBoolean()) {
                return Next.EXIT; // cut short by the session's end, not a failure of the statement
            }
            report(failed);
            fail("error: " + message(e, l));
        } catch (StackOverflowError e) {
            // Gogo's parser and evaluator recurse once per bracket, closure or nested call: a statement
            // nested deeper than the thread's stack lands here, its frames unwound, rather than ending
            // the console's thread (and with it every later statement, and the exit of a script).
            report(failed);
            fail("error: the statement is nested too deeply for the shell to read or run (a stack overflow); it was"
                    + " cut short");
        } finally {
            session.put(FAILURES, null);
        }
        out.flush();
        checkOutput();
        return Next.CONTINUE;
    }

    /**
     * Counts a failure, once, when a write to the output failed: the statement's answer, or what its
     * command printed there (the session writes to the same stream).
     */
    private void checkOutput() {
        if (!outputLost && out.checkError()) {
            outputLost = true;
            fail("error: the output could not be written (standard output closed, or a broken pipe): results are lost");
        }
    }

    private void report(List<String> failed) {
        for (String line : failed) {
            fail(line);
        }
    }

    /**
     * @param line the statement that failed
     * @return the failure in words: Gogo's "Cannot coerce f(Token) to any of [(Bundle[])]", which
     *         answers any call whose arguments fit none of the command's signatures, becomes which
     *         command was called wrongly, what it takes and where its help is
     */
    static String message(Exception e, String line) {
        if (e instanceof InterruptedException) {
            return "interrupted";
        }
        // A command's own failure reaches here wrapped by Gogo's reflective call: its cause says why.
        Throwable why = e;
        while ((why instanceof InvocationTargetException || why.getMessage() == null) && why.getCause() != null) {
            why = why.getCause();
        }
        String m = why.getMessage();
        if (m == null) {
            return why.getClass().getSimpleName();
        }
        if (why instanceof Error) {
            // Its message alone does not say what happened: a NoClassDefFoundError's is a class name,
            // an OutOfMemoryError's a limit. (A mem:* command answers its own Errors, in more words.)
            return why.getClass().getSimpleName() + ": " + m.replaceAll("\\s*\\R\\s*", " ");
        }
        Matcher wrong = WRONG_CALL.matcher(m);
        if (wrong.matches()) {
            String name = wrong.group(1);
            Matcher call = Pattern.compile("(?:^|\\s)(?:\\S+:)?" + Pattern.quote(name) + "(?=\\s|$)").matcher(line);
            String after = call.find() ? line.substring(call.end()).strip() : "";
            String given = after.isEmpty() ? "no arguments" : "'" + after + "'";
            return name + " cannot take " + given + "; it takes " + wrong.group(3).replace("[]", "...")
                    + "; see: help " + name;
        }
        return m.replaceAll("\\s*\\R\\s*", " ");
    }

    private Next exit(String[] words) {
        if (words.length == 1) {
            return Next.EXIT;
        }
        String arg = words[1];
        if (arg.startsWith("$") && session.get(arg.substring(1)) != null) {
            arg = String.valueOf(session.get(arg.substring(1)));
        }
        // ASCII digits only: Integer.parseInt also takes a sign (+3, -0) and other scripts' digits,
        // which no number of the shell takes.
        if (words.length == 2 && arg.matches("[0-9]{1,18}") && Long.parseLong(arg) <= 255) {
            exitCode = Integer.parseInt(arg);
            return Next.EXIT;
        }
        String given = String.join(" ", words).substring(words[0].length()).strip();
        fail("error: Invalid exit code '" + given + "': use exit or quit, optionally with a code 0-255");
        return Next.CONTINUE;
    }

    /**
     * Counts a failure and shows it, each control character (C0, DEL, C1), format character (bidi
     * overrides) and line or paragraph separator as a Java escape ({@code \u001b}): Gogo's own failures
     * name what the line held ({@code Command not found: ...}), and a raw ESC sequence from a script
     * reached the terminal. A letter outside ASCII stays (a file name may hold one).
     *
     * @param line its {@code error:} line: one of a statement, or of a line that could not be read
     */
    void fail(String line) {
        failures++;
        out.flush();
        err.println(ControlCharacters.escaped(line));
        err.flush();
        onFailure.accept(failures);
    }

    /**
     * @param failuresCount true for a script (piped or {@code -c}), where a failed command makes the
     *                      whole run fail; false for a person at a terminal, who saw each error
     * @return the code the process should exit with: the one given to exit, else 1 after a counted
     *         failure, else 0
     */
    int exitCode(boolean failuresCount) {
        return exitCode != null ? exitCode : failuresCount && failures > 0 ? 1 : 0;
    }
}
