package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.BundleEvent;
import org.osgi.framework.FrameworkEvent;
import org.osgi.framework.SynchronousBundleListener;
import org.osgi.framework.launch.Framework;

/**
 * The exit code of a scripted session reaches the process only through the callable the bnd
 * launcher takes on its main thread. A script that stopped the framework before the launcher took it
 * unregistered it first, and the process exited with the launcher's own 117 (ConsoleIT under load:
 * a script whose statement failed exited 117, not 1).
 */
class SessionExitTest {

    /** One test: which callable was taken is JVM-wide, as in the distribution (one console, one launcher). */
    @Test
    void theConsoleStopsTheFrameworkOnlyOnceTheLauncherTookTheExitCodesCallable() throws Exception {
        CountDownLatch stopped = new CountDownLatch(1);
        Bundle system = (Bundle) Proxy.newProxyInstance(Bundle.class.getClassLoader(), new Class<?>[] {Bundle.class},
                (proxy, method, args) -> {
                    if (method.getName().equals("stop")) {
                        stopped.countDown();
                    }
                    return null;
                });
        BundleContext context = (BundleContext) Proxy.newProxyInstance(BundleContext.class.getClassLoader(),
                new Class<?>[] {BundleContext.class}, (proxy, method, args) -> null); // getBundle(0): stopping
        SessionExit exit = new SessionExit(context);
        SessionExit.outcome(1); // a statement failed

        Thread console = new Thread(() -> Console.stopFramework(system, 3600), "console");
        console.start();
        // The launcher has not taken the callable: the framework is not stopped, however long it takes.
        assertFalse(stopped.await(1, TimeUnit.SECONDS), "the framework was stopped before the launcher took the callable");
        assertTrue(console.isAlive());

        CompletableFuture<Integer> launcher = CompletableFuture.supplyAsync(() -> {
            try {
                return exit.call(); // the launcher's main thread
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        // Once it has, the session ends through it: the callable returns the outcome at once, and the launcher stops
        // the framework itself, marked orderly first, so its watch of the framework cannot exit with its own 117 (a
        // console that stopped the framework raced that watch: `quit` and a failed script exited 117 in ConsoleIT).
        assertEquals(1, launcher.get(30, TimeUnit.SECONDS), "the launcher gets the session's outcome");
        console.join(30_000);
        assertFalse(console.isAlive());
        assertEquals(1, stopped.getCount(), "the console left the framework's stop to the launcher");
        exit.deactivate(); // the launcher stops the framework: the component goes

        // No callable held any longer (as in a container without the bnd launcher): the console stops it itself.
        Console.stopFramework(system, 1);
        assertTrue(stopped.await(30, TimeUnit.SECONDS), "the console stops the framework when no launcher will");
        SessionExit.outcome(SessionExit.EXIT_OK);
    }

    /**
     * A bundle whose activator never returns held the framework's stop, and the launcher's main thread waited for
     * this bundle's stop for ever. Once the stop has begun and the bound passed (1 s here), the process is ended with
     * the session's code, 1 when that was 0; a stop that ends in time is not.
     */
    @Test
    void aStopPastItsBoundEndsTheProcessAndOneInTimeDoesNot() throws Exception {
        Bundle stuck = stopping("org.example.stuck");
        for (String bound : List.of("1", "3600")) {
            List<SynchronousBundleListener> listeners = new ArrayList<>();
            BundleContext context = (BundleContext) Proxy.newProxyInstance(BundleContext.class.getClassLoader(),
                    new Class<?>[] {BundleContext.class}, (proxy, method, args) -> switch (method.getName()) {
                        case "getProperty" -> SessionExit.STOP_WAIT_PROPERTY.equals(args[0]) ? bound : null;
                        case "addBundleListener" -> listeners.add((SynchronousBundleListener) args[0]);
                        case "getBundles" -> new Bundle[] {stuck};
                        default -> null;
                    });
            CompletableFuture<Integer> exited = new CompletableFuture<>();
            SessionExit exit = new SessionExit(context, exited::complete, line -> { });
            CompletableFuture<Integer> launcher = CompletableFuture.supplyAsync(() -> {
                try {
                    return exit.codeOnceStopped(); // call() without the take, which the other test must see first
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            });
            listeners.forEach(l -> l.bundleChanged(new BundleEvent(BundleEvent.STOPPING, system())));
            if (bound.equals("1")) {
                assertEquals(1, exited.get(30, TimeUnit.SECONDS), "the process is ended with 1, the session's 0 not being true");
            } else {
                exit.deactivate(); // this bundle stops in time: the framework's stop goes on
                assertEquals(SessionExit.EXIT_OK, launcher.get(30, TimeUnit.SECONDS));
                assertFalse(exited.isDone(), "a stop in time does not end the process");
            }
        }
        assertEquals("ferrum: still stopping after 30 s: org.example.stuck [27] (its stop has not returned); the process"
                + " exits without waiting for it (-Dferrum.stopWait=SECONDS waits longer)", SessionExit.stillStopping(
                (BundleContext) Proxy.newProxyInstance(BundleContext.class.getClassLoader(), new Class<?>[] {BundleContext.class},
                        (proxy, method, args) -> method.getName().equals("getBundles") ? new Bundle[] {stuck} : null), 30));
    }

    /**
     * The bundles stop from the highest start level down, and this one (level 5) is not the last: one that a user put
     * lower ({@code bundlelevel -s 3 27}), or installed there, stops after it. Its stop never returning held the process
     * for good: this bundle's stop had ended the wait, and the launcher waits for the framework's stop without a bound
     * ({@code -c 'install x.jar; start 27; bundlelevel -s 3 27'} never ended). Now the framework's own stop is what is
     * bounded, and the line names that bundle, which only the system bundle's context still lists.
     */
    @Test
    void aStopHeldBelowThisBundlesStartLevelIsBoundedTooAndNamed() throws Exception {
        Bundle stuck = stopping("org.example.low");
        BundleContext systemContext = (BundleContext) Proxy.newProxyInstance(BundleContext.class.getClassLoader(),
                new Class<?>[] {BundleContext.class}, (proxy, method, args) -> method.getName().equals("getBundles")
                        ? new Bundle[] {stuck} : null);
        for (boolean frameworkStopsInTime : List.of(false, true)) {
            CountDownLatch frameworkStopped = new CountDownLatch(frameworkStopsInTime ? 0 : 1); // never, or at once
            Framework framework = (Framework) Proxy.newProxyInstance(Framework.class.getClassLoader(),
                    new Class<?>[] {Framework.class}, (proxy, method, args) -> switch (method.getName()) {
                        case "getBundleId" -> 0L;
                        case "getState" -> Bundle.STOPPING;
                        case "getBundleContext" -> systemContext;
                        case "waitForStop" -> new FrameworkEvent(frameworkStopped.await((Long) args[0], TimeUnit.MILLISECONDS)
                                ? FrameworkEvent.STOPPED : FrameworkEvent.WAIT_TIMEDOUT, (Bundle) proxy, null);
                        default -> null;
                    });
            List<SynchronousBundleListener> listeners = new ArrayList<>();
            BundleContext context = (BundleContext) Proxy.newProxyInstance(BundleContext.class.getClassLoader(),
                    new Class<?>[] {BundleContext.class}, (proxy, method, args) -> switch (method.getName()) {
                        case "getProperty" -> SessionExit.STOP_WAIT_PROPERTY.equals(args[0]) ? "1" : null;
                        case "addBundleListener" -> listeners.add((SynchronousBundleListener) args[0]);
                        case "getBundle" -> framework;
                        case "getBundles" -> throw new IllegalStateException("this bundle has stopped: its context is invalid");
                        default -> null;
                    });
            CompletableFuture<Integer> exited = new CompletableFuture<>();
            List<String> said = new ArrayList<>();
            SessionExit exit = new SessionExit(context, exited::complete, said::add);
            listeners.forEach(l -> l.bundleChanged(new BundleEvent(BundleEvent.STOPPING, framework)));
            CompletableFuture<Integer> launcher = CompletableFuture.supplyAsync(() -> {
                try {
                    return exit.codeOnceStopped();
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            });
            // The watch of the framework's stop starts as the stop begins, before this bundle stops: once it has, the
            // code must be returned at once, as the bnd launcher exits with its own 117 once the framework has stopped
            // unless it has it (a thread started after this bundle's stop lost that race: `quit` exited 117 in CI).
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (exit.watchdog == null && System.nanoTime() < until) {
                Thread.onSpinWait();
            }
            assertNotNull(exit.watchdog, "the stop's watch started as the framework's stop began");
            assertFalse(launcher.isDone(), "the code waits for this bundle's stop");
            exit.deactivate(); // this bundle stops in time; the one at level 3 has yet to
            assertEquals(SessionExit.EXIT_OK, launcher.get(30, TimeUnit.SECONDS));
            if (frameworkStopsInTime) {
                exit.watchdog.join(30_000);
                assertFalse(exit.watchdog.isAlive());
                assertFalse(exited.isDone(), "a framework stopped in time does not end the process");
                assertEquals(List.of(), said);
            } else {
                assertEquals(1, exited.get(30, TimeUnit.SECONDS), "the framework's stop is bounded, not this bundle's");
                assertEquals(List.of("ferrum: still stopping after 1 s: org.example.low [27] (its stop has not returned); the"
                        + " process exits without waiting for it (-Dferrum.stopWait=SECONDS waits longer)"), said);
            }
        }
    }

    /**
     * {@code -Dferrum.stopWait=0} was taken, and ended every run, however healthy, at the start of its stop: no bundle's
     * {@code stop} ran, one line said the framework was "still stopping after 0 s", and the exit code was 1, not 0. It
     * is named as a bound that is no whole number of seconds 1 or more, and the default applies.
     */
    @Test
    void aStopWaitOfZeroIsRefusedAndTheDefaultApplies() {
        for (String bound : List.of("0", " 0", "-1")) {
            BundleContext context = (BundleContext) Proxy.newProxyInstance(BundleContext.class.getClassLoader(),
                    new Class<?>[] {BundleContext.class}, (proxy, method, args) -> method.getName().equals("getProperty")
                            && SessionExit.STOP_WAIT_PROPERTY.equals(args[0]) ? bound : null);
            assertEquals(ConsoleStart.DEFAULT_WAIT_SECONDS, new SessionExit(context, code -> { }, line -> { }).stopWaitSeconds,
                    "ferrum.stopWait=" + bound);
        }
    }

    /** @return bundle 27, {@code name}, whose stop has not returned */
    private static Bundle stopping(String name) {
        return (Bundle) Proxy.newProxyInstance(Bundle.class.getClassLoader(), new Class<?>[] {Bundle.class},
                (proxy, method, args) -> switch (method.getName()) {
                    case "getBundleId" -> 27L;
                    case "getSymbolicName" -> name;
                    case "getState" -> Bundle.STOPPING;
                    case "getHeaders" -> new java.util.Hashtable<String, String>();
                    default -> null;
                });
    }

    private static Bundle system() {
        return (Bundle) Proxy.newProxyInstance(Bundle.class.getClassLoader(), new Class<?>[] {Bundle.class},
                (proxy, method, args) -> method.getName().equals("getBundleId") ? 0L : null);
    }
}
