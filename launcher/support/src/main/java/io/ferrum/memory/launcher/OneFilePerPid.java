package io.ferrum.memory.launcher;

import java.io.File;
import java.net.URI;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Dictionary;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.osgi.framework.BundleContext;
import org.osgi.service.cm.Configuration;
import org.osgi.service.cm.ConfigurationAdmin;
import org.osgi.service.cm.ConfigurationEvent;
import org.osgi.service.cm.ConfigurationListener;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.log.Logger;
import org.osgi.service.log.LoggerFactory;

/**
 * Watches for two files in the watched folders that configure one PID
 * ({@code io.ferrum.memory.cpu.cfg} and {@code io.ferrum.memory.cpu.config}, or two factory files
 * {@code io.ferrum.memory.cpu.device-a.cfg} and {@code ...device-a.config}). FileInstall maps both to
 * one configuration: the file it read last wins silently, and deleting either deletes the whole
 * configuration (FileInstall 3.7.4 {@code ConfigInstaller.deleteConfig} finds it by PID), though the
 * other file is still there. So:
 * <ul>
 * <li>when a configuration FileInstall made is updated and another file for its PID exists, one
 * warning names both files and says which one applies (again only when the set of files changes);
 * <li>when such a configuration is deleted and a file for it remains, that file is applied again:
 * its modification time is moved on, so FileInstall reads it at its next poll.
 * </ul>
 */
@Component(service = ConfigurationListener.class)
public final class OneFilePerPid implements ConfigurationListener {
    private final List<File> watched = new ArrayList<>();
    /** Per PID, the files last found configuring it, when there were two or more. */
    private final Map<String, List<File>> duplicates = new HashMap<>();

    private final ConfigurationAdmin configAdmin;
    private final Logger log;

    @Activate
    public OneFilePerPid(BundleContext context, @Reference ConfigurationAdmin configAdmin,
                         @Reference(service = LoggerFactory.class) Logger log) {
        this.configAdmin = configAdmin;
        this.log = log;
        for (Path p : WatchedFolders.of(context)) {
            watched.add(p.toFile());
        }
        // FileInstall (before SCR at its start level) reads config/ before this listener exists.
        // ConfigFiles skips a configuration deleted while it is looked at (its file removed meanwhile).
        ConfigFiles.forEach(configAdmin, log, "two files of one PID", this::updated);
    }

    @Override
    public void configurationEvent(ConfigurationEvent event) {
        switch (event.getType()) {
            case ConfigurationEvent.CM_UPDATED -> ConfigFiles.forPid(configAdmin, log, event.getPid(), this::updated);
            case ConfigurationEvent.CM_DELETED -> deleted(event.getPid());
            default -> {
                // CM_LOCATION_CHANGED: no file involved
            }
        }
    }

    private void updated(Configuration c) {
        String pid = c.getPid();
        File applied = appliedFile(c);
        if (applied == null) {
            return;
        }
        List<File> files = filesFor(applied.getName());
        synchronized (duplicates) {
            if (files.size() < 2) {
                duplicates.remove(pid);
                return;
            }
            if (files.equals(duplicates.put(pid, files))) {
                return;
            }
        }
        List<String> others = new ArrayList<>();
        for (File f : files) {
            if (!f.equals(applied)) {
                others.add(ControlCharacters.escaped(f.getPath()));
            }
        }
        log.warn("{} files configure {}: {} applies, {} is ignored; deleting either file deletes the configuration,"
                + " so keep one file per PID", files.size(), ControlCharacters.escaped(pid), ControlCharacters.escaped(applied.getPath()),
                String.join(" and ", others));
    }

    private void deleted(String pid) {
        List<File> files;
        synchronized (duplicates) {
            files = duplicates.remove(pid);
        }
        if (files == null) {
            return;
        }
        for (File f : files) {
            if (f.isFile()) {
                if (ReadAgain.atNextPoll(f, watchedPaths())) {
                    log.warn("{} was deleted with one of its files; applying {} again, which still configures it",
                            ControlCharacters.escaped(pid), ControlCharacters.escaped(f.getPath()));
                } else {
                    // A link to a file elsewhere: the user's, which the distribution does not touch.
                    log.warn("{} was deleted with one of its files; {} still configures it, but it leads outside the"
                            + " watched folders, where the distribution changes nothing: touch it to apply it again",
                            ControlCharacters.escaped(pid), ControlCharacters.escaped(f.getPath()));
                }
                return;
            }
        }
    }

    private List<Path> watchedPaths() {
        return watched.stream().map(File::toPath).toList();
    }

    /** @return the file FileInstall made {@code c} from, or null when none did */
    private static File appliedFile(Configuration c) {
        Dictionary<String, Object> props = c.getProperties();
        Object name = props == null ? null : props.get(ConfigFiles.FILENAME);
        try {
            return name == null ? null : new File(URI.create(name.toString())).getAbsoluteFile();
        } catch (IllegalArgumentException notAFile) {
            return null;
        }
    }

    /**
     * @param fileName a configuration file's name
     * @return the files in the watched folders that FileInstall maps to the same PID: the same name
     *         before the extension, ending in {@code .cfg} or {@code .config}
     */
    List<File> filesFor(String fileName) {
        String stem = fileName.substring(0, fileName.lastIndexOf('.'));
        List<File> files = new ArrayList<>();
        for (File dir : watched) {
            for (String ext : ConfigFileEntries.EXTENSIONS) {
                File f = new File(dir, stem + ext);
                if (f.isFile()) {
                    files.add(f);
                }
            }
        }
        return files;
    }
}
