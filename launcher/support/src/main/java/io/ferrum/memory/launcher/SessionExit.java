package io.ferrum.memory.launcher;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Consumer;
import java.util.function.IntConsumer;

import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.BundleEvent;
import org.osgi.framework.Constants;
import org.osgi.framework.FrameworkEvent;
import org.osgi.framework.SynchronousBundleListener;
import org.osgi.framework.launch.Framework;
import org.osgi.framework.startlevel.FrameworkStartLevel;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;

/**
 * Gives the executable distribution an honest exit code. The bnd launcher runs a {@code Callable}
 * registered with {@code main.thread=true} on the JVM's main thread and exits with what it returns:
 * this one returns the console's outcome ({@link #outcome}: 0, or 1 when a scripted command failed)
 * when the framework stops, instead of the launcher's own code for "framework stopped" (117). If only
 * this bundle stops, it returns the launcher's "wait for the next main callable" code, so stopping or
 * updating this bundle never ends the process. In other containers the service is simply unused.
 *
 * <p>The framework's stop is bounded too ({@link #STOP_WAIT_PROPERTY}): a bundle whose activator never returns, from
 * its {@code start} (the bundle still STARTING) or its {@code stop}, held the framework's stop for good, and the process
 * with it, at the end of a script, at {@code exit}, at {@code stop 0}: the bnd launcher waits for the framework's stop
 * without a bound, and a STARTING bundle's lock is held by the thread caught in its activator. Once the framework has
 * been stopping that long without having stopped, one line names the bundles still starting or stopping, and the process
 * exits (with the session's code, 1 when that was 0). What is waited for is the framework's own stop, not this
 * bundle's: a bundle below this one's start level (5; put there with {@code bundlelevel}) stops after it.
 */
@Component(service = Callable.class, property = "main.thread=true")
public final class SessionExit implements Callable<Integer> {
    /** bnd launcher: exit normally. */
    static final int EXIT_OK = 0;
    /** bnd launcher: forget this callable and wait for another. */
    static final int RELISTEN = 198;

    /** The console's verdict on the session; one per JVM, as there is one console. */
    private static volatile int outcome = EXIT_OK;
    /**
     * Set once a piped or {@code -c} session began: this bundle stopping under it (a stop, update or
     * refresh of it) ends the run with exit code 1. The launcher must not wait for another callable:
     * a stopped bundle never starts again, and one that restarts registers its callable before the
     * launcher listens again, so it is never taken (the process hung, or exited 117).
     */
    private static volatile boolean scripted;
    /**
     * Counted down once the launcher's main thread has taken this callable. A framework stopped
     * before then unregisters it first: the launcher, left with no callable, exits with its own 117
     * instead of the outcome (seen in ConsoleIT under load: a short script exited 117, not 1).
     */
    private static final CountDownLatch TAKEN = new CountDownLatch(1);
    /**
     * Set once a wait for the take ran out (no bnd launcher here): the console waits both before its
     * first statement and before its stop, and must not wait twice for what never comes.
     */
    private static volatile boolean untaken;

    /** The framework property that bounds the framework's stop, in whole seconds. */
    static final String STOP_WAIT_PROPERTY = "ferrum.stopWait";

    private final BundleContext context;
    /**
     * The system bundle, to wait for the framework's own stop on ({@link Framework#waitForStop}), and to list the bundles
     * through once this bundle's context is no longer valid; null where there is none such (a test's context).
     */
    private final Framework framework;
    /** Ends the process when the framework has not stopped by the end of the bound (the bundles below this one's level). */
    volatile Thread watchdog;
    private final CountDownLatch done = new CountDownLatch(1);
    /** Counted down when the framework begins to stop (before any bundle stops), or when {@link #done} is. */
    private final CountDownLatch stoppingOrDone = new CountDownLatch(1);
    /** The callable the launcher's main thread is in, if any: {@link #endSession} ends its wait. */
    private static volatile SessionExit held;
    /** Counted down as {@link #call} returns. */
    private final CountDownLatch returned = new CountDownLatch(1);
    /** How long this bundle's stop in the framework's waits, at most, for {@link #call} to return the code. */
    private static final long RETURN_WAIT_SECONDS = 5;
    /** Set by {@link #endSession} before it counts {@link #stoppingOrDone} down. */
    private volatile boolean endRequested;
    /** Set when the framework begins to stop (its system bundle STOPPING), before {@link #stoppingOrDone} counts down. */
    private volatile boolean stopBegan;
    /** Set by the first {@link #stuck}: the main thread and the {@link #watchdog} may both find the bound passed. */
    private final AtomicBoolean ended = new AtomicBoolean();
    private final SynchronousBundleListener frameworkStopping = e -> {
        if (e.getType() == BundleEvent.STOPPING && e.getBundle().getBundleId() == Constants.SYSTEM_BUNDLE_ID) {
            stopBegan = true;
            stoppingOrDone.countDown();
        }
    };
    /** How long the framework may take to stop, in seconds ({@link #STOP_WAIT_PROPERTY}). */
    final long stopWaitSeconds;
    /** Ends the process with its argument once the framework's stop ran past its bound: {@code System.exit}. */
    private final IntConsumer exit;
    /** Says the line that names what held the stop: on the process's standard error. */
    private final Consumer<String> say;
    private volatile int code = EXIT_OK;

