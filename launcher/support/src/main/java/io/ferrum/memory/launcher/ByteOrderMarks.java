package io.ferrum.memory.launcher;

import java.util.Collections;
import java.util.Dictionary;
import java.util.List;

import org.osgi.service.cm.ConfigurationAdmin;
import org.osgi.service.cm.ConfigurationListener;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.log.Logger;
import org.osgi.service.log.LoggerFactory;

/**
 * Names a file in the watched folders saved with a byte order mark (BOM), as Windows editors do.
 * FileInstall reads a {@code .cfg} file as ISO-8859-1 (its {@code felix.fileinstall.configEncoding})
 * and keeps the mark's bytes as the start of the first key: {@code capacity=64m} became the key
 * {@code \u00ef\u00bb\u00bfcapacity}, which nothing reads, without a word about the mark. One
 * warning per file names the file, the mark and the key as read; the configuration itself is left as
 * FileInstall made it (a corrected copy in Config Admin would be put back by FileInstall's next read of
 * the file, and the file is the user's to save again). Any PID's file is checked: the mark breaks a
 * plugin's file as it breaks ours.
 */
@Component(service = ConfigurationListener.class)
public final class ByteOrderMarks extends FileWarnings {
    /** A UTF-8 mark (EF BB BF) as ISO-8859-1 reads it, and as UTF-8 reads it. */
    private static final List<String> UTF_8 = List.of("\u00ef\u00bb\u00bf", "\ufeff");
    /** A UTF-16 mark (FF FE or FE FF) as ISO-8859-1 reads it. */
    private static final List<String> UTF_16 = List.of("\u00ff\u00fe", "\u00fe\u00ff");

    @Activate
    public ByteOrderMarks(@Reference ConfigurationAdmin configAdmin, @Reference(service = LoggerFactory.class) Logger log) {
        super(configAdmin, log, "files with a byte order mark");
        checkAll();
    }

    @Override
    String warningFor(String file, Dictionary<String, Object> properties) {
        return warning(file, Collections.list(properties.keys()));
    }

    /**
     * @param file the file, as the warning names it
     * @param keys the keys of the configuration FileInstall made of it
     * @return the warning for a file whose first key starts with a byte order mark, or null when none does
     */
    static String warning(String file, Iterable<String> keys) {
        for (String key : keys) {
            for (String mark : UTF_8) {
                if (key.startsWith(mark)) {
                    String meant = key.substring(mark.length());
                    String effect = meant.isEmpty() || meant.startsWith("#") || meant.startsWith("!")
                            ? "its first line is no comment or blank line any more but the key '" + printable(key) + "'"
                            : "the key '" + printable(meant) + "' is read as '" + printable(key) + "' and configures nothing";
                    return file + " starts with a UTF-8 byte order mark (BOM), which FileInstall reads as part of its first line: "
                            + effect + "; save the file as UTF-8 without BOM (or as ASCII)";
                }
            }
            for (String mark : UTF_16) {
                if (key.startsWith(mark)) {
                    return file + " starts with a UTF-16 byte order mark (BOM): it is saved as UTF-16, which FileInstall"
                            + " does not read, so none of its lines configures anything; save the file as UTF-8 without BOM"
                            + " (or as ASCII)";
                }
            }
        }
        return null;
    }

    /** @return {@code key} with every character outside printable ASCII as a Java escape, at most 40 characters of it */
    static String printable(String key) {
        StringBuilder shown = new StringBuilder();
        int i = 0;
        for (; i < key.length() && i < 40; i++) {
            char c = key.charAt(i);
            shown.append(c >= 0x20 && c < 0x7f ? String.valueOf(c) : String.format("\\u%04x", (int) c));
        }
        return i < key.length() ? shown + "..." : shown.toString();
    }
}
