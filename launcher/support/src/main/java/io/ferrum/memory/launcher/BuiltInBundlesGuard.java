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

    private final List<String> watched = new ArrayList<>();

    public BuiltInBundlesGuard(BundleContext context) {
        for (Path p : WatchedFolders.of(context)) {
            watched.add(p.toUri().toString());
        }
    }

    @Override
    public void find(BundleContext context, Collection<Bundle> bundles) {
        if (!FILEINSTALL.equals(context.getBundle().getSymbolicName())) {
            return;
        }
        bundles.removeIf(b -> b.getBundleId() != 0 && !fromWatchedFolder(b.getLocation()));
    }

    private boolean fromWatchedFolder(String location) {
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
