package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Proxy;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;

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
}
