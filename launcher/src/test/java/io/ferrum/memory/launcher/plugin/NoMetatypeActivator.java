package io.ferrum.memory.launcher.plugin;

import java.util.Dictionary;
import java.util.Hashtable;

import org.osgi.framework.BundleActivator;
import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;
import org.osgi.service.cm.ManagedService;
import org.osgi.service.cm.ManagedServiceFactory;

/**
 * The activator of the plugin bundle that {@code DistributionIT} builds: registers itself as a
 * managed service and as a managed service factory, with no metatype, and prints what it gets.
 */
public final class NoMetatypeActivator implements BundleActivator, ManagedService, ManagedServiceFactory {
    public static final String MANAGED_PID = "io.ferrum.memory.extra.managed";
    public static final String FACTORY_PID = "io.ferrum.memory.extra.device";

    @Override
    public void start(BundleContext context) {
        context.registerService(ManagedService.class, this, pid(MANAGED_PID));
        context.registerService(ManagedServiceFactory.class, this, pid(FACTORY_PID));
    }

    @Override
    public void stop(BundleContext context) {
    }

    private static Dictionary<String, Object> pid(String pid) {
        Hashtable<String, Object> p = new Hashtable<>();
        p.put(Constants.SERVICE_PID, pid);
        return p;
    }

    @Override
    public void updated(Dictionary<String, ?> properties) {
        if (properties != null) {
            System.out.println("plugin managed service got size=" + properties.get("size"));
        }
    }

    @Override
    public String getName() {
        return "no metatype";
    }

    @Override
    public void updated(String pid, Dictionary<String, ?> properties) {
        System.out.println("plugin managed service factory got size=" + properties.get("size"));
    }

    @Override
    public void deleted(String pid) {
    }
}
