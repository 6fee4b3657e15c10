package io.ferrum.memory.launcher;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.osgi.framework.BundleContext;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;

/**
 * Creates the folders FileInstall watches ({@code felix.fileinstall.dir}, a comma-separated list:
 * {@code plugins} and {@code config} under the working directory unless overridden with
 * {@code -Dfelix.fileinstall.dir=...}), so that a fresh distribution is ready for a dropped-in plugin
 * or configuration. FileInstall itself does not create them.
 */
@Component(immediate = true, service = {})
public final class WatchedFolders {
    private static final long DEFAULT_POLL_MS = 2000;

    @Activate
    public WatchedFolders(BundleContext context) {
        for (Path p : of(context)) {
            try {
                Files.createDirectories(p);
            } catch (IOException e) {
                System.err.println("ferrum: cannot create the watched folder " + p + ": " + e.getMessage());
            }
        }
    }

    /** @return the folders FileInstall watches in {@code context}'s framework ({@link #of(String)}) */
    static List<Path> of(BundleContext context) {
        return of(context.getProperty("felix.fileinstall.dir"));
    }

    /**
     * @return FileInstall's poll interval in {@code context}'s framework ({@code felix.fileinstall.poll}),
     *         in milliseconds: 2000 unless set to a number, as FileInstall reads it; 1 at least
     */
    static long pollMillis(BundleContext context) {
        try {
            String p = context.getProperty("felix.fileinstall.poll");
            return p == null ? DEFAULT_POLL_MS : Math.max(1, Long.parseLong(p.strip()));
        } catch (NumberFormatException notANumber) {
            return DEFAULT_POLL_MS; // FileInstall keeps its default then too
        }
    }

    /**
     * @param dirs {@code felix.fileinstall.dir}: a comma-separated list, or null
     * @return its folders, absolute and normalized, in its order; blank entries left out
     */
    static List<Path> of(String dirs) {
        List<Path> folders = new ArrayList<>();
        if (dirs != null) {
            for (String d : dirs.split(",")) {
                if (!d.isBlank()) {
                    folders.add(Path.of(d.strip()).toAbsolutePath().normalize());
                }
            }
        }
        return folders;
    }
}
