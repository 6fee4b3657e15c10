package io.ferrum.memory.pool;

import java.net.URL;
import java.util.Enumeration;

import org.osgi.framework.Bundle;
import org.osgi.framework.FrameworkUtil;

/**
 * Defines every class of a bundle before its objects serve, so that no call needs a class of it
 * later. After a bundle is uninstalled (or updated), the objects of its old revision keep serving the
 * bundles still wired to it until a refresh: the pool's engines serve the backends' managers, a
 * backend's upstream serves its engines, on the callers' threads. Equinox refuses to load a class of
 * a bundle while it is being uninstalled ({@code IllegalStateException: Module has been
 * uninstalled}), so a call that took a path its bundle had not taken before threw that to its caller.
 * Felix still loads them. A backend calls {@link #defineAll} from the static initialiser of a class
 * it initialises before its first manager is made (the pool does it for itself when its first engine
 * is made).
 */
public final class BundleClasses {
    private BundleClasses() {
    }

    /**
     * Defines (without initialising) every class of the bundle that holds {@code anchor}. Outside a
     * framework (no bundle holds it, or the OSGi API is not on the class path) it does nothing.
     *
     * @param anchor a class of the bundle
     */
    public static void defineAll(Class<?> anchor) {
        Bundle bundle;
        try {
            bundle = FrameworkUtil.getBundle(anchor);
        } catch (LinkageError noFramework) {
            return;
        }
        if (bundle == null) {
            return;
        }
        Enumeration<URL> classes = bundle.findEntries("/", "*.class", true);
        ClassLoader loader = anchor.getClassLoader();
        while (classes != null && classes.hasMoreElements()) {
            String path = classes.nextElement().getPath();
            String name = path.substring(path.startsWith("/") ? 1 : 0, path.length() - ".class".length()).replace('/', '.');
            if (name.startsWith("META-INF.") || name.startsWith("OSGI-INF.") || name.endsWith("-info")) {
                continue;
            }
            try {
                Class.forName(name, false, loader);
            } catch (ClassNotFoundException | LinkageError notOurs) {
                // a class that cannot be defined here is one no call of ours needs
            }
        }
    }
}
