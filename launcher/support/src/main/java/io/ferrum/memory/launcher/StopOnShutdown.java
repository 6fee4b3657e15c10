package io.ferrum.memory.launcher;

import java.io.OutputStream;
import java.io.PrintStream;
import java.util.concurrent.TimeUnit;

import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.BundleException;
import org.osgi.framework.Constants;
import org.osgi.framework.FrameworkEvent;
import org.osgi.framework.launch.Framework;

/**
 * Stops the framework in order when the JVM shuts down while it runs: SIGTERM ({@code kill PID}, a container's stop),
 * SIGHUP, or an exit called by a bundle. The bnd launcher's own shutdown hook only deletes the framework's storage, so
 * no bundle's {@code stop} ran, and a plugin holding native memory or files never released them. The hook stops the
 * framework and waits for its stop as {@code stop 0} is waited for, at most {@link SessionExit#STOP_WAIT_PROPERTY}
 * seconds; past that one line names what is still stopping, and the JVM ends without waiting for it. A framework
 * already stopping or stopped (the end of a session, whose stop {@link SessionExit} bounds) is left alone.
 */
final class StopOnShutdown {
    /**
     * Set once a hook began the framework's stop: the stop is this hook's to bound and name, and {@link SessionExit},
     * which bounds every stop of the framework too, says nothing (the same line twice) and ends nothing (the JVM is
     * ending).
     */
    private static volatile boolean inCharge;
    private final Framework framework;
    private final long waitSeconds;
    private final Thread hook = new Thread(this::stopFramework, "ferrum: stop the framework at shutdown");

    private StopOnShutdown(Framework framework, long waitSeconds) {
        this.framework = framework;
        this.waitSeconds = waitSeconds;
    }

    /**
     * Adds the hook for the framework of {@code context}; none where the system bundle is no {@link Framework} (a
     * test's context).
     *
     * @return the hook's owner, to {@link #close} as this bundle stops; null when none was added
     */
    static StopOnShutdown register(BundleContext context) {
        if (!(context.getBundle(Constants.SYSTEM_BUNDLE_ID) instanceof Framework framework)) {
            return null;
        }
        // SessionExit names a bound that is no whole number of seconds: said once, not here again.
        long seconds = ConsoleStart.waitSeconds(context, SessionExit.STOP_WAIT_PROPERTY, 1, "",
                new PrintStream(OutputStream.nullOutputStream()));
        StopOnShutdown stop = new StopOnShutdown(framework, seconds);
        Runtime.getRuntime().addShutdownHook(stop.hook);
        return stop;
    }

    /** @return true once a shutdown hook stops the framework and bounds that stop itself */
    static boolean inCharge() {
        return inCharge;
    }

    /** Takes the hook away: this bundle stops, and a hook of its own would run the classes of a bundle gone. */
    void close() {
        try {
            Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException shuttingDown) {
            // The JVM is shutting down: the hook runs, or has run.
        }
    }

    private void stopFramework() {
        if ((framework.getState() & (Bundle.STARTING | Bundle.ACTIVE)) == 0) {
            return;
        }
        inCharge = true;
        try {
            framework.stop();
            if (framework.waitForStop(TimeUnit.SECONDS.toMillis(waitSeconds)).getType() == FrameworkEvent.WAIT_TIMEDOUT) {
                Console.sayOnStandardError(SessionExit.stillStopping(framework.getBundleContext(), waitSeconds));
            }
        } catch (BundleException | IllegalStateException | InterruptedException e) {
            // The framework stopped meanwhile, or the JVM ends now: nothing more to wait for.
        }
    }
}
