package io.ferrum.memory.launcher;

import java.util.Map;

import org.osgi.framework.BundleActivator;
import org.osgi.framework.BundleContext;
import org.osgi.framework.InvalidSyntaxException;
import org.osgi.framework.ServiceEvent;

/**
 * A launcher that comes late to the exit code's callable, forced. The bnd launcher starts the
 * activators named by {@code launch.activators} on its main thread; once the framework is up, that
 * thread marks the launcher's own service {@code launcher.ready=true}, then takes the {@code
 * main.thread} callable ({@link SessionExit}). This activator's listener, told of that change on the
 * main thread, holds it there until the console's thread waits for the launcher before its first statement. A
 * console that does not wait runs its script while the launcher has not taken the callable, however
 * the threads are scheduled. Loaded by the launcher from a jar nested in a copy of the distribution
 * ({@code ConsoleIT}).
 */
public final class LateLauncher implements BundleActivator {
    /** By name: the launcher's class loader, which loads this class, cannot see the bundle's classes. */
    private static final String SESSION_EXIT = "io.ferrum.memory.launcher.SessionExit";
    private static final String CONSOLE = "io.ferrum.memory.launcher.Console";

    @Override
    public void start(BundleContext context) throws InvalidSyntaxException {
        context.addServiceListener(e -> {
            if (e.getType() == ServiceEvent.MODIFIED && "true".equals(e.getServiceReference().getProperty("launcher.ready"))) {
                try {
                    while (!consoleWaitsForTheLauncher()) {
                        Thread.sleep(20);
                    }
                } catch (InterruptedException interrupted) {
                    Thread.currentThread().interrupt();
                }
            }
        }, "(objectClass=aQute.launcher.Launcher)");
    }

    /** @return whether the console's thread is in {@code SessionExit.awaitTaken}, called before its first statement */
    private static boolean consoleWaitsForTheLauncher() {
        for (Map.Entry<Thread, StackTraceElement[]> t : Thread.getAllStackTraces().entrySet()) {
            StackTraceElement[] stack = t.getValue();
            for (int i = 0; t.getKey().getName().equals("ferrum console") && i + 1 < stack.length; i++) {
                if (stack[i].getClassName().equals(SESSION_EXIT) && stack[i].getMethodName().equals("awaitTaken")
                        && stack[i + 1].getClassName().equals(CONSOLE)
                        && stack[i + 1].getMethodName().equals("awaitLauncher")) {
                    return true;
                }
            }
        }
        return false;
    }

    @Override
    public void stop(BundleContext context) {
    }
}
