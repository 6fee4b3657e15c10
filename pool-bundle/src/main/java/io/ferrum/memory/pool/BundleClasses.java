package io.ferrum.memory.pool;

import java.net.URL;
import java.util.List;

import org.osgi.framework.Bundle;
import org.osgi.framework.FrameworkUtil;
import org.osgi.framework.namespace.PackageNamespace;
import org.osgi.framework.wiring.BundleRevision;
import org.osgi.framework.wiring.BundleRevisions;
import org.osgi.framework.wiring.BundleWire;
import org.osgi.framework.wiring.BundleWiring;

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
 *
 * <p>The same holds across bundles: the first time a class of a bundle names a class of a package it
 * imports, its class loader asks the exporter's, and Equinox's refuses while the exporter is being
 * uninstalled, even for a class it defined long before (the API's, or the pool's SPI for a backend).
 * So the classes of every package the bundle imports from another bundle are asked for through the
 * bundle's own loader too; the loader then holds them and asks no one again.
 */
public final class BundleClasses {
    private BundleClasses() {
    }

    /**
     * Defines (without initialising) every class of the bundle that holds {@code anchor}, and has its
     * class loader load every class of each package it imports from another bundle (not from the
     * framework, which is never uninstalled). Outside a framework (no bundle holds it, or the OSGi API
     * is not on the class path) it does nothing.
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
        BundleWiring wiring = bundle == null ? null : wiringOf(bundle, anchor.getClassLoader());
        if (wiring == null) {
            return; // not in a framework, or that revision is refreshed away: no call reaches it
        }
        ClassLoader loader = wiring.getClassLoader();
        load(wiring, "/", BundleWiring.FINDENTRIES_RECURSE, loader);
        List<BundleWire> wires = wiring.getRequiredWires(PackageNamespace.PACKAGE_NAMESPACE);
        // Null once the wiring is no longer in use (refreshed away meanwhile): nothing to load for it.
        for (BundleWire wire : wires == null ? List.<BundleWire>of() : wires) {
            BundleWiring exporter = wire.getProviderWiring();
            Object name = wire.getCapability().getAttributes().get(PackageNamespace.PACKAGE_NAMESPACE);
            if (exporter != null && exporter.getRevision().getBundle().getBundleId() != 0 && name instanceof String pkg) {
                load(exporter, pkg.replace('.', '/'), 0, loader);
            }
        }
    }

    /** @return the wiring of {@code bundle} whose class loader is {@code loader} (a revision may be older than the bundle's current one) */
    private static BundleWiring wiringOf(Bundle bundle, ClassLoader loader) {
        BundleRevisions revisions = bundle.adapt(BundleRevisions.class);
        for (BundleRevision revision : revisions == null ? List.<BundleRevision>of() : revisions.getRevisions()) {
            BundleWiring wiring = revision.getWiring();
            if (wiring != null && wiring.getClassLoader() == loader) {
                return wiring;
            }
        }
        return null;
    }

    /** Loads through {@code loader} every class under {@code path} of {@code wiring}'s revision. */
    private static void load(BundleWiring wiring, String path, int options, ClassLoader loader) {
        List<URL> classes = wiring.findEntries(path, "*.class", options);
        for (URL url : classes == null ? List.<URL>of() : classes) {
            String entry = url.getPath();
            String name = entry.substring(entry.startsWith("/") ? 1 : 0, entry.length() - ".class".length()).replace('/', '.');
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
