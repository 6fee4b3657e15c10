package io.ferrum.memory.launcher;

import java.io.ByteArrayInputStream;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.nio.charset.Charset;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.felix.service.command.CommandProcessor;
import org.apache.felix.service.command.CommandSession;
import org.apache.felix.service.command.Job;
import org.jline.reader.EndOfFileException;
import org.jline.reader.LineReader;
import org.jline.reader.LineReaderBuilder;
import org.jline.reader.UserInterruptException;
import org.jline.terminal.Terminal;
import org.jline.terminal.TerminalBuilder;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.BundleException;
import org.osgi.framework.Constants;
import org.osgi.framework.FrameworkEvent;
import org.osgi.framework.FrameworkListener;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;

/**
 * The distribution's console, in place of Gogo's own shell. Once the framework has started (so that
 * every command exists) it reads commands in one of three ways, then stops the framework with an
 * exit code ({@link SessionExit}):
 * <ul>
 * <li>{@code -c} ({@value #COMMAND_PROPERTY} set by the jar's Main): the statements of the script;
 * <li>a terminal (standard input and output both are one): JLine line editing, history kept in
 * {@code ~/.ferrum/history} across runs (or {@value #HISTORY_PROPERTY}), Tab completion
 * ({@link ShellCompleter}); Ctrl-C drops the line, {@code exit}, {@code quit} or Ctrl-D leave;
 * <li>anything else (a pipe, a file): the lines of standard input, with no prompt and no banner.
 * </ul>
 * A script prints each answer on standard output and each error on standard error, and exits 1 if
 * any command failed ({@link LineRunner}).
 */
@Component(immediate = true, service = {})
public final class Console {
    /** The script of {@code java -jar ferrum-memory.jar -c '...'}, set by the jar's Main. */
    static final String COMMAND_PROPERTY = "ferrum.command";
    /** Where the terminal history is kept, if not {@code ~/.ferrum/history}. */
    static final String HISTORY_PROPERTY = "ferrum.history";
    /** Set in the JVM once a script's console has started: a console started again must not rerun it. */
    static final String STARTED_PROPERTY = "ferrum.console.started";
    /** Set in the JVM once a console has begun: only the first, at the framework's launch, waits for the launcher. */
    private static final String LAUNCHED_PROPERTY = "ferrum.console.launched";
    /** Set in the JVM once a script was said to end early: the stop and the restart both may see it. */
    private static final String CUT_SHORT_PROPERTY = "ferrum.console.cutShort";
    /**
     * JLine's logger, held here: java.util.logging keeps loggers weakly, so a level set on one that
     * nothing holds can be lost with it.
     */
    private static final java.util.logging.Logger JLINE_LOG = java.util.logging.Logger.getLogger("org.jline");
    /** This bundle's symbolic name, as the user types it. */
    private static final String BUNDLE = "io.ferrum.memory.launcher";
    /** The prompt at a terminal. */
    static final String PROMPT = "g! ";
    /** How long a stop waits for the launcher to take {@link SessionExit} (it never does outside the bnd launcher). */
    private static final long LAUNCHER_WAIT_SECONDS = 30;
    /**
     * The process's own standard streams. {@code System.out} here is Gogo's per-thread stream: given
     * to a session, a command's thread that writes to {@code System.out} (Felix's logger does, when
     * {@code update} fails) writes into its own pipe, which writes to the session's stream, which is
     * that pipe again, until the stack overflows.
     */
    private static final PrintStream STDOUT = standard(FileDescriptor.out, "stdout.encoding");
    private static final PrintStream STDERR = standard(FileDescriptor.err, "stderr.encoding");
    /**
     * What the console's thread needs, once a statement typed at it that uninstalled this bundle
     * returned, and not before: it goes on with that statement's end, but this bundle's loader
     * defines no class any more ("the bundle wiring for io.ferrum.memory.launcher is no longer
     * valid"), and a {@code NoClassDefFoundError} ended the thread before it closed its session.
     * Loaded and initialized with this class.
     */
    static final List<Object> LOADED_EARLY = List.of(LineRunner.Next.values());

