package io.ferrum.memory.launcher;

import java.io.PrintStream;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.felix.service.command.CommandSession;
import org.apache.felix.service.command.Converter;

/**
 * Runs one line of the console in a Gogo session and prints what it answers: a value on the
 * output, formatted as Gogo formats it; a failure as one {@code error:} line on the error stream.
 * A failure is a command that throws (an unknown command, Gogo's own errors) or whose answer starts
 * with {@code error: } (how every {@code mem:*} command reports bad input). It counts failures, so a
 * script can exit non-zero. {@code exit} and {@code quit} (optionally with an exit code) end the
 * session without running anything.
 */
final class LineRunner {
    /** Gogo's answer to a call that fits none of a command's signatures. */
    private static final Pattern WRONG_CALL = Pattern.compile("Cannot coerce (\\S+)\\((.*)\\) to any of \\[(.*)\\]", Pattern.DOTALL);
    /** What a line asks of the session. */
    enum Next { CONTINUE, EXIT }

    private final CommandSession session;
    private final PrintStream out;
    private final PrintStream err;
    private int failures;
    private Integer exitCode;

    LineRunner(CommandSession session, PrintStream out, PrintStream err) {
        this.session = session;
        this.out = out;
        this.err = err;
    }

    /**
     * @param line one line as typed or piped; blank lines and {@code #} comments do nothing
     * @return whether the session goes on
     */
    Next run(String line) {
        String l = line.strip();
        if (l.isEmpty() || l.startsWith("#")) {
            return Next.CONTINUE;
        }
        String[] words = l.split("\\s+");
        String first = words[0].toLowerCase(Locale.ROOT);
        if (first.equals("exit") || first.equals("quit")) {
            return exit(words);
        }
        try {
            Object value = session.execute(l);
            if (value != null) {
                String text = String.valueOf(session.format(value, Converter.INSPECT));
                if (text.startsWith("error: ")) {
                    fail(text);
                } else if (!text.isEmpty()) {
                    out.println(text);
                }
            }
        } catch (Exception e) {
            fail("error: " + message(e, l));
        }
        out.flush();
        return Next.CONTINUE;
    }

    /**
     * @param line the line that failed
     * @return the failure in words: Gogo's "Cannot coerce f(Token) to any of [(Bundle[])]", which
     *         answers any call whose arguments fit none of the command's signatures, becomes which
     *         command was called wrongly, what it takes and where its help is
     */
    static String message(Exception e, String line) {
        String m = e.getMessage();
        if (m == null) {
            return e.getClass().getSimpleName();
        }
        Matcher wrong = WRONG_CALL.matcher(m);
        if (wrong.matches()) {
            String name = wrong.group(1);
            int space = line.indexOf(' ');
            String given = space < 0 ? "no arguments" : "'" + line.substring(space + 1).strip() + "'";
            return name + " cannot take " + given + "; it takes " + wrong.group(3).replace("[]", "...")
                    + "; see: help " + name;
        }
        return m;
    }

    private Next exit(String[] words) {
        if (words.length == 1) {
            return Next.EXIT;
        }
        try {
            int code = Integer.parseInt(words[1]);
            if (words.length == 2 && code >= 0 && code <= 255) {
                exitCode = code;
                return Next.EXIT;
            }
        } catch (NumberFormatException e) {
            // answered below
        }
        fail("error: Invalid exit code '" + String.join(" ", words).substring(words[0].length()).strip()
                + "': use exit or quit, optionally with a code 0-255");
        return Next.CONTINUE;
    }

    private void fail(String line) {
        failures++;
        out.flush();
        err.println(line);
        err.flush();
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
