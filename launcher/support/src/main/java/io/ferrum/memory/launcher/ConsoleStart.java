package io.ferrum.memory.launcher;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.BundleException;
import org.osgi.framework.Constants;
import org.osgi.framework.startlevel.BundleStartLevel;
import org.osgi.framework.startlevel.FrameworkStartLevel;

/**
 * When the console may run its first statement: once every command it could be given exists. The framework's
 * {@code STARTED} event cannot say so in the distribution: the bnd launcher starts the framework, which fires it,
 * and raises the start level only after, so the console's bundle starts after the event; and Felix's system bundle
 * is ACTIVE from then on. The bundles of {@code plugins/} are started later still, by FileInstall on its own
 * thread at its first poll once the framework has started, and nothing tells when FileInstall has done so. So at
 * the framework's launch the console waits for the beginning start level ({@link
 * ClaimingInstaller#restartedInARunningFramework}), then starts those bundles itself as FileInstall would ({@link
 * #startFileInstallsBundles}), then waits until no bundle is activating. A console started again later (an update
 * of its bundle) waits only for the bundles activating (its own, among them). Every wait is bounded ({@link
 * #WAIT_PROPERTY}): a plugin whose activator never returns stays STARTING for good, and the console, waiting for it,
 * showed no prompt and ran no statement.
 */
final class ConsoleStart {
    /** The framework property that bounds the console's wait for the start, in whole seconds. */
    static final String WAIT_PROPERTY = "ferrum.console.startWait";
    /** The bound unless {@link #WAIT_PROPERTY} sets another: long enough for a backend that opens its device. */
    static final long DEFAULT_WAIT_SECONDS = 30;
    private static final long LOOK_MS = 20;

    private ConsoleStart() {
    }

