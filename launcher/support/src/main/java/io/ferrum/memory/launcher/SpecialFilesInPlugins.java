package io.ferrum.memory.launcher;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Hashtable;
import java.util.Locale;

import org.apache.felix.fileinstall.ArtifactInstaller;
import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;
import org.osgi.framework.ServiceRegistration;
import org.osgi.service.log.LoggerFactory;
import org.osgi.util.tracker.ServiceTracker;

/**
 * Refuses, unopened and in one error line, a named pipe, a socket or a device named as a bundle jar
 * in a watched folder ({@code mkfifo plugins/x.jar}). FileInstall's own bundle installer opens every
 * {@code .jar} as a zip to see whether it takes it, and an open of a pipe waits for a writer: at start
 * FileInstall's first scan runs on the framework's start-level thread, and the distribution hung for
 * good. A configuration file that is no regular file is {@link ConfigFileGate}'s.
 *
 * <p>It stands before FileInstall's installers by a higher service ranking than the gate's, so it is
 * registered by {@link EarlyHooks}, before FileInstall starts. A file saved in the entry's place is
 * installed ({@link ClaimingInstaller}).
 */
final class SpecialFilesInPlugins extends ClaimingInstaller {
    private final BundleContext context;
    private final ServiceTracker<LoggerFactory, LoggerFactory> logs;

    SpecialFilesInPlugins(BundleContext context) {
        super(WatchedFolders.of(context));
        this.context = context;
        logs = new ServiceTracker<>(context, LoggerFactory.class, null);
    }

    ServiceRegistration<ArtifactInstaller> register() {
        logs.open();
        Hashtable<String, Object> props = new Hashtable<>();
        props.put(Constants.SERVICE_RANKING, 2);
        return context.registerService(ArtifactInstaller.class, this, props);
    }

    void close() {
        logs.close();
    }

    /** @return whether {@code artifact} is named as a jar and is there, but neither a regular file nor a folder */
    @Override
    public boolean canHandle(File artifact) {
        Path p = artifact.toPath();
        return artifact.getName().toLowerCase(Locale.ROOT).endsWith(".jar") && Files.exists(p) && !Files.isRegularFile(p)
                && !Files.isDirectory(p);
    }

    @Override
    void report(File artifact) {
        error(ControlCharacters.escaped(artifact.getAbsolutePath()) + " is not installed: it is not a regular"
                + " file (a pipe, a socket or a device), which FileInstall would wait on for ever, and the distribution"
                + " with it; put a bundle jar in its place or remove it");
    }

    @Override
    void error(String message) {
        LoggerFactory factory = logs.getService();
        if (factory != null) {
            factory.getLogger(SpecialFilesInPlugins.class).error("{}", message);
        } else {
            System.err.println("ERROR: " + message);
        }
    }
}
