package io.ferrum.memory.launcher;

import java.io.IOException;
import java.util.Dictionary;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.osgi.service.cm.Configuration;
import org.osgi.service.cm.ConfigurationAdmin;
import org.osgi.service.cm.ConfigurationEvent;
import org.osgi.service.cm.ConfigurationListener;
import org.osgi.service.log.Logger;

/**
 * A warning about the files in the watched folders that FileInstall made configurations of, each
 * checked at start and on every update of its configuration: a file that earns the warning is named
 * once in the log, and again only when the warning changes or after the file was fixed or deleted.
 * Any PID's file is checked: a plugin's file is read the same way as ours.
 */
abstract class FileWarnings implements ConfigurationListener {
    private final ConfigurationAdmin configAdmin;
    private final Logger log;
    private final String what;
    /** The warning given for each file, with its configuration's PID, while the file earns it. */
    private final Map<String, Named> named = new ConcurrentHashMap<>();

    private record Named(String pid, String warning) {
    }

    /** @param what the files looked for, as a failure to list them says it ("files that give a key twice") */
    FileWarnings(ConfigurationAdmin configAdmin, Logger log, String what) {
        this.configAdmin = configAdmin;
        this.log = log;
        this.what = what;
    }

    /**
     * Checks the files FileInstall read before this listener existed (it reads {@code config/} before
     * SCR starts): a subclass calls this last in its constructor.
     */
    final void checkAll() {
        ConfigFiles.forEach(configAdmin, log, what, this::check);
    }

    @Override
    public final void configurationEvent(ConfigurationEvent event) {
        if (event.getType() == ConfigurationEvent.CM_DELETED) {
            named.values().removeIf(n -> n.pid().equals(event.getPid()));
        } else if (event.getType() == ConfigurationEvent.CM_UPDATED) {
            ConfigFiles.forPid(configAdmin, log, event.getPid(), this::check);
        }
    }

    /**
     * @param file       the file, as the warning names it
     * @param properties the configuration FileInstall made of it
     * @return the warning the file earns, or null when it earns none
     * @throws IOException when the file cannot be read now: gone or changed since FileInstall read it,
     *                     its next read brings a new event
     */
    abstract String warningFor(String file, Dictionary<String, Object> properties) throws IOException;

    private void check(Configuration c) {
        Dictionary<String, Object> props = c.getProperties();
        Object name = props == null ? null : props.get(ConfigFiles.FILENAME);
        if (name == null) {
            return;
        }
        String file = ConfigFiles.file(name);
        String warning;
        try {
            warning = warningFor(file, props);
        } catch (IOException | RuntimeException unreadable) {
            return;
        }
        if (warning == null) {
            named.remove(file);
            return;
        }
        Named before = named.put(file, new Named(c.getPid(), warning));
        if (before == null || !before.warning().equals(warning)) {
            log.warn(ControlCharacters.escaped(warning)); // a file's name is the user's: it may hold an ESC
        }
    }
}