    /**
     * Waits until the console may run its first statement ({@link #starting}): at launch, until the beginning start
     * level, then starts the bundles FileInstall is still to start on a thread of its own ({@link
     * #startFileInstallsBundles}: an activator may not return) and waits for that and for the bundles activating.
     *
     * @param startedEvent whether the framework's {@code STARTED} event came since the console activated: it ends the
     *                     wait for the start level
     * @param seconds      the bound of the whole wait
     * @return empty once all has started; else, at the bound, the line that names what is still starting (the
     *         console goes on without it)
     */
    static Optional<String> await(BundleContext context, boolean atLaunch, BooleanSupplier startedEvent, long seconds)
            throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (!startedEvent.getAsBoolean() && starting(context, atLaunch)) {
            if (System.nanoTime() - deadline >= 0) {
                return Optional.of(stillStarting(context, seconds));
            }
            Thread.sleep(LOOK_MS);
        }
        if (!atLaunch) {
            return Optional.empty();
        }
        Thread starter = new Thread(() -> startFileInstallsBundles(context), "ferrum plugin start");
        starter.setDaemon(true);
        starter.start();
        while (starter.isAlive() || starting(context, false)) {
            if (System.nanoTime() - deadline >= 0) {
                return Optional.of(stillStarting(context, seconds));
            }
            Thread.sleep(LOOK_MS);
        }
        return Optional.empty();
    }

    /**
     * @return the bound of the console's wait in seconds: {@link #WAIT_PROPERTY}, or {@link #DEFAULT_WAIT_SECONDS}
     *         when it is not set; one that is no whole number of seconds (0 or more) is named on {@code err}, and the
     *         default applies
     */
    static long waitSeconds(BundleContext context, PrintStream err) {
        return waitSeconds(context, WAIT_PROPERTY, 0, "the console waits " + DEFAULT_WAIT_SECONDS + " s for the bundles to start", err);
    }

    /**
     * @param property  a framework property that bounds a wait, in whole seconds
     * @param least     the least such bound that is taken
     * @param otherwise what applies when it is not such a number: {@link #DEFAULT_WAIT_SECONDS}, in words
     * @return the property's value, or {@link #DEFAULT_WAIT_SECONDS} when it is not set; one that is no whole number of
     *         seconds ({@code least} or more) is named on {@code err}, and the default applies
     */
    static long waitSeconds(BundleContext context, String property, long least, String otherwise, PrintStream err) {
        String value = context.getProperty(property);
        if (value == null) {
            return DEFAULT_WAIT_SECONDS;
        }
        try {
            long seconds = Long.parseLong(value.strip());
            if (seconds >= least) {
                return seconds;
            }
        } catch (NumberFormatException notANumber) {
            // named below
        }
        err.println("error: " + property + "=" + ControlCharacters.escaped(value) + " is no whole number of seconds"
                + " (" + least + " or more); " + otherwise);
        return DEFAULT_WAIT_SECONDS;
    }

    /** @return the line naming the bundles still activating, or the start level not reached, after {@code seconds} */
    private static String stillStarting(BundleContext context, long seconds) {
        List<String> names = new ArrayList<>();
        for (Bundle b : context.getBundles()) {
            if (b.getState() == Bundle.STARTING && !lazy(b)) {
                names.add(b.getSymbolicName() + " [" + b.getBundleId() + "]");
            }
        }
        String what = names.isEmpty() ? "the framework, at start level "
                + context.getBundle(Constants.SYSTEM_BUNDLE_ID).adapt(FrameworkStartLevel.class).getStartLevel()
                : String.join(", ", names);
        return "ferrum: still starting after " + seconds + " s: " + what + "; the console starts without waiting for "
                + (names.size() > 1 ? "them" : "it") + " (-D" + WAIT_PROPERTY + "=SECONDS waits longer)";
    }

    /**
     * @param atLaunch true for the console that starts with the framework, false for one started again later
     * @return whether the framework or a bundle is still starting: a bundle that waits for its first class to be
     *         loaded (a lazy activation policy) is STARTING until then, and does not count
     */
    static boolean starting(BundleContext context, boolean atLaunch) {
        if (context.getBundle(Constants.SYSTEM_BUNDLE_ID).getState() != Bundle.ACTIVE
                || atLaunch && !ClaimingInstaller.restartedInARunningFramework(context)) {
            return true;
        }
        for (Bundle b : context.getBundles()) {
            if (b.getState() == Bundle.STARTING && !lazy(b)) {
                return true;
            }
        }
        return false;
    }

    /**
     * Starts each bundle that FileInstall installed from a watched folder and is still to start at its next poll:
     * not a fragment, not ACTIVE or STARTING, at a start level the framework has reached; with the options
     * FileInstall would use ({@code felix.fileinstall.bundles.startTransient}, {@code
     * felix.fileinstall.bundles.startActivationPolicy}); none when it starts no bundle it installs ({@code
     * felix.fileinstall.bundles.new.start=false}). Returns once each has started or failed to: a start that
     * FileInstall has begun meanwhile is waited for (the framework starts a bundle once at a time), one that fails
     * is left for FileInstall to report at its own try (and is not marked started), and FileInstall finds the others
     * started.
     */
    static void startFileInstallsBundles(BundleContext context) {
        try {
            startEach(context);
        } catch (IllegalStateException contextGone) {
            // This bundle stopped meanwhile (its context is no longer valid): FileInstall starts the rest.
        }
    }

    private static void startEach(BundleContext context) {
        if ("false".equalsIgnoreCase(property(context, "felix.fileinstall.bundles.new.start", "true"))) {
            return;
        }
        int options = ("true".equalsIgnoreCase(property(context, "felix.fileinstall.bundles.startTransient", "false"))
                ? Bundle.START_TRANSIENT : 0)
                | ("true".equalsIgnoreCase(property(context, "felix.fileinstall.bundles.startActivationPolicy", "true"))
                ? Bundle.START_ACTIVATION_POLICY : 0);
        List<String> watched = BuiltInBundlesGuard.uris(WatchedFolders.of(context));
        int level = context.getBundle(Constants.SYSTEM_BUNDLE_ID).adapt(FrameworkStartLevel.class).getStartLevel();
        for (Bundle b : context.getBundles()) {
            BundleStartLevel start = b.adapt(BundleStartLevel.class);
            if ((b.getState() & (Bundle.INSTALLED | Bundle.RESOLVED)) == 0 || b.getHeaders().get(Constants.FRAGMENT_HOST) != null
                    || start == null || start.getStartLevel() > level || !BuiltInBundlesGuard.fromWatchedFolder(b.getLocation(), watched)) {
                continue;
            }
            try {
                // Transiently first: a bundle marked to start that does not resolve is tried again at each refresh
                // FileInstall asks for, and the framework prints each failure on standard output, stack trace and all.
                b.start(options | Bundle.START_TRANSIENT);
                if ((options & Bundle.START_TRANSIENT) == 0) {
                    b.start(options); // started: marked so, as FileInstall's start would
                }
            } catch (BundleException | RuntimeException failed) {
                // FileInstall's own start fails the same way, and it reports that.
            }
        }
    }

    /** @return the framework property {@code key}, stripped, or {@code otherwise} when it is not set */
    private static String property(BundleContext context, String key, String otherwise) {
        String value = context.getProperty(key);
        return value == null ? otherwise : value.strip();
    }

    private static boolean lazy(Bundle b) {
        String policy = b.getHeaders().get(Constants.BUNDLE_ACTIVATIONPOLICY);
        return policy != null && policy.strip().startsWith(Constants.ACTIVATION_LAZY);
    }
}
