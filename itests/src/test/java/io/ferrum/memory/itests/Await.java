package io.ferrum.memory.itests;

import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.fail;

import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.osgi.framework.BundleContext;
import org.osgi.framework.InvalidSyntaxException;
import org.osgi.util.tracker.ServiceTracker;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;

/** Waiting for the asynchronous parts of OSGi (service events, SCR, Config Admin, Event Admin). */
final class Await {
    /** A guard against a hang, never a figure a test asserts on: a loaded machine may take many seconds. */
    static final long TIMEOUT_MS = 30_000;

    private Await() {
    }

    static String deviceFilter(Class<?> type, Device device) {
        return "(&(objectClass=" + type.getName() + ")(" + DeviceMemoryManager.DEVICE_PROPERTY + "=" + device + "))";
    }

    /** @return the service of {@code type} for {@code device}, once it is registered */
    static <T> T service(BundleContext context, Class<T> type, Device device) throws Exception {
        return service(context, type, deviceFilter(type, device));
    }

    /** @return the first service matching {@code filter}, once it is registered */
    static <T> T service(BundleContext context, Class<T> type, String filter) throws Exception {
        ServiceTracker<T, T> t = new ServiceTracker<>(context, context.createFilter(filter), null);
        t.open();
        try {
            T service = t.waitForService(TIMEOUT_MS);
            assertNotNull(type.getSimpleName() + " matching " + filter + " did not appear", service);
            return service;
        } finally {
            t.close();
        }
    }

    /** Waits until no {@code type} service for {@code device} is registered. */
    static void gone(BundleContext context, Class<?> type, Device device) throws Exception {
        until("no " + type.getSimpleName() + " for " + device, () -> {
            try {
                return context.getServiceReferences(type.getName(),
                        "(" + DeviceMemoryManager.DEVICE_PROPERTY + "=" + device + ")") == null;
            } catch (InvalidSyntaxException e) {
                throw new IllegalStateException(e);
            }
        });
    }

    /** @return the installed bundle with that symbolic name */
    static org.osgi.framework.Bundle installed(BundleContext context, String symbolicName) {
        for (org.osgi.framework.Bundle b : context.getBundles()) {
            if (symbolicName.equals(b.getSymbolicName())) {
                return b;
            }
        }
        throw new AssertionError(symbolicName + " is not installed");
    }

    /** Waits until {@code condition} holds. */
    static void until(String what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(TIMEOUT_MS);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("timed out waiting for " + what);
            }
            Thread.sleep(10);
        }
    }
}
