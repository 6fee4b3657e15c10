package io.ferrum.memory.launcher.plugin;

import org.osgi.framework.BundleActivator;
import org.osgi.framework.BundleContext;

/**
 * The activator of a plugin bundle that {@code ConsoleIT} builds to see whether a command restarted it: each start
 * prints {@code started SYMBOLIC-NAME VERSION} on the starting thread's standard output, which in a script is the
 * statement's.
 */
public final class StartCountingActivator implements BundleActivator {
    @Override
    public void start(BundleContext context) {
        System.out.println("started " + context.getBundle().getSymbolicName() + " " + context.getBundle().getVersion());
    }

    @Override
    public void stop(BundleContext context) {
    }
}
