package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.lang.reflect.Proxy;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.apache.felix.gogo.runtime.CommandProcessorImpl;
import org.apache.felix.gogo.runtime.threadio.ThreadIOImpl;
import org.apache.felix.service.command.Job;
import org.junit.jupiter.api.Test;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;

/**
 * {@code update io.ferrum.memory.launcher} (or {@code stop}) run as a statement of the console's own
 * session: the console's deactivation, on that statement's thread, interrupted the console's thread,
 * which left the statement and closed its session, and that close interrupted the statement's thread
 * while it was still stopping and starting the bundle. The restart then ran interrupted: SCR logged
 * "The wait for bundle io.ferrum.memory.launcher ... being destroyed before destruction has been
 * interrupted" and loaded the new components without its wait. Here a real Gogo session runs the
 * console's script, whose statement deactivates the console.
 */
class ConsoleTest {
    private static final String STARTED = "ferrum.console.started";
    private static final String LAUNCHED = "ferrum.console.launched";

    /** A command that deactivates the console from its statement, as a stop of its bundle by that statement does. */
    public static final class Deactivating {
        volatile Console console;
        final CompletableFuture<String> seen = new CompletableFuture<>();

        public void deactivate() throws Exception {
            Job statement = Job.Utils.current();
            // The console's thread waits on the statement's job: held here, it cannot wake from that wait
            // and clear an interrupt before the look below.
            synchronized (statement) {
                console.deactivate();
                seen.complete(console.thread.isInterrupted() ? "interrupted" : String.valueOf(console.thread.getState()));
            }
        }
    }

    @Test
    void aStatementOfItsOwnSessionThatStopsTheConsoleIsNotInterrupted() throws Exception {
        String started = System.clearProperty(STARTED);
        String launched = System.setProperty(LAUNCHED, "true"); // no bnd launcher to wait for
        ThreadIOImpl io = new ThreadIOImpl();
        io.start();
        try {
            CommandProcessorImpl processor = new CommandProcessorImpl(io);
            Deactivating command = new Deactivating();
            processor.addCommand("test", command, "deactivate");
            command.console = new Console(context("test:deactivate"), processor);
            assertEquals("WAITING", command.seen.get(30, TimeUnit.SECONDS),
                    "the console's thread, waiting for the statement, was interrupted");
            command.console.thread.join(30_000);
            assertFalse(command.console.thread.isAlive(), "the console ends once the statement returns");
        } finally {
            io.stop();
            restore(STARTED, started);
            restore(LAUNCHED, launched);
        }
    }

    private static void restore(String key, String value) {
        if (value == null) {
            System.clearProperty(key);
        } else {
            System.setProperty(key, value);
        }
    }

    /** A framework that has started, with no bundle starting, whose console runs {@code script}. */
    private static BundleContext context(String script) {
        Bundle system = (Bundle) Proxy.newProxyInstance(Bundle.class.getClassLoader(), new Class<?>[] {Bundle.class},
                (proxy, method, args) -> method.getName().equals("getState") ? Bundle.ACTIVE : null);
        return (BundleContext) Proxy.newProxyInstance(BundleContext.class.getClassLoader(), new Class<?>[] {BundleContext.class},
                (proxy, method, args) -> switch (method.getName()) {
                    case "getBundle" -> system;
                    case "getBundles" -> new Bundle[0];
                    case "getProperty" -> Console.COMMAND_PROPERTY.equals(args[0]) ? script : null;
                    default -> null;
                });
    }
}
