package io.ferrum.memory.shell;

import java.util.List;
import java.util.concurrent.CompletionException;

import org.apache.felix.service.command.CommandSession;
import org.apache.felix.service.command.Job;

/**
 * What a command answers. Commands print nothing: Gogo prints the returned value with {@code
 * CommandSession.format(value, Converter.INSPECT)}, which for an object without {@code get*}
 * methods is its {@code toString()}, followed by a new line (so no reply ends with one). A test
 * reads the same value without capturing any output.
 *
 * <p>This type owns the {@code error:} line: {@link #attempt} turns any exception of a command
 * into one {@link Failure}, never a stack trace, and the shell goes on; the advice in an API
 * message is put in the shell's words ({@link ShellWording}). An {@link Error} of a command (a class
 * gone with an uninstalled bundle, memory or stack exhausted) is no refusal of its input: its line
 * says that it is an internal error, of which command, and its type, and its stack trace goes to
 * the log ({@link ShellLog}) once.
 */
sealed interface Reply permits Table, Reply.Text, Reply.Failure {

    /** A command's body; it may throw whatever its services throw. */
    @FunctionalInterface
    interface Body {
        Reply run() throws Exception;
    }

    /**
     * Runs a command's body.
     *
     * @param command the command's Gogo function, as its method is named ({@code copy} for {@code
     *                mem:copy}), for the line of an internal error: given, not read off the stack,
     *                which a JVM may keep no frames of ({@code -XX:-StackTraceInThrowable})
     * @param body    the command
     * @return what the body answered, or a {@link Failure} with the message of what it threw
     */
    static Reply attempt(String command, Body body) {
        Failure failed;
        try {
            return body.run();
        } catch (CompletionException e) {
            // An asynchronous call's failure (a defragmentation's): an Error there is one as well.
            failed = e.getCause() instanceof Error inside ? internal(command, inside)
                    : Failure.of(e.getCause() != null ? e.getCause() : e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            failed = Failure.of(e);
        } catch (Exception e) {
            failed = Failure.of(e);
        } catch (Error e) {
            failed = internal(command, e);
        }
        recordInSession(failed);
        return failed;
    }

    /**
     * A NoClassDefFoundError's message is a class name alone, a StackOverflowError has none: shown as
     * an API message is, the line would not say what happened.
     */
    private static Failure internal(String command, Error e) {
        ShellLog.error("mem:" + command + " failed with an internal error", e);
        return new Failure("internal error in mem:" + command + ": " + e.getClass().getSimpleName()
                + (e.getMessage() != null ? ": " + e.getMessage() : "") + "; see the log");
    }

    /**
     * The Gogo session variable listing the {@code error:} lines of this session's failed commands,
     * in order: a console reads it after each line it runs, so that a failure inside a pipeline or a
     * {@code &&} chain, whose value Gogo drops, still counts and is shown.
     */
    String FAILURES = ".ferrum.failures";

    /**
     * Appends {@code failed} to {@link #FAILURES} of the Gogo session running this command, when a
     * console listens there (it puts a list before each statement and takes it away after); a
     * failure after that (a job left in the background with {@code &}) is not followed.
     */
    @SuppressWarnings("unchecked")
    private static void recordInSession(Failure failed) {
        Job job = Job.Utils.current();
        CommandSession session = job == null ? null : job.session();
        if (session != null && session.get(FAILURES) instanceof List<?> list) {
            ((List<String>) list).add(failed.toString());
        }
    }

    /**
     * @param lines the lines of the reply, without line ends
     * @return the lines as one reply
     */
    static Text lines(List<String> lines) {
        return new Text(String.join(System.lineSeparator(), lines));
    }

    /**
     * @param line one line, without its end
     * @return the line as a reply
     */
    static Text line(String line) {
        return new Text(line);
    }

    /** Plain text: one or more lines, the last without a line end. */
    record Text(String text) implements Reply {
        @Override
        public String toString() {
            return text;
        }
    }

    /** A command that failed: printed as {@code error: <message>}, one line. */
    record Failure(String message) implements Reply {
        static Failure of(Throwable e) {
            return new Failure(e.getMessage() != null ? ShellWording.of(e.getMessage()) : e.getClass().getSimpleName());
        }

        /**
         * A failure of one part of a command that goes on with the others (one device of several):
         * its line goes among the command's other lines, and it counts as a failure of the session
         * as a failed command does.
         */
        static Failure counted(String message) {
            Failure f = new Failure(message);
            recordInSession(f);
            return f;
        }

        /**
         * One line whatever the message holds (an argument may be a whole table), and no character a
         * terminal takes as an instruction: a control or format character of a bad value (an ESC
         * sequence, a right-to-left override) is shown as a Java escape ({@code \u001b}).
         */
        @Override
        public String toString() {
            return "error: " + escapeControls(message.replaceAll("\\s*\\R\\s*", " "));
        }

        /**
         * @return {@code text} with each control character (C0, DEL, C1), format character (bidi
         *         overrides, zero widths) and line or paragraph separator as {@code \}{@code uXXXX};
         *         a letter outside ASCII stays (a file name may hold one)
         */
        static String escapeControls(String text) {
            StringBuilder shown = new StringBuilder(text.length());
            for (int i = 0; i < text.length(); i++) {
                char c = text.charAt(i);
                switch (Character.getType(c)) {
                    case Character.CONTROL, Character.FORMAT, Character.LINE_SEPARATOR, Character.PARAGRAPH_SEPARATOR ->
                            shown.append(String.format("\\u%04x", (int) c));
                    default -> shown.append(c);
                }
            }
            return shown.toString();
        }
    }
}
