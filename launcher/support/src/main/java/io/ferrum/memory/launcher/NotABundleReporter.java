package io.ferrum.memory.launcher;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.jar.JarFile;
import java.util.jar.Manifest;

import org.apache.felix.fileinstall.ArtifactInstaller;
import org.osgi.framework.BundleContext;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.log.Logger;
import org.osgi.service.log.LoggerFactory;

/**
 * Says why a {@code .jar} in a watched folder ({@code plugins/}) is not installed when it is no
 * bundle: an empty file, a file that is no readable jar, or a jar whose manifest has no
 * {@code Bundle-SymbolicName}. FileInstall itself says nothing of such a file, at any log level: it
 * defers a file no installer claims and asks again at every poll. This installer claims exactly
 * those files (never a jar with a symbolic name, which FileInstall's own bundle installer takes,
 * and never a configuration file), and logs one error line for each version of one; a bundle saved in
 * its place is installed, also after a restart of this bundle ({@link ClaimingInstaller}).
 */
@Component(service = ArtifactInstaller.class)
public final class NotABundleReporter extends ClaimingInstaller {
    private final Logger log;

    @Activate
    public NotABundleReporter(BundleContext context, @Reference(service = LoggerFactory.class) Logger log) {
        this(WatchedFolders.of(context), log);
        claimAgainIfRestarted(context);
    }

    /** @param watched the watched folders, absolute and normalized */
    NotABundleReporter(List<Path> watched, Logger log) {
        super(watched);
        this.log = log;
    }

    @Override
    void error(String line) {
        log.error("{}", line);
    }

    @Override
    public boolean canHandle(File artifact) {
        return takenAgain(artifact) || claims(artifact);
    }

    /** @return whether {@code entry} is a regular file of a watched folder named as a jar that is no bundle */
    @Override
    boolean claims(File entry) {
        return entry.getName().toLowerCase(java.util.Locale.ROOT).endsWith(".jar")
                && entry.getAbsoluteFile().getParentFile() != null
                && watched.contains(entry.getAbsoluteFile().getParentFile().toPath().normalize())
                && Files.isRegularFile(entry.toPath())
                && whyNotABundle(entry) != null;
    }

    @Override
    void report(File artifact) {
        String why = whyNotABundle(artifact);
        if (why != null) {
            log.error("{} is not installed: {}; put a bundle jar in its place or remove it", ControlCharacters.escaped(artifact.getAbsolutePath()), ControlCharacters.escaped(why));
        }
    }

    /** @return why {@code file} is no bundle FileInstall could install, or null when it may be one */
    static String whyNotABundle(File file) {
        if (file.length() == 0) {
            return "it is empty (0 bytes)";
        }
        try (JarFile jar = new JarFile(file)) {
            Manifest m = jar.getManifest();
            if (m == null) {
                return "it is no OSGi bundle: the jar has no manifest (META-INF/MANIFEST.MF)";
            }
            if (m.getMainAttributes().getValue("Bundle-SymbolicName") == null) {
                return "it is no OSGi bundle: its manifest has no Bundle-SymbolicName";
            }
            return null;
        } catch (IOException | SecurityException e) {
            return "it is no readable jar (" + e.getClass().getSimpleName()
                    + (e.getMessage() == null ? "" : ": " + e.getMessage()) + ")";
        }
    }
}
