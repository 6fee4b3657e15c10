package io.ferrum.memory.launcher;

import java.io.File;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Hashtable;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.felix.fileinstall.ArtifactInstaller;
import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;
import org.osgi.framework.InvalidSyntaxException;
import org.osgi.framework.ServiceReference;
import org.osgi.framework.ServiceRegistration;
import org.osgi.service.cm.Configuration;
import org.osgi.service.cm.ConfigurationAdmin;
import org.osgi.service.cm.ConfigurationListener;
import org.osgi.service.log.Logger;
import org.osgi.service.log.LoggerFactory;
import org.osgi.util.tracker.ServiceTracker;

/**
 * Refuses, in one error line, a file in the watched folders that gives two keys differing only in case
 * ({@code capacity=64m} and {@code Capacity=1g}). Config Admin takes keys in any case as one and refuses
 * such a dictionary with IllegalArgumentException, which FileInstall logged as an error with two stack
 * traces naming one of the keys. This installer stands before FileInstall's own configuration installer
 * (a higher service ranking: FileInstall asks its installers in that order for a new file, and keeps
 * asking the one that took it) and hands it every file but those: a new one makes no configuration, an
 * edited one leaves the configuration made of it before as it was; the file fixed, it applies.
 *
 * <p>Registered by {@link EarlyHooks} before FileInstall starts: a file taken by FileInstall's installer
 * at its first scan would stay with it.
 */
final class KeysDifferingInCase implements ArtifactInstaller {
    private static final String FILEINSTALL = "org.apache.felix.fileinstall";

    private final BundleContext context;
    /** FileInstall's configuration installer: its ArtifactInstaller that is a ConfigurationListener too. */
    private final ServiceTracker<ArtifactInstaller, ArtifactInstaller> configInstaller;
    private final ServiceTracker<LoggerFactory, LoggerFactory> logs;
    /** The files refused before any configuration was made of them: deleting one deletes nothing. */
    private final Set<File> neverApplied = ConcurrentHashMap.newKeySet();

    KeysDifferingInCase(BundleContext context) {
        this.context = context;
        try {
            configInstaller = new ServiceTracker<>(context, context.createFilter("(&(" + Constants.OBJECTCLASS + "="
                    + ArtifactInstaller.class.getName() + ")(" + Constants.OBJECTCLASS + "="
                    + ConfigurationListener.class.getName() + "))"), null) {
                @Override
                public ArtifactInstaller addingService(ServiceReference<ArtifactInstaller> ref) {
                    return FILEINSTALL.equals(ref.getBundle().getSymbolicName()) ? super.addingService(ref) : null;
                }
            };
        } catch (InvalidSyntaxException cannotBe) {
            throw new IllegalStateException(cannotBe);
        }
        logs = new ServiceTracker<>(context, LoggerFactory.class, null);
    }

    /** Starts tracking FileInstall's installer and registers this one before it. */
    ServiceRegistration<ArtifactInstaller> register() {
        configInstaller.open();
        logs.open();
        Hashtable<String, Object> props = new Hashtable<>();
        props.put(Constants.SERVICE_RANKING, 1);
        return context.registerService(ArtifactInstaller.class, this, props);
    }

    void close() {
        configInstaller.close();
        logs.close();
    }

    @Override
    public boolean canHandle(File artifact) {
        ArtifactInstaller delegate = configInstaller.getService();
        return delegate != null && delegate.canHandle(artifact);
    }

    @Override
    public void install(File artifact) throws Exception {
        if (!refused(artifact)) {
            delegate().install(artifact);
        }
    }

    @Override
    public void update(File artifact) throws Exception {
        if (!refused(artifact)) {
            delegate().update(artifact);
        }
    }

    @Override
    public void uninstall(File artifact) throws Exception {
        if (!neverApplied.remove(artifact.getAbsoluteFile())) {
            delegate().uninstall(artifact);
        }
    }

    private ArtifactInstaller delegate() throws IOException {
        ArtifactInstaller delegate = configInstaller.getService();
        if (delegate == null) {
            throw new IOException("FileInstall's configuration installer has gone (Config Admin stopped)");
        }
        return delegate;
    }

    /** @return whether {@code artifact} gives keys that differ only in case, which is then logged */
    private boolean refused(File artifact) {
        File file = artifact.getAbsoluteFile();
        List<String> clashes;
        try {
            clashes = clashes(file.toPath());
        } catch (IOException | RuntimeException unreadable) {
            clashes = List.of(); // FileInstall's installer reads it, and says what it finds
        }
        if (clashes.isEmpty()) {
            neverApplied.remove(file);
            return false;
        }
        boolean applied = madeOf(file);
        if (!applied) {
            neverApplied.add(file);
        }
        String message = file + " gives keys that differ only in case, " + String.join(", ", clashes)
                + ": Config Admin takes them as one key and refuses the file, so "
                + (applied ? "the configuration made of it before stays as it was" : "no configuration is made of it")
                + "; give each key once";
        LoggerFactory factory = logs.getService();
        if (factory != null) {
            factory.getLogger(KeysDifferingInCase.class).error(message);
        } else {
            System.err.println("ERROR: " + message);
        }
        return true;
    }

    /** @return whether Config Admin holds a configuration FileInstall made of {@code file} */
    private boolean madeOf(File file) {
        ServiceReference<ConfigurationAdmin> ref = context.getServiceReference(ConfigurationAdmin.class);
        ConfigurationAdmin admin = ref == null ? null : context.getService(ref);
        if (admin == null) {
            return false;
        }
        try {
            Configuration[] found = admin.listConfigurations("(" + ConfigFiles.FILENAME + "="
                    + ConfigFiles.escape(file.toURI().toString()) + ")");
            return found != null && found.length > 0;
        } catch (IOException | InvalidSyntaxException e) {
            return false;
        } finally {
            context.ungetService(ref);
        }
    }

    /**
     * @param file a file in a watched folder
     * @return each set of keys of {@code file} that differ only in case, as "a and A" in the order of
     *         the file; empty when there is none
     */
    static List<String> clashes(Path file) throws IOException {
        Map<String, Set<String>> spellings = new LinkedHashMap<>();
        for (ConfigFileEntries.Entry e : ConfigFileEntries.read(file)) {
            spellings.computeIfAbsent(e.key().toLowerCase(Locale.ROOT), k -> new LinkedHashSet<>()).add(e.key());
        }
        List<String> clashes = new ArrayList<>();
        for (Set<String> keys : spellings.values()) {
            if (keys.size() > 1) {
                List<String> shown = keys.stream().map(ByteOrderMarks::printable).toList();
                clashes.add(String.join(", ", shown.subList(0, shown.size() - 1)) + " and " + shown.get(shown.size() - 1));
            }
        }
        return clashes;
    }
}
