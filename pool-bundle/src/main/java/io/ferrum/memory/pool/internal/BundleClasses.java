package io.ferrum.memory.pool.internal;

import java.net.URL;
import java.util.Enumeration;

import org.osgi.framework.Bundle;
import org.osgi.framework.FrameworkUtil;

/**
 * Defines every class of this bundle when its first engine is made, so that no call needs a class of
 * it later. After the pool bundle is uninstalled (or updated), the backends still wired to its old
 * revision keep serving until a refresh, through engines of that revision; Equinox refuses to load a
 * class of an uninstalled bundle ({@code IllegalStateException: Module has been uninstalled}), so a
 * free that took a path the engine had not taken before ({@code Scopes} in the free's last step)
 * threw it to the caller. Felix still loads them. Outside a framework there is nothing to do.
 */
final class BundleClasses {
    private BundleClasses() {
    }

    /**
     * Defines (without initialising) every class of the bundle that holds {@code anchor}, if in one.
     *
     * @throws LinkageError where the OSGi API is not on the class path (not in a framework)
     */
    static void defineAll(Class<?> anchor) {
        Bundle bundle = FrameworkUtil.getBundle(anchor);
        if (bundle == null) {
            return;
        }
        Enumeration<URL> classes = bundle.findEntries("io/ferrum/memory/pool", "*.class", true);
        ClassLoader loader = anchor.getClassLoader();
        while (classes != null && classes.hasMoreElements()) {
            String path = classes.nextElement().getPath();
            String name = path.substring(path.startsWith("/") ? 1 : 0, path.length() - ".class".length()).replace('/', '.');
            if (name.endsWith("package-info")) {
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
