package io.ferrum.memory.monitor;

import org.osgi.framework.Bundle;
import org.osgi.framework.ServiceFactory;
import org.osgi.framework.ServiceRegistration;

/**
 * The {@link io.ferrum.memory.api.GlobalMemoryMonitor} and {@link io.ferrum.memory.api.MemoryRouter}
 * services: bundle-scoped, so that the framework gives each bundle its own {@link MonitorView} of the
 * one monitor and calls {@link #ungetService} when that bundle releases it, on stopping at the latest.
 * That is where what the bundle registered by hand is undone: a stopped bundle's manager, which its
 * owner may have closed, must not keep serving its device, nor its callback keep its classes alive.
 */
final class MonitorViews implements ServiceFactory<MonitorView> {
    private final MemoryMonitor monitor;

    MonitorViews(MemoryMonitor monitor) {
        this.monitor = monitor;
    }

    @Override
    public MonitorView getService(Bundle bundle, ServiceRegistration<MonitorView> registration) {
        return new MonitorView(monitor, bundle == null ? "a bundle" : "bundle " + bundle.getSymbolicName()
                + " [" + bundle.getBundleId() + "]");
    }

    @Override
    public void ungetService(Bundle bundle, ServiceRegistration<MonitorView> registration, MonitorView view) {
        view.release();
    }
}
