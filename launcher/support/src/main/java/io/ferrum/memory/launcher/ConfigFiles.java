package io.ferrum.memory.launcher;

import java.io.File;
import java.io.IOException;
import java.net.URI;
import java.util.function.Consumer;

import org.osgi.framework.InvalidSyntaxException;
import org.osgi.service.cm.Configuration;
import org.osgi.service.cm.ConfigurationAdmin;
import org.osgi.service.log.Logger;

/** The configurations FileInstall made of files in the watched folders, as the checks of those files read them. */
final class ConfigFiles {
    /** The property FileInstall puts in each configuration it made of a file: the file's URI. */
    static final String FILENAME = "felix.fileinstall.filename";

    private ConfigFiles() {
    }

    /**
     * Hands every configuration made of a file to {@code check}; a Config Admin that cannot list them
     * is logged as a warning saying what was looked for.
     */
    static void forEach(ConfigurationAdmin configAdmin, Logger log, String lookingFor, Consumer<Configuration> check) {
        try {
            Configuration[] present = configAdmin.listConfigurations("(" + FILENAME + "=*)");
            for (Configuration c : present == null ? new Configuration[0] : present) {
                checkUnlessDeleted(c, check);
            }
        } catch (IOException | InvalidSyntaxException e) {
            log.warn("Cannot list the configurations to look for {}: {}", lookingFor, e.toString());
        }
    }

    /** Hands the configuration of {@code pid} to {@code check}, unless it was deleted meanwhile. */
    static void forPid(ConfigurationAdmin configAdmin, Logger log, String pid, Consumer<Configuration> check) {
        try {
            Configuration[] found = configAdmin.listConfigurations("(service.pid=" + escape(pid) + ")");
            if (found != null) {
                checkUnlessDeleted(found[0], check);
            }
        } catch (IOException | InvalidSyntaxException e) {
            log.warn("Cannot look at configuration {}: {}", pid, e.toString());
        }
    }

    /**
     * Hands {@code c} to {@code check}, unless it was deleted since it was listed: Config Admin then
     * answers its getters with IllegalStateException (its file removed as a check starts), which threw
     * out of a check's activation, and the check never ran. Its CM_DELETED event follows.
     */
    private static void checkUnlessDeleted(Configuration c, Consumer<Configuration> check) {
        try {
            check.accept(c);
        } catch (IllegalStateException e) {
            try {
                c.getPid(); // throws as well if it was deleted: nothing to check, the file and its configuration are gone
            } catch (IllegalStateException deletedMeanwhile) {
                return;
            }
            throw e;
        }
    }

    /** @return the file a configuration's {@link #FILENAME} names, as a path, or the value itself if it names none */
    static String file(Object name) {
        try {
            return new File(URI.create(name.toString())).getAbsolutePath();
        } catch (IllegalArgumentException notAFile) {
            return name.toString();
        }
    }

    /** @return {@code value} escaped for an LDAP filter */
    static String escape(String value) {
        return value.replace("\\", "\\\\").replace("*", "\\*").replace("(", "\\(").replace(")", "\\)");
    }
}
