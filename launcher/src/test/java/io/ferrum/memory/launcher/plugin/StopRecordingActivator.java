package io.ferrum.memory.launcher.plugin;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

import org.osgi.framework.BundleActivator;
import org.osgi.framework.BundleContext;

/**
 * The activator of a plugin bundle that {@code ConsoleIT} builds to see whether the framework's stop ran its stop: it
 * writes {@code stopped SYMBOLIC-NAME} into the file {@code stopped.txt} of the working folder, as a plugin that holds
 * native memory or files releases them.
 */
public final class StopRecordingActivator implements BundleActivator {
    @Override
    public void start(BundleContext context) {
    }

    @Override
    public void stop(BundleContext context) throws IOException {
        Files.writeString(Path.of("stopped.txt"), "stopped " + context.getBundle().getSymbolicName() + "\n");
    }
}
