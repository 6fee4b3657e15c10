package io.ferrum.memory.launcher;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

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

    @Activate
    public WatchedFolders(BundleContext context) {
        String dirs = context.getProperty("felix.fileinstall.dir");
        if (dirs == null) {
            return;
        }
        for (String d : dirs.split(",")) {
            if (d.isBlank()) {
                continue;
            }
            Path p = Path.of(d.strip()).toAbsolutePath();
            try {
                Files.createDirectories(p);
            } catch (IOException e) {
                System.err.println("ferrum: cannot create the watched folder " + p + ": " + e.getMessage());
            }
        }
    }
}
