package io.ferrum.memory.distribution;

import java.io.File;
import java.lang.management.ManagementFactory;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
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
 * <p>Arguments: none; commands are read from standard input.
 */
public final class Main {
    /** The Java feature release the bundles are compiled for ({@code osgi.ee} JavaSE 25). */
    static final int NEEDED = 25;
    /** The option that silences Felix's {@code sun.misc.Unsafe} warning, and its system property. */
    private static final String UNSAFE_OPTION = "--sun-misc-unsafe-memory-access=allow";
    private static final String UNSAFE_PROPERTY = "sun.misc.unsafe.memory.access";
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
        command(args);
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
     * @return null: the jar takes no arguments yet (commands come from standard input; {@code -c} is
     *         issue 17's, not built); exits 2 on any argument, naming it
     */
    private static String command(String[] args) {
        if (args.length == 0) {
            return null;
        }
        System.err.println("ferrum: unknown arguments " + Arrays.toString(args)
                + "; usage: java -jar ferrum-memory.jar (commands are read from standard input, e.g. echo mem:devices | java -jar ferrum-memory.jar)");
        System.exit(EXIT_USAGE);
        return null;
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
        Process child = new ProcessBuilder(cmd).inheritIO().start();
        // Ctrl-C reaches both JVMs (one process group); the child decides what it means (the
        // console cancels the line), so this one must outlive it and pass on its exit code.
        ignoreInterrupts();
        return child.waitFor();
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