    private final BundleContext context;
    private final CommandProcessor processor;
    /** Reads and runs the statements; package-visible so that a test can see whether it was interrupted. */
    final Thread thread;
    private final CountDownLatch started = new CountDownLatch(1);
    private final FrameworkListener startedListener = e -> {
        if (e.getType() == FrameworkEvent.STARTED) {
            started.countDown();
        }
    };
    /**
     * The terminal being read, until it is closed: once, by the deactivation or by the console as it
     * leaves, whichever comes first. Each close of a JLine terminal restores what it found when it
     * opened (cooked mode, the signal handlers before its own): closed again once a console started
     * since (an update of this bundle) had opened the terminal, it undid that console's raw mode.
     */
    private final AtomicReference<Terminal> terminal = new AtomicReference<>();
    /** The session whose statements this console runs, once made. */
    private volatile CommandSession session;
    /** Set when the component deactivates: the loops end at their next statement. */
    private volatile boolean stopping;
    /** The system bundle: STOPPING as soon as the framework begins to stop, before any bundle stops. */
    private final Bundle system;
    /** This console's bundle: its state says, once a statement that stopped it returned, whether it runs again. */
    private final Bundle own;

    @Activate
    public Console(BundleContext context, @Reference CommandProcessor processor) {
        this.context = context;
        this.processor = processor;
        this.system = context.getBundle(Constants.SYSTEM_BUNDLE_ID);
        this.own = context.getBundle();
        context.addFrameworkListener(startedListener);
        this.thread = new Thread(this::session, "ferrum console");
        thread.setDaemon(true);
        thread.start();
    }

    @Deactivate
    void deactivate() throws IOException {
        context.removeFrameworkListener(startedListener);
        stopping = true;
        if (!calledByOwnStatement()) {
            thread.interrupt();
        }
        closeTerminal();
    }

    private void closeTerminal() throws IOException {
        Terminal t = terminal.getAndSet(null);
        if (t != null) {
            t.close();
        }
    }

    /**
     * @return true when the calling thread runs a statement of this console's session ({@code update
     *         io.ferrum.memory.launcher}, {@code stop}, {@code uninstall}; a {@code refresh} restarts this
     *         bundle on the framework's own thread): the console's thread then waits for that statement,
     *         and sees {@link #stopping} when it returns.
     *         Interrupted, it left the statement and closed the session, and that close interrupted the
     *         statement's thread while it still stopped and started this bundle: SCR's wait for the
     *         old components' destruction was cut short ("The wait for ... being destroyed before
     *         destruction has been interrupted"), and the restart went on interrupted.
     */
    private boolean calledByOwnStatement() {
        Job statement = Job.Utils.current();
        CommandSession s = session;
        return statement != null && s != null && statement.session() == s;
    }

    private void session() {
        try {
            awaitFrameworkStarted();
            awaitLauncher();
            String script = context.getProperty(COMMAND_PROPERTY);
            java.io.Console c = System.console();
            boolean atTerminal = script == null && c != null && c.isTerminal();
            if (!atTerminal && System.getProperties().putIfAbsent(STARTED_PROPERTY, "true") != null) {
                // This bundle was refreshed or restarted under a script: the script's place is lost
                // (statements before it ran), so the run ends here rather than running any twice.
                sayScriptCutShort();
                SessionExit.outcome(1);
                stopFramework();
                return;
            }
            if (!atTerminal) {
                SessionExit.scripted();
            }
            int code;
            if (script != null) {
                code = script(script);
            } else if (atTerminal) {
                code = terminal();
            } else {
                code = piped();
            }
            if (stopping) {
                if (atTerminal) {
                    sayNoConsoleLeft();
                }
                return; // the framework or this bundle is stopping: the outcome is already set
            }
            SessionExit.outcome(code);
        } catch (InterruptedException e) {
            return; // the bundle stops: the framework goes on without a console
        } catch (IOException | RuntimeException e) {
            System.err.println("error: the console failed: " + e);
            SessionExit.outcome(1);
        }
        stopFramework();
    }

    /**
     * At a terminal, says how to leave once a statement typed here stopped or uninstalled this bundle
     * and the framework runs on (the console waited for that statement): nothing reads the terminal
     * any more, and typed lines only echo. Felix's own {@code gogo.jline} shell leaves the framework
     * running when its bundle stops too; the distribution may serve through other bundles of
     * {@code plugins/}, so the process is not ended. After an update the bundle runs again, with a
     * console. On the process's standard error: the terminal is closed. A constant, as this bundle
     * may be uninstalled: its loader may define no class any more.
     */
    private void sayNoConsoleLeft() {
        if ((own.getState() & (Bundle.ACTIVE | Bundle.STARTING)) == 0 && system.getState() == Bundle.ACTIVE) {
            STDERR.println("ferrum: the console stopped with its bundle (" + BUNDLE + "); the framework runs on,"
                    + " but nothing reads what is typed here: press Ctrl-C to end the process");
        }
    }

