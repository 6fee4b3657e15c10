package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
import org.osgi.framework.SynchronousBundleListener;

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
        assertTrue(stopped.await(30, TimeUnit.SECONDS), "the framework is stopped once the launcher took the callable");
        console.join(30_000);
        exit.deactivate(); // the framework stops: the component goes
        assertEquals(1, launcher.get(30, TimeUnit.SECONDS), "the launcher exits with the session's outcome");
        SessionExit.outcome(SessionExit.EXIT_OK);
    }

    /**
     * A bundle whose activator never returns held the framework's stop, and the launcher's main thread waited for
     * this bundle's stop for ever. Once the stop has begun and the bound passed (0 s here), the process is ended with
     * the session's code, 1 when that was 0; a stop that ends in time is not.
     */
    @Test
    void aStopPastItsBoundEndsTheProcessAndOneInTimeDoesNot() throws Exception {
        Bundle stuck = (Bundle) Proxy.newProxyInstance(Bundle.class.getClassLoader(), new Class<?>[] {Bundle.class},
                (proxy, method, args) -> switch (method.getName()) {
                    case "getBundleId" -> 27L;
                    case "getSymbolicName" -> "org.example.stuck";
                    case "getState" -> Bundle.STOPPING;
                    case "getHeaders" -> new java.util.Hashtable<String, String>();
                    default -> null;
                });
        for (String bound : List.of("0", "3600")) {
            List<SynchronousBundleListener> listeners = new ArrayList<>();
            BundleContext context = (BundleContext) Proxy.newProxyInstance(BundleContext.class.getClassLoader(),
                    new Class<?>[] {BundleContext.class}, (proxy, method, args) -> switch (method.getName()) {
                        case "getProperty" -> SessionExit.STOP_WAIT_PROPERTY.equals(args[0]) ? bound : null;
                        case "addBundleListener" -> listeners.add((SynchronousBundleListener) args[0]);
                        case "getBundles" -> new Bundle[] {stuck};
                        default -> null;
                    });
            CompletableFuture<Integer> exited = new CompletableFuture<>();
            SessionExit exit = new SessionExit(context, exited::complete);
            CompletableFuture<Integer> launcher = CompletableFuture.supplyAsync(() -> {
                try {
                    return exit.codeOnceStopped(); // call() without the take, which the other test must see first
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
            });
            listeners.forEach(l -> l.bundleChanged(new BundleEvent(BundleEvent.STOPPING, system())));
            if (bound.equals("0")) {
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

    private static Bundle system() {
        return (Bundle) Proxy.newProxyInstance(Bundle.class.getClassLoader(), new Class<?>[] {Bundle.class},
                (proxy, method, args) -> method.getName().equals("getBundleId") ? 0L : null);
    }
}
