package io.ferrum.memory.launcher;

import java.util.List;

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
 * of its bundle) waits only for the bundles activating (its own, among them).
 */
final class ConsoleStart {
    private ConsoleStart() {
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