    /**
     * Says, once per run, that the script ends early because this bundle stopped under it. On the
     * process's own standard error: the thread that stops or restarts the bundle is often a command's,
     * whose {@code System.err} is that command's pipe, gone with it.
     */
    static void sayScriptCutShort() {
        if (System.getProperties().putIfAbsent(CUT_SHORT_PROPERTY, "true") == null) {
            STDERR.println("error: the console's bundle was stopped, updated or refreshed; the script ends here");
        }
    }

    /**
     * Says {@code line} on the process's own standard error, after what the console wrote to its standard output: the
     * line that ends a run whose framework did not stop ({@link SessionExit}), said on the launcher's main thread.
     */
    static void sayOnStandardError(String line) {
        STDOUT.flush();
        STDERR.println(line);
        STDERR.flush();
    }

    /** @return the process's own standard error, for a line said before any console runs */
    static PrintStream standardError() {
        return STDERR;
    }

    /**
     * @return true once this component deactivates or the framework begins to stop: the framework
     *         stops bundles (the monitor, say) before it deactivates this one, and a statement that
     *         lost one of them in between was cut short, not failed
     */
    private boolean ending() {
        return stopping || system.getState() == Bundle.STOPPING;
    }

    /**
     * A script's runner: each failure sets the process's exit code at once. It writes to the streams
     * its session writes to, so that a write of either that fails is seen on the one stream it checks.
     */
    private LineRunner scriptRunner(CommandSession s) {
        return new LineRunner(s, STDOUT, STDERR, failures -> SessionExit.outcome(1), this::ending);
    }

    private int script(String script) {
        try (CommandSession s = quietSession()) {
            session = s;
            LineRunner runner = scriptRunner(s);
            runner.runLine(withoutByteOrderMark(script)); // its statements, new lines included, as one piped line's
            return runner.exitCode(true);
        }
    }

    private int piped() throws IOException {
        if (standardInputClosed()) {
            STDERR.println("error: standard input is closed (<&-): no commands to read; give them on standard input"
                    + " (a pipe, < file) or with -c");
            return 1;
        }
        try (CommandSession s = quietSession()) {
            session = s;
            LineRunner runner = scriptRunner(s);
            // Standard input's own encoding, as its output is written in stdout.encoding: the default
            // charset (UTF-8 since Java 18, or what file.encoding says) need not be the one of the
            // bytes piped in (a Latin-1 locale's, or UTF-8 under LC_ALL=C with -Dstdin.encoding=UTF-8).
            InputLines in = new InputLines(System.in, encoding("stdin.encoding"));
            while (!stopping) {
                String line;
                try {
                    line = in.next();
                } catch (InputLines.Malformed e) {
                    runner.fail("error: " + e.getMessage());
                    continue;
                }
                if (line == null || runner.runLine(line) == LineRunner.Next.EXIT) { // InputLines drops a byte order mark
                    break;
                }
            }
            return runner.exitCode(true);
        }
    }

