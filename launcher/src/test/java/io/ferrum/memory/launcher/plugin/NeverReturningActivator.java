package io.ferrum.memory.launcher.plugin;

import java.util.concurrent.CountDownLatch;

import org.osgi.framework.BundleActivator;
import org.osgi.framework.BundleContext;

/**
 * The activator of the plugin bundles that {@code ConsoleIT} builds to hold the framework's stop: its {@code start}
 * (bundle {@code io.ferrum.memory.test.neverstarts}) or its {@code stop} (any other bundle) waits on a latch that
 * nothing counts down, and ignores interrupts, as an activator waiting on something that never comes (a device, a peer,
 * a lock) does. Each bundle holds its own copy of this class, so the two never share the latch.
 */
public final class NeverReturningActivator implements BundleActivator {
    /** Never counted down. */
    private static final CountDownLatch NEVER = new CountDownLatch(1);

    @Override
    public void start(BundleContext context) {
        if ("io.ferrum.memory.test.neverstarts".equals(context.getBundle().getSymbolicName())) {
            waitForever();
        }
    }

    @Override
    public void stop(BundleContext context) {
        waitForever();
    }

    private static void waitForever() {
        while (true) {
            try {
                NEVER.await();
            } catch (InterruptedException ignored) {
                // Such an activator does not take an interrupt for an answer either.
            }
        }
    }
}
