package io.ferrum.memory.itests;

import static org.junit.Assert.assertTrue;

import java.io.InputStream;
import java.lang.reflect.Method;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Enumeration;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.junit.Assume;
import org.osgi.framework.Bundle;
import org.osgi.framework.namespace.PackageNamespace;
import org.osgi.framework.wiring.BundleWire;
import org.osgi.framework.wiring.BundleWiring;

/**
 * The classes of a bundle its class loader has not defined yet, on Equinox. Equinox refuses to load a
 * class of a bundle while it is being uninstalled ("Module has been uninstalled"), and the objects of a
 * stopped bundle can still serve other bundles' calls until a refresh: such a call must never need a
 * class of it that is not defined yet. Equinox's {@code ModuleClassLoader.publicFindLoaded} answers
 * without loading; Felix's loader cannot say what it defined without defining it, so there the check
 * is skipped. Felix loads classes of an uninstalled bundle that others still import from, but a bundle
 * nobody imports from (the shell, a backend, a strategy) has its wiring discarded at its uninstall on
 * both frameworks and defines nothing after it ({@code ShellIT.aCommandRunningWhileTheShellIsUninstalledEndsWithItsOwnReply}):
 * what these lists find matters on Felix too.
 */
final class UndefinedClasses {
    private UndefinedClasses() {
    }

    /**
     * @param bundle      the bundle whose classes to list
     * @param atLeast     fewer classes than this in the bundle means the listing itself went wrong
     * @return the names of the classes of {@code bundle} (under {@code io/ferrum/memory}) its class
     *         loader has not defined; the test is skipped where the framework is not Equinox
     */
    static List<String> of(Bundle bundle, int atLeast) throws Exception {
        ClassLoader loader = bundle.adapt(BundleWiring.class).getClassLoader();
        Method findLoaded;
        try {
            findLoaded = loader.getClass().getMethod("publicFindLoaded", String.class);
        } catch (NoSuchMethodException notEquinox) {
            Assume.assumeTrue("only Equinox's loader tells what it defined without defining it", false);
            return List.of();
        }
        List<String> undefined = new ArrayList<>();
        int classes = 0;
        for (Enumeration<URL> e = bundle.findEntries("io/ferrum/memory", "*.class", true); e != null && e.hasMoreElements(); ) {
            String path = e.nextElement().getPath();
            String name = path.substring(path.startsWith("/") ? 1 : 0, path.length() - ".class".length()).replace('/', '.');
            if (!name.endsWith("package-info")) {
                classes++;
                if (findLoaded.invoke(loader, name) == null) {
                    undefined.add(name);
                }
            }
        }
        assertTrue(bundle.getSymbolicName() + "'s classes: " + classes, classes >= atLeast);
        return undefined;
    }

    /**
     * The first time a class of {@code importer} names a class of a package it imports, its loader
     * asks the exporter's, and Equinox's refuses while the exporter is being uninstalled, even for a
     * class it defined long before. A loader that loaded a class once holds it and asks no one again.
     *
     * @return the classes of every package {@code importer} imports from a bundle other than the
     *         framework that its class loader has not loaded yet; the test is skipped where the
     *         framework is not Equinox
     */
    static List<String> ofImports(Bundle importer) throws Exception {
        BundleWiring wiring = importer.adapt(BundleWiring.class);
        Method findLoaded;
        try {
            findLoaded = wiring.getClassLoader().getClass().getMethod("publicFindLoaded", String.class);
        } catch (NoSuchMethodException notEquinox) {
            Assume.assumeTrue("only Equinox's loader tells what it defined without defining it", false);
            return List.of();
        }
        List<String> notLoaded = new ArrayList<>();
        for (BundleWire wire : wiring.getRequiredWires(PackageNamespace.PACKAGE_NAMESPACE)) {
            if (wire.getProvider().getBundle().getBundleId() == 0) {
                continue;
            }
            String pkg = (String) wire.getCapability().getAttributes().get(PackageNamespace.PACKAGE_NAMESPACE);
            for (URL url : wire.getProviderWiring().findEntries(pkg.replace('.', '/'), "*.class", 0)) {
                String path = url.getPath();
                String name = pkg + "." + path.substring(path.lastIndexOf('/') + 1, path.length() - ".class".length());
                if (!name.endsWith("-info") && findLoaded.invoke(wiring.getClassLoader(), name) == null) {
                    notLoaded.add(name);
                }
            }
        }
        return notLoaded;
    }

    /**
     * Like {@link #ofImports}, but only the imported classes that a class of {@code importer} names
     * (in its class file's constants: a class, a field's or a method's type), for a bundle that cannot
     * load all it imports because it imports only the API: the classes a call of it could ask its
     * exporter for.
     *
     * @param skip the prefix of the names of the importer's own classes a framework never loads, or
     *             null for none
     */
    static List<String> ofImportsNamed(Bundle importer, String skip) throws Exception {
        Set<String> named = new TreeSet<>();
        Pattern className = Pattern.compile("[A-Za-z_][\\w$]*(?:/[A-Za-z_][\\w$]*)+");
        for (Enumeration<URL> e = importer.findEntries("io/ferrum/memory", "*.class", true); e != null && e.hasMoreElements(); ) {
            URL url = e.nextElement();
            String path = url.getPath();
            if (skip != null && path.substring(path.startsWith("/") ? 1 : 0).replace('/', '.').startsWith(skip)) {
                continue;
            }
            byte[] bytes;
            try (InputStream in = url.openStream()) {
                bytes = in.readAllBytes();
            }
            Matcher m = className.matcher(new String(bytes, StandardCharsets.ISO_8859_1));
            while (m.find()) {
                named.add(m.group().replace('/', '.'));
            }
        }
        List<String> notLoaded = new ArrayList<>(ofImports(importer));
        notLoaded.retainAll(named);
        return notLoaded;
    }
}