    /**
     * @return true when the process was started with standard input closed ({@code <&-}): the JVM
     *         then opened its own runtime image ({@code lib/modules}) as file descriptor 0, and the
     *         console read that image as commands, millions of error lines and whatever statement
     *         its bytes happened to spell, for minutes; false where {@code /dev/fd} is missing
     */
    private static boolean standardInputClosed() {
        try {
            return Files.isSameFile(Path.of("/dev/fd/0"), Path.of(System.getProperty("java.home"), "lib", "modules"));
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    /**
     * @param start the script of {@code -c} (a piped script's mark is dropped by {@link InputLines})
     * @return it without the byte order mark (U+FEFF) a Windows editor puts at the start of a file
     *         saved as "UTF-8 with BOM" ({@code < script.txt}, {@code -c "$(cat script.txt)"}): a
     *         mark of the file's encoding, not a character of its first command, which failed with
     *         "Command not found" before a name that looked right
     */
    private static String withoutByteOrderMark(String start) {
        return start.startsWith("\ufeff") ? start.substring(1) : start;
    }

    /** A session whose commands read no input: standard input belongs to the script. */
    private CommandSession quietSession() {
        return quietSession(processor, STDOUT, STDERR);
    }

    /**
     * @param out the process's standard output, which the session writes to
     * @param err its standard error
     * @return a session whose commands read no input ({@link #session})
     */
    static CommandSession quietSession(CommandProcessor processor, PrintStream out, PrintStream err) {
        return session(processor, new ByteArrayInputStream(new byte[0]), out, err);
    }

    /**
     * @param out the stream the session's standard output goes to (the process's, or the terminal's)
     * @param err the one its standard error goes to; may be {@code out}
     * @return a session that never closes {@code out} or {@code err} ({@link KeptOpen}): they are the
     *         console's for as long as the process runs; and whose output still arrives after a
     *         statement was interrupted while it wrote ({@link SessionChannels})
     */
    static CommandSession session(CommandProcessor processor, InputStream in, PrintStream out, PrintStream err) {
        CommandSession s = processor.createSession(in, keptOpen(out), keptOpen(err));
        SessionChannels.keepOpen(s, out, err);
        return s;
    }

    /** @return a stream that writes to {@code s}, in its encoding, and whose close only flushes it */
    private static PrintStream keptOpen(PrintStream s) {
        return new PrintStream(new KeptOpen(s), true, s.charset());
    }

    private int terminal() throws IOException {
        ClassLoader previous = Thread.currentThread().getContextClassLoader();
        // JLine finds its terminal providers through the context class loader: its own bundle's.
        Thread.currentThread().setContextClassLoader(TerminalBuilder.class.getClassLoader());
        // JLine reports its own troubles (a history it cannot read or write) as multi-line warnings
        // with stack traces: the console says what matters in one line instead.
        JLINE_LOG.setLevel(java.util.logging.Level.OFF);
        try {
            Terminal t = TerminalBuilder.builder().name("ferrum").system(true).build();
            terminal.set(t);
            PrintStream out = new PrintStream(t.output(), true, t.encoding());
            try (CommandSession s = session(processor, t.input(), out, out)) {
                session = s;
                LineRunner runner = new LineRunner(s, out, out, failures -> { }, this::ending);
                // Ctrl-C while a command runs interrupts that command's job and drops the rest of
                // its line, not the JVM (JLine's default handler would end the process, and every
                // live block with it).
                t.handle(Terminal.Signal.INT, signal -> {
                    runner.cancel();
                    Job job = s.foregroundJob();
                    if (job != null) {
                        job.interrupt();
                    }
                });
                LineReaderBuilder builder = LineReaderBuilder.builder().terminal(t).appName("ferrum")
                        .completer(new ShellCompleter(context, s))
                        .option(LineReader.Option.DISABLE_EVENT_EXPANSION, true)
                        .option(LineReader.Option.HISTORY_TIMESTAMPED, false);
                Path history = historyFile(out);
                if (history != null) {
                    builder.variable(LineReader.HISTORY_FILE, history);
                }
                LineReader reader = builder.build();
                out.println("Ferrum Memory: 'help' lists the commands, Tab completes, 'exit' or Ctrl-D quits.");
                while (!stopping) {
                    String line;
                    runner.beginLine();
                    try {
                        line = reader.readLine(PROMPT);
                    } catch (UserInterruptException e) {
                        continue; // Ctrl-C: the line is dropped
                    } catch (EndOfFileException e) {
                        break; // Ctrl-D
                    }
                    if (Thread.interrupted()) {
                        // Ctrl-C as the line was accepted: JLine's own handler, still in place, only
                        // interrupted this thread. The line is dropped, as a Ctrl-C a moment earlier.
                        continue;
                    }
                    int replaced = line.indexOf('\ufffd');
                    if (replaced >= 0) {
                        // JLine puts U+FFFD in place of bytes not valid in the terminal's encoding (a
                        // Latin-1 terminal under a UTF-8 locale), and cannot say whether it did: the
                        // line would run with that character as data, as a piped line is not.
                        runner.fail("error: the line holds U+FFFD at character " + (line.codePointCount(0, replaced) + 1)
                                + ", which stands for bytes not valid in the terminal's encoding (" + t.encoding().name()
                                + "); it was not run. Set the terminal to " + t.encoding().name()
                                + ", or give such bytes in hex (mem:write HANDLE OFFSET e9)");
                        continue;
                    }
                    if (runner.runLine(line) == LineRunner.Next.EXIT) {
                        break;
                    }
                }
                if (history != null) {
                    try {
                        reader.getHistory().save();
                    } catch (IOException | RuntimeException e) {
                        out.println("ferrum: the history could not be saved to " + history + ": " + e.getMessage());
                    }
                }
                return runner.exitCode(false);
            }
        } finally {
            closeTerminal();
            Thread.currentThread().setContextClassLoader(previous);
        }
    }

    /**
     * @param out where to say, in one line, why there is no history
     * @return the history file, its folder made; null (no history kept) when it cannot be a writable
     *         file there
     */
    private Path historyFile(PrintStream out) {
        String p = context.getProperty(HISTORY_PROPERTY);
        Path file = p != null ? Path.of(p) : Path.of(System.getProperty("user.home"), ".ferrum", "history");
        try {
            file = file.toAbsolutePath();
            Files.createDirectories(file.getParent());
            if (Files.isDirectory(file) || (Files.exists(file) ? !Files.isWritable(file) : !Files.isWritable(file.getParent()))) {
                throw new IOException("not a writable file");
            }
            return file;
        } catch (IOException | RuntimeException e) {
            out.println("ferrum: no history is kept: " + file + ": " + e.getMessage());
            return null;
        }
    }

    /**
     * Waits until every command the first statement could name exists ({@link ConsoleStart}): at the framework's
     * launch, until it has reached its beginning start level, then starts the bundles FileInstall is still to start,
     * then waits while a bundle activates; a console started again later only waits while a bundle activates. The
     * {@code STARTED} event ends the first wait where it comes after this component activated (not under the bnd
     * launcher, which raises the start level after it). At most {@link ConsoleStart#WAIT_PROPERTY} seconds: then one
     * line names what still starts, and the console goes on.
     */
    private void awaitFrameworkStarted() throws InterruptedException {
        boolean atLaunch = System.getProperty(LAUNCHED_PROPERTY) == null;
        ConsoleStart.await(context, atLaunch, () -> started.getCount() == 0, ConsoleStart.waitSeconds(context, STDERR))
                .ifPresent(STDERR::println);
    }

    /**
     * At the framework's launch, waits until the launcher holds the exit code's callable (at most
     * {@value #LAUNCHER_WAIT_SECONDS} s) before the first statement runs: a statement that stops the
     * framework itself ({@code stop 0}) would otherwise meet the launcher before it took it, and the
     * process exit with the launcher's own 117 instead of the session's code. The console's own stop
     * waits so too ({@link #stopFramework(Bundle, long)}). A console started again later (its bundle
     * restarted) saw no launch and does not wait: the launcher took the callable long ago, or waits
     * for a new one that it may never take.
     */
    private void awaitLauncher() throws InterruptedException {
        if (System.getProperties().putIfAbsent(LAUNCHED_PROPERTY, "true") == null) {
            SessionExit.awaitTaken(LAUNCHER_WAIT_SECONDS, TimeUnit.SECONDS);
        }
    }

    /** @return a stream on {@code fd} in the encoding {@code System.out} or {@code System.err} uses */
    private static PrintStream standard(FileDescriptor fd, String encodingProperty) {
        return new PrintStream(new FileOutputStream(fd), true, encoding(encodingProperty));
    }

    /**
     * @param property {@code stdin.encoding}, {@code stdout.encoding} or {@code stderr.encoding}
     * @return the charset it names; the default charset if it is not set or names none this Java has
     */
    private static Charset encoding(String property) {
        try {
            return Charset.forName(System.getProperty(property, Charset.defaultCharset().name()));
        } catch (IllegalArgumentException unknown) {
            return Charset.defaultCharset();
        }
    }

    private void stopFramework() {
        stopFramework(system, LAUNCHER_WAIT_SECONDS);
    }

    /**
     * Stops the framework, but not before the launcher holds the exit code's callable ({@link
     * SessionExit#awaitTaken}): else it would exit with its own code, not the session's. Under the bnd launcher
     * the launcher stops it ({@link SessionExit#endSession}), so that the session's code cannot be lost to its own.
     */
    static void stopFramework(Bundle system, long waitSeconds) {
        try {
            SessionExit.awaitTaken(waitSeconds, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // this bundle stops: stop the framework all the same
        }
        if (SessionExit.endSession()) {
            return;
        }
        try {
            system.stop();
        } catch (BundleException | IllegalStateException e) {
            STDERR.println("error: cannot stop the framework: " + e.getMessage());
        }
    }
}
