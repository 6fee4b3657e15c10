package io.ferrum.memory.launcher;

import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;

import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.hooks.bundle.FindHook;

/**
 * Keeps the distribution's own bundles out of FileInstall's reach. FileInstall treats a jar dropped
 * into {@code plugins/} whose symbolic name and version match an installed bundle as an update of
 * that bundle, and uninstalls it when the jar is deleted: a copy of a built-in bundle would replace
 * it, and deleting the copy would remove it. This find hook hides from FileInstall every bundle that
 * did not come from a watched folder, so such a jar is installed as a new bundle, which the framework
 * refuses (its symbolic name and version are not unique; FileInstall logs the refusal) and the
 * built-in bundle stays as it is. Bundles FileInstall installed itself stay visible to it: a jar's
 * and an exploded bundle's, which FileInstall updates and uninstalls by finding them by id.
 *
 * <p>Registered by {@link EarlyHooks} as this bundle starts, not by DS: FileInstall scans
 * {@code plugins/} as soon as it starts, before SCR (which sorts after it at the same start level)
 * could register a component, and a copy already there at start would slip past the guard.
 */
public final class BuiltInBundlesGuard implements FindHook {
    static final String FILEINSTALL = "org.apache.felix.fileinstall";
    /**
     * The scheme of the location FileInstall gives an exploded bundle (a folder in a watched folder),
     * followed by the folder's path; a jar's location is its {@code file:} URL.
     */
    private static final String JARDIR = "jardir:";

    /** The watched folders' URIs ({@link #uris}). */
    private final List<String> watched;

    public BuiltInBundlesGuard(BundleContext context) {
        watched = uris(WatchedFolders.of(context));
    }

    /** @return the URIs of {@code folders}, as {@link #fromWatchedFolder} takes them */
    static List<String> uris(List<Path> folders) {
        List<String> uris = new ArrayList<>();
        for (Path p : folders) {
            uris.add(p.toUri().toString());
        }
        return uris;
    }

    @Override
    public void find(BundleContext context, Collection<Bundle> bundles) {
        if (!FILEINSTALL.equals(context.getBundle().getSymbolicName())) {
            return;
        }
        bundles.removeIf(b -> b.getBundleId() != 0 && !fromWatchedFolder(b.getLocation(), watched));
    }

    /**
     * @param location a bundle's location
     * @param watched  the watched folders' URIs ({@link #uris})
     * @return whether FileInstall installed the bundle from a watched folder: a jar's {@code file:} URL there, or
     *         an exploded bundle's {@code jardir:} location
     */
    static boolean fromWatchedFolder(String location, List<String> watched) {
        String file = location;
        if (location.startsWith(JARDIR)) {
            try {
                file = Path.of(location.substring(JARDIR.length())).toUri().toString();
            } catch (InvalidPathException notAPath) {
                return false;
            }
        }
        for (String w : watched) {
            if (file.startsWith(w) || file.startsWith(w.replace("file:///", "file:/"))) {
                return true;
            }
        }
        return false;
    }
}
