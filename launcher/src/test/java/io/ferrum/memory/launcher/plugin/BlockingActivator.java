package io.ferrum.memory.launcher.plugin;

import org.osgi.framework.Bundle;
import org.osgi.framework.BundleActivator;
import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;

/**
 * The activator of a plugin bundle that {@code ConsoleIT} builds: its start does not return until the framework
 * begins to stop, as an activator waiting on something that never comes (a device, a peer, a lock) does; the
 * bundle stays STARTING meanwhile.
 */
public final class BlockingActivator implements BundleActivator {
    @Override
    public void start(BundleContext context) throws InterruptedException {
        Bundle system = context.getBundle(Constants.SYSTEM_BUNDLE_ID);
        while (system.getState() != Bundle.STOPPING && system.getState() != Bundle.RESOLVED) {
            Thread.sleep(20);
        }
    }

    @Override
    public void stop(BundleContext context) {
    }
}
