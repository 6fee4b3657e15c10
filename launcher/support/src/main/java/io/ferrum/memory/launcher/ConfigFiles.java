package io.ferrum.memory.launcher;

import java.io.File;
import java.io.IOException;
import java.net.URI;

import org.osgi.framework.InvalidSyntaxException;
import org.osgi.service.cm.Configuration;
import org.osgi.service.cm.ConfigurationAdmin;

/** The configurations FileInstall made of files in the watched folders, as the checks of those files read them. */
final class ConfigFiles {
    /** The property FileInstall puts in each configuration it made of a file: the file's URI. */
    static final String FILENAME = "felix.fileinstall.filename";

    private ConfigFiles() {
    }

    /** @return every configuration made of a file, none as an empty array */
    static Configuration[] all(ConfigurationAdmin configAdmin) throws IOException, InvalidSyntaxException {
        Configuration[] present = configAdmin.listConfigurations("(" + FILENAME + "=*)");
        return present == null ? new Configuration[0] : present;
    }

    /** @return the configuration of {@code pid}, or null when there is none (deleted meanwhile) */
    static Configuration byPid(ConfigurationAdmin configAdmin, String pid) throws IOException, InvalidSyntaxException {
        Configuration[] found = configAdmin.listConfigurations("(service.pid=" + escape(pid) + ")");
        return found == null ? null : found[0];
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
    private static String escape(String value) {
        return value.replace("\\", "\\\\").replace("*", "\\*").replace("(", "\\(").replace(")", "\\)");
    }
}
