package io.ferrum.memory.launcher;

import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
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

    private final BundleContext context;
    private final CountDownLatch done = new CountDownLatch(1);
    private volatile int code = EXIT_OK;

    @Activate
    public SessionExit(BundleContext context) {
        this.context = context;
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

    @Override
    public Integer call() throws InterruptedException {
        TAKEN.countDown();
        done.await();
        return code;
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
    }
}
