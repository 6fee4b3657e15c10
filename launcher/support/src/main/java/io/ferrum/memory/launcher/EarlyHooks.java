package io.ferrum.memory.launcher;

import org.osgi.framework.BundleActivator;
import org.osgi.framework.BundleContext;
import org.osgi.framework.ServiceRegistration;
import org.osgi.framework.hooks.bundle.FindHook;

/**
 * Registers the hooks that must be in place before FileInstall's first scan of {@code plugins/}:
 * this bundle starts at start level 5, FileInstall at 10, and SCR (after FileInstall at that level)
 * too late for a DS component to be there first.
 */
public final class EarlyHooks implements BundleActivator {
    private ServiceRegistration<FindHook> guard;

    @Override
    public void start(BundleContext context) {
        guard = context.registerService(FindHook.class, new BuiltInBundlesGuard(context), null);
    }

    @Override
    public void stop(BundleContext context) {
        guard.unregister();
    }
}