    @Activate
    public SessionExit(BundleContext context) {
        this(context, System::exit, Console::sayOnStandardError);
    }

    SessionExit(BundleContext context, IntConsumer exit, Consumer<String> say) {
        this.context = context;
        this.exit = exit;
        this.say = say;
        this.framework = context.getBundle(Constants.SYSTEM_BUNDLE_ID) instanceof Framework f ? f : null;
        // 0 would end every run at the start of its stop, before any bundle's stop ran, with exit code 1.
        this.stopWaitSeconds = ConsoleStart.waitSeconds(context, STOP_WAIT_PROPERTY, 1, "the distribution waits "
                + ConsoleStart.DEFAULT_WAIT_SECONDS + " s for the bundles to stop", Console.standardError());
        context.addBundleListener(frameworkStopping);
    }

    /** @param exitCode what the process exits with when the framework stops (0-255) */
    static void outcome(int exitCode) {
        outcome = exitCode;
    }

    /** A piped or {@code -c} session began: from now on this bundle stopping ends the run. */
    static void scripted() {
        scripted = true;
    }

    /**
     * Waits until the launcher has taken the callable, so that a framework stopped now still exits
     * with the outcome. Bounded: in a container without the bnd launcher no one ever takes it, and
     * once a wait ran out, later ones do not wait.
     *
     * @return true if it was taken within the wait
     */
    static boolean awaitTaken(long timeout, TimeUnit unit) throws InterruptedException {
        if (untaken) {
            return TAKEN.getCount() == 0;
        }
        boolean taken = TAKEN.await(timeout, unit);
        untaken = !taken;
        return taken;
    }

    /**
     * The launcher's main thread: returns the exit code once this bundle stops. Once the framework has begun to stop,
     * it waits {@link #stopWaitSeconds} at most for that; past it, it names what is still starting or stopping and
     * ends the process itself ({@link #exit}): returned, the launcher would wait for the framework's stop for ever.
     */
    @Override
    public Integer call() throws InterruptedException {
        held = this;
        TAKEN.countDown();
        try {
            return codeOnceStopped();
        } finally {
            held = null;
            returned.countDown();
        }
    }

    /**
     * Ends the session by the launcher's own stop: the callable it holds returns the outcome at once, and the launcher
     * then stops the framework, having first marked it no longer active, so that its watch of the framework exits
     * quietly instead of with its own 117. A console that stopped the framework itself raced that watch: the
     * callable, woken by this bundle's stop, had to return before the bundles below it had stopped (ConsoleIT under
     * load: {@code quit} and a failed script exited 117, not 0 and 1).
     *
     * @return true if the launcher holds a callable and will stop the framework; false if the caller must stop it
     *         (no bnd launcher here, or its callable returned meanwhile)
     */
    static boolean endSession() {
        SessionExit s = held;
        if (s == null) {
            return false;
        }
        s.endRequested = true;
        s.stoppingOrDone.countDown();
        return true;
    }

