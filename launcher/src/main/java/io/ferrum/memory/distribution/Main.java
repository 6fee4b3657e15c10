package io.ferrum.memory.distribution;

import java.io.File;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.Charset;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.MalformedInputException;
import java.nio.charset.UnmappableCharacterException;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The entry point of {@code java -jar ferrum-memory.jar}, before the bnd launcher and Felix. It is
 * compiled for Java 8 so that any Java a user has by default can run it up to the version check:
 * on a Java older than {@value #NEEDED} it prints one line (which Java runs, which is needed, how
 * to choose it) and exits 2, instead of dozens of {@code osgi.ee} resolution errors.
 *
 * <p>Felix 7.0.5 calls {@code sun.misc.Unsafe} while it starts, and Java 24+ warns about that on
 * the JVM's own standard error unless the JVM was started with {@code
 * --sun-misc-unsafe-memory-access=allow}; no manifest header or later setting can change it. So when
 * that option is missing, this class starts the same Java again with it (and with the native access
 * the bundles need, and the caller's JVM options), hands over standard input, output and error, and
 * exits with its exit code. A run that already has the option starts the framework in this JVM.
 *
 * <p>Arguments: none (commands are read from the terminal or standard input), or {@code -c SCRIPT}.
 */
public final class Main {
    /** The Java feature release the bundles are compiled for ({@code osgi.ee} JavaSE 25). */
    static final int NEEDED = 25;
    /** The option that silences Felix's {@code sun.misc.Unsafe} warning, and its system property. */
    private static final String UNSAFE_OPTION = "--sun-misc-unsafe-memory-access=allow";
    private static final String UNSAFE_PROPERTY = "sun.misc.unsafe.memory.access";
    /** Where the console finds the script of {@code -c} (a framework or system property). */
    static final String COMMAND_PROPERTY = "ferrum.command";
    static final String USAGE = "usage: java -jar ferrum-memory.jar [-c 'COMMAND; COMMAND ...']"
            + " (without -c, commands are read from the terminal or standard input)";
    /** Exit code for a wrong call of the jar itself (wrong Java, bad arguments). */
    static final int EXIT_USAGE = 2;

    private Main() {
    }

    public static void main(String[] args) throws Exception {
        int feature = feature(System.getProperty("java.specification.version"));
        if (feature < NEEDED) {
            System.err.println("ferrum: this is Java " + System.getProperty("java.version") + " ("
                    + System.getProperty("java.home") + "); Ferrum Memory needs Java " + NEEDED
                    + " or newer: run the jar with a JDK " + NEEDED + "'s java, e.g. /path/to/jdk-" + NEEDED
                    + "/bin/java -jar ferrum-memory.jar (./ferrum start finds one)");
            System.exit(EXIT_USAGE);
        }
        String script = command(args);
        if (script != null) {
            System.setProperty(COMMAND_PROPERTY, script);
        }
        if (!"allow".equals(System.getProperty(UNSAFE_PROPERTY))) {
            System.exit(relaunch(args));
        }
        Class<?> launcher = Class.forName("aQute.launcher.pre.EmbeddedLauncher");
        launcher.getMethod("main", String[].class).invoke(null, (Object) new String[0]);
    }

    /**
     * @param spec {@code java.specification.version}: {@code 1.8}, {@code 17}, {@code 25}
     * @return the feature release, or 0 if it cannot be read
     */
    static int feature(String spec) {
        try {
            String s = spec.startsWith("1.") ? spec.substring(2) : spec;
            int dot = s.indexOf('.');
            return Integer.parseInt(dot < 0 ? s : s.substring(0, dot));
        } catch (RuntimeException e) {
            return 0;
        }
    }

    /**
     * Reads the jar's own arguments: none (commands come from standard input, or a terminal), or
     * {@code -c SCRIPT} (the script's statements, separated by new lines or {@code ;}, run in order;
     * the console reads it from the {@value #COMMAND_PROPERTY} system property). Anything else is
     * refused in one line naming it, with the usage, and exit code {@value #EXIT_USAGE}.
     *
     * @return the script of {@code -c}, or null
     */
    static String command(String[] args) {
        if (args.length == 0) {
            return null;
        }
        if (args.length == 2 && "-c".equals(args[0])) {
            String bad = args[1].indexOf('\ufffd') < 0 ? null : notValid(commandLineEnd(), System.getProperty("sun.jnu.encoding"));
            if (bad != null) {
                System.err.println("error: the -c script is not valid " + bad + "; nothing was run. Give it in that"
                        + " encoding, or pipe it to standard input (a UTF-8 script is read as UTF-8 there)");
                System.exit(EXIT_USAGE);
            }
            return args[1];
        }
        String wrong = args[0].equals("-c") ? "-c needs exactly one SCRIPT argument, got " + (args.length - 1)
                : "unknown argument '" + args[0] + "'";
        System.err.println("error: " + wrong + "; " + USAGE);
        System.exit(EXIT_USAGE);
        return null;
    }

    /**
     * @return the bytes of this process's last argument as the kernel holds them ({@code
     *         /proc/self/cmdline}: the arguments, each ended by a NUL; the jar's own come last), or
     *         null where they cannot be read (no {@code /proc})
     */
    private static byte[] commandLineEnd() {
        try {
            byte[] all = Files.readAllBytes(Paths.get("/proc/self/cmdline"));
            int end = all.length > 0 && all[all.length - 1] == 0 ? all.length - 1 : all.length;
            int start = end;
            while (start > 0 && all[start - 1] != 0) {
                start--;
            }
            return Arrays.copyOfRange(all, start, end);
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    /**
     * The JVM decodes its arguments in the locale's encoding ({@code sun.jnu.encoding}) and puts a
     * U+FFFD in place of bytes not valid in it (a Latin-1 {@code é} under a UTF-8 locale, any byte
     * over 127 under {@code LC_ALL=C}, whose encoding is US-ASCII): the script would run with that
     * character where the user wrote something else, as {@code mem:write --text} data. So a script
     * with a U+FFFD is checked against its bytes, and refused, as a piped line is, when they are
     * not valid; a U+FFFD that was written (its own three bytes in UTF-8) passes.
     *
     * @param bytes    the script's bytes, or null when they cannot be read (then it is not refused)
     * @param encoding the locale's encoding, as the JVM names it
     * @return e.g. {@code UTF-8 (the locale's encoding): e9 at byte 27}, or null when the bytes are valid
     */
    static String notValid(byte[] bytes, String encoding) {
        if (bytes == null) {
            return null;
        }
        Charset charset;
        try {
            charset = encoding == null ? Charset.defaultCharset() : Charset.forName(encoding);
        } catch (RuntimeException unknown) {
            return null;
        }
        ByteBuffer in = ByteBuffer.wrap(bytes);
        try {
            charset.newDecoder().onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(in);
            return null;
        } catch (CharacterCodingException e) {
            int length = e instanceof MalformedInputException ? ((MalformedInputException) e).getInputLength()
                    : e instanceof UnmappableCharacterException ? ((UnmappableCharacterException) e).getInputLength() : 1;
            StringBuilder hex = new StringBuilder();
            for (int i = in.position(); i < Math.min(bytes.length, in.position() + length); i++) {
                hex.append(hex.length() == 0 ? "" : " ").append(String.format("%02x", bytes[i] & 0xff));
            }
            return charset.name() + " (the locale's encoding): " + hex + " at byte " + (in.position() + 1);
        }
    }

    /** Runs this jar again in a child JVM with the options it needs; returns the child's exit code. */
    private static int relaunch(String[] args) throws Exception {
        List<String> cmd = new ArrayList<String>();
        cmd.add(new File(new File(System.getProperty("java.home"), "bin"), "java").getPath());
        cmd.addAll(ManagementFactory.getRuntimeMXBean().getInputArguments());
        cmd.add("--enable-native-access=ALL-UNNAMED");
        cmd.add(UNSAFE_OPTION);
        cmd.add("-cp");
        cmd.add(new File(Main.class.getProtectionDomain().getCodeSource().getLocation().toURI()).getPath());
        cmd.add(Main.class.getName());
        cmd.addAll(Arrays.asList(args));
        final Process child = new ProcessBuilder(cmd).inheritIO().start();
        // Ctrl-C reaches both JVMs (one process group); the child decides what it means (the
        // console cancels the line), so this one must outlive it and pass on its exit code.
        ignoreInterrupts();
        Runtime.getRuntime().addShutdownHook(new Thread("ferrum: stop the framework's JVM") {
            @Override
            public void run() {
                passOnTheEnd(child);
            }
        });
        return child.waitFor();
    }

    /**
     * Ends the framework's JVM with this one: SIGTERM ({@code kill PID}, a container's stop) or SIGHUP reaches only
     * this JVM, the process the user started, and the child, left running, never stopped its bundles. The child gets
     * SIGTERM too and stops the framework in order within its own bound ({@code ferrum.stopWait}); this JVM waits for
     * that, so that the process the user waits on ends after it. Nothing to do when the child has ended.
     */
    private static void passOnTheEnd(Process child) {
        if (!child.isAlive()) {
            return;
        }
        child.destroy(); // SIGTERM
        try {
            child.waitFor();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /** Gives SIGINT a handler that does nothing (not SIG_IGN, which the child would inherit). */
    private static void ignoreInterrupts() {
        try {
            Class<?> signal = Class.forName("sun.misc.Signal");
            Class<?> handlerType = Class.forName("sun.misc.SignalHandler");
            InvocationHandler nothing = new InvocationHandler() {
                @Override
                public Object invoke(Object proxy, Method m, Object[] a) {
                    if ("hashCode".equals(m.getName())) {
                        return 0;
                    }
                    if ("equals".equals(m.getName())) {
                        return proxy == a[0];
                    }
                    return "toString".equals(m.getName()) ? "ignore" : null;
                }
            };
            Object handler = Proxy.newProxyInstance(handlerType.getClassLoader(), new Class<?>[] {handlerType}, nothing);
            signal.getMethod("handle", signal, handlerType).invoke(null,
                    signal.getConstructor(String.class).newInstance("INT"), handler);
        } catch (Exception | LinkageError e) {
            // No sun.misc.Signal: Ctrl-C then ends both JVMs, as without this class.
        }
    }
}
