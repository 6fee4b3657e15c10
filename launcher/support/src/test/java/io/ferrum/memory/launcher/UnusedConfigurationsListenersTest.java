package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.Proxy;
import java.util.Map;

import org.junit.jupiter.api.Test;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.BundleEvent;
import org.osgi.framework.BundleListener;
import org.osgi.framework.ServiceEvent;
import org.osgi.framework.ServiceListener;
import org.osgi.framework.ServiceReference;
import org.osgi.service.cm.ConfigurationAdmin;
import org.osgi.service.log.Logger;
import org.osgi.service.metatype.MetaTypeService;

/**
 * Felix delivers bundle events on a thread of its own, so {@link UnusedConfigurations}' listeners
 * may run after its deactivation, or during it, when its bundle's context is no longer valid. Each
 * such call threw "Invalid BundleContext" into Felix's event dispatcher, which printed the stack
 * trace as the distribution stopped (seen in 2 of 3 runs with a file waiting for a plugin). The
 * framework's side is played by proxies here, to call a listener at exactly those moments.
 */
class UnusedConfigurationsListenersTest {
    /** A bundle context that stops being valid when told to, as Felix's does once its bundle stopped. */
    private static final class Context {
        volatile boolean valid = true;
        /** What {@code getAllServiceReferences} answers (null: none). */
        volatile ServiceReference<?>[] managedServices;
        /** Run on the first {@code getBundles} call (a deactivation racing a listener), then cleared. */
        volatile Runnable onGetBundles;
        final Bundle bundle = proxy(Bundle.class, (p, m, a) -> switch (m.getName()) {
            case "getState" -> Bundle.RESOLVED; // the framework has not started: nothing is checked at activation
            case "getSymbolicName" -> "test";
            case "getHeaders" -> new java.util.Hashtable<String, String>(); // no component descriptions
            case "hashCode" -> 1;
            case "equals" -> p == a[0];
            default -> null;
        });
        final BundleContext context = proxy(BundleContext.class, (p, m, a) -> {
            if (m.getName().equals("getBundles") && onGetBundles != null) {
                Runnable r = onGetBundles;
                onGetBundles = null;
                r.run();
            }
            if (!valid) {
                throw new IllegalStateException("Invalid BundleContext.");
            }
            return switch (m.getName()) {
                case "getBundle" -> bundle;
                case "getBundles" -> new Bundle[] {bundle};
                case "getAllServiceReferences" -> managedServices;
                default -> null;
            };
        });
    }

    @SuppressWarnings("unchecked")
    private static <T> T proxy(Class<T> type, java.lang.reflect.InvocationHandler h) {
        return (T) Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, h);
    }

    private static UnusedConfigurations checkWithAFileWaiting(Context c) throws Exception {
        return checkWithAFileWaiting(c, proxy(Logger.class, (p, m, a) -> null));
    }

    private static UnusedConfigurations checkWithAFileWaiting(Context c, Logger log) throws Exception {
        UnusedConfigurations check = new UnusedConfigurations(c.context, proxy(ConfigurationAdmin.class, (p, m, a) -> null),
                proxy(MetaTypeService.class, (p, m, a) -> null), log);
        Class<?> waiting = Class.forName(UnusedConfigurations.class.getName() + "$Waiting");
        Constructor<?> make = waiting.getDeclaredConstructors()[0];
        make.setAccessible(true);
        @SuppressWarnings("unchecked")
        Map<String, Object> files = (Map<String, Object>) field(check, "waiting");
        files.put("io.ferrum.memory.extra x.cfg", make.newInstance("io.ferrum.memory.extra", "io.ferrum.memory.extra", false, "x.cfg"));
        return check;
    }

    private static Object field(UnusedConfigurations check, String name) throws Exception {
        Field f = UnusedConfigurations.class.getDeclaredField(name);
        f.setAccessible(true);
        return f.get(check);
    }

    @Test
    void aBundleOrServiceEventDeliveredAfterTheDeactivationSaysNothing() throws Exception {
        Context c = new Context();
        UnusedConfigurations check = checkWithAFileWaiting(c);
        check.deactivate();
        c.valid = false;
        BundleListener arrivals = (BundleListener) field(check, "arrivals");
        ServiceListener services = (ServiceListener) field(check, "managedServices");
        assertDoesNotThrow(() -> arrivals.bundleChanged(new BundleEvent(BundleEvent.STARTED, c.bundle)),
                "a bundle event after the deactivation");
        ServiceReference<?> ref = proxy(ServiceReference.class, (p, m, a) -> null);
        assertDoesNotThrow(() -> services.serviceChanged(new ServiceEvent(ServiceEvent.REGISTERED, ref)),
                "a service event after the deactivation");
    }

    @Test
    void aDeactivationDuringABundleEventEndsItQuietly() throws Exception {
        Context c = new Context();
        UnusedConfigurations check = checkWithAFileWaiting(c);
        c.onGetBundles = () -> { // the listener has begun; now the bundle stops
            check.deactivate();
            c.valid = false;
        };
        BundleListener arrivals = (BundleListener) field(check, "arrivals");
        assertDoesNotThrow(() -> arrivals.bundleChanged(new BundleEvent(BundleEvent.STARTED, c.bundle)));
    }

    /**
     * A managed service registered without its {@code service.pid} and given it later ({@code
     * setProperties}) is a MODIFIED event: the file waiting for that PID applies from then on, and
     * was never said to.
     */
    @Test
    void aManagedServiceGivenItsPidAfterItsRegistrationTakesTheWaitingFileBack() throws Exception {
        Context c = new Context();
        java.util.List<String> warnings = new java.util.concurrent.CopyOnWriteArrayList<>();
        Logger log = proxy(Logger.class, (p, m, a) -> {
            if (m.getName().equals("warn") && a != null && a.length > 0) {
                warnings.add(String.valueOf(a[0]));
            }
            return null;
        });
        UnusedConfigurations check = checkWithAFileWaiting(c, log);
        ServiceReference<?> ref = proxy(ServiceReference.class, (p, m, a) -> m.getName().equals("getBundle") ? c.bundle : null);
        c.managedServices = new ServiceReference<?>[] {ref};
        ServiceListener services = (ServiceListener) field(check, "managedServices");
        services.serviceChanged(new ServiceEvent(ServiceEvent.MODIFIED, ref));
        assertEquals(1, warnings.size(), "the waiting file was said to apply: " + warnings);
        assertTrue(warnings.get(0).contains("applies"), warnings.get(0));
    }

    /** Only a deactivated component's invalid context is nothing to say: any other failure still shows. */
    @Test
    void anInvalidContextWhileActiveIsNotHidden() throws Exception {
        Context c = new Context();
        UnusedConfigurations check = checkWithAFileWaiting(c);
        c.valid = false;
        BundleListener arrivals = (BundleListener) field(check, "arrivals");
        assertThrows(IllegalStateException.class, () -> arrivals.bundleChanged(new BundleEvent(BundleEvent.STARTED, c.bundle)));
    }
}