    /**
     * @return the exit code once this bundle stopped, or once the framework's stop ran past its bound; the framework's
     *         own stop, which goes on after this bundle's (the bundles below its start level), is bounded by {@link
     *         #watchdog}, started as the stop begins
     */
    int codeOnceStopped() throws InterruptedException {
        stoppingOrDone.await();
        long bound = TimeUnit.SECONDS.toNanos(stopWaitSeconds);
        if (endRequested && !stopBegan) {
            // The session ended (endSession): the launcher stops the framework once this returns, bounded from now.
            startWatchdog(bound);
            return outcome;
        }
        if (stopBegan) {
            // Started now, not once this bundle stopped: the code must be returned at once then. The bnd launcher's own
            // watch of the framework exits with 117 at its stop unless this callable returned before, and the bundles
            // below this one's start level take only moments to stop (a thread started in that window lost the race in
            // ConsoleIT under load: `quit` exited 117).
            startWatchdog(bound);
        }
        if (!done.await(bound, TimeUnit.NANOSECONDS)) {
            return stuck();
        }
        return code;
    }

    /** Starts {@link #watchdog}, which ends the process if the framework has not stopped within {@code bound} ns. */
    private void startWatchdog(long bound) {
        if (framework == null) {
            return; // not under a framework of its own (a test's context): nothing to wait on
        }
        watchdog = new Thread(() -> exitUnlessStoppedWithin(bound), "ferrum stop bound");
        watchdog.setDaemon(true);
        watchdog.start();
    }

    /**
     * Waits the bound for the framework's own stop, from its beginning: the bundles below this one's start level stop
     * after it, and one of them may hold the stop as well.
     */
    private void exitUnlessStoppedWithin(long nanos) {
        long millis = Math.max(1, TimeUnit.NANOSECONDS.toMillis(nanos)); // 0 would wait without a bound
        try {
            if (framework.waitForStop(millis).getType() == FrameworkEvent.WAIT_TIMEDOUT) {
                stuck();
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt(); // the process is ending anyway
        }
    }

    /** Names what still holds the framework's stop and ends the process: @return the code it ends with */
    private int stuck() {
        int stuck = outcome != EXIT_OK ? outcome : 1;
        if (!ended.compareAndSet(false, true) || StopOnShutdown.inCharge()) {
            return stuck; // said and ended by the other of the main thread and the watchdog, or by the JVM's shutdown
        }
        BundleContext view = framework != null && framework.getBundleContext() != null ? framework.getBundleContext() : context;
        say.accept(stillStopping(view, stopWaitSeconds));
        exit.accept(stuck);
        return stuck;
    }

    /** @return the line naming the bundles whose activator has not returned after {@code seconds} of the stop */
    static String stillStopping(BundleContext context, long seconds) {
        List<String> names = new ArrayList<>();
        int level = -1;
        try {
            for (Bundle b : context.getBundles()) {
                String lazy = b.getHeaders().get(Constants.BUNDLE_ACTIVATIONPOLICY);
                if (b.getBundleId() == Constants.SYSTEM_BUNDLE_ID) {
                    continue; // STOPPING from the start of the stop: it waits for the others
                }
                if (b.getState() == Bundle.STOPPING
                        || b.getState() == Bundle.STARTING && (lazy == null || !lazy.strip().startsWith(Constants.ACTIVATION_LAZY))) {
                    names.add(b.getSymbolicName() + " [" + b.getBundleId() + "] (its "
                            + (b.getState() == Bundle.STOPPING ? "stop" : "start") + " has not returned)");
                }
            }
            level = context.getBundle(Constants.SYSTEM_BUNDLE_ID).adapt(FrameworkStartLevel.class).getStartLevel();
        } catch (RuntimeException contextGone) {
            // This bundle stopped meanwhile (its context is no longer valid): what it could still see is named.
        }
        String what = !names.isEmpty() ? String.join(", ", names) : "the framework, at start level " + level;
        return "ferrum: still stopping after " + seconds + " s: " + what + "; the process exits without waiting for "
                + (names.size() > 1 ? "them" : "it") + " (-D" + STOP_WAIT_PROPERTY + "=SECONDS waits longer)";
    }

    @Deactivate
    void deactivate() {
        Bundle system = context.getBundle(0);
        boolean frameworkStopping = system == null || system.getState() == Bundle.STOPPING;
        if (frameworkStopping) {
            code = outcome;
        } else if (scripted) {
            Console.sayScriptCutShort();
            outcome = 1;
            code = 1;
        } else {
            code = RELISTEN;
        }
        done.countDown();
        stoppingOrDone.countDown();
        if (frameworkStopping && held == this) {
            // Stopped by other means than endSession (`stop 0`): the launcher exits with its own 117 once the framework
            // has stopped unless the code is back, so the stop goes on once it is (bounded: never hold the stop).
            try {
                returned.await(RETURN_WAIT_SECONDS, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }
}
