package io.ferrum.memory.launcher;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Dictionary;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

import org.osgi.service.cm.ConfigurationAdmin;
import org.osgi.service.cm.ConfigurationListener;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.log.Logger;
import org.osgi.service.log.LoggerFactory;

/**
 * Names a file in the watched folders that gives one key twice ({@code capacity=64m}, and further down
 * {@code capacity=1g}). FileInstall keeps the last value and drops the others without a word, so which
 * one a device runs with depends on where a line stands; the shell refuses an option given twice for
 * the same reason. The configuration cannot be refused here (FileInstall made it already, and the
 * components see one value): one warning per file names each such key with its values and the one
 * that applies. Any PID's file is checked: a plugin's file is read the same way.
 */
@Component(service = ConfigurationListener.class)
public final class DuplicateKeys extends FileWarnings {
    /** How many repeated keys a warning names; beyond them it counts the rest. */
    static final int KEYS_NAMED = 3;

    @Activate
    public DuplicateKeys(@Reference ConfigurationAdmin configAdmin, @Reference(service = LoggerFactory.class) Logger log) {
        super(configAdmin, log, "files that give a key twice");
        checkAll();
    }

    @Override
    String warningFor(String file, Dictionary<String, Object> properties) throws IOException {
        return warning(file, repeated(Path.of(file)));
    }

    /**
     * @param file a {@code .cfg} or {@code .config} file, read as FileInstall reads its keys ({@link
     *             ConfigFileEntries}: a properties file, or XML properties when it starts with {@code <})
     * @return each key given more than once, with its values in the order of the file
     */
    static Map<String, List<String>> repeated(Path file) throws IOException {
        Map<String, List<String>> values = new LinkedHashMap<>();
        for (ConfigFileEntries.Entry e : ConfigFileEntries.read(file)) {
            values.computeIfAbsent(e.key(), k -> new ArrayList<>()).add(e.value());
        }
        values.values().removeIf(v -> v.size() < 2);
        return values;
    }

    /**
     * @param file     the file, as the warning names it
     * @param repeated each key given more than once, with its values ({@link #repeated})
     * @return the warning, or null when no key is given twice: one bounded line however many keys and
     *         values repeat (a generated file, a log saved into config/ by mistake), the first {@value
     *         #KEYS_NAMED} keys with their first two values and the one that applies, the rest counted
     */
    static String warning(String file, Map<String, List<String>> repeated) {
        if (repeated.isEmpty()) {
            return null;
        }
        String keys = repeated.entrySet().stream().limit(KEYS_NAMED).map(e -> {
            List<String> v = e.getValue();
            String times = v.size() == 2 ? "twice" : v.size() + " times";
            List<String> earlier = v.subList(0, v.size() - 1);
            String shown = earlier.stream().limit(2).map(DuplicateKeys::quoted).collect(Collectors.joining(", "))
                    + (earlier.size() > 2 ? ", " + (earlier.size() - 2) + " more" : "");
            String last = quoted(v.get(v.size() - 1));
            return ByteOrderMarks.printable(e.getKey()) + " " + times + " (" + shown + ", then " + last + "; " + last + " applies)";
        }).collect(Collectors.joining(", "));
        if (repeated.size() > KEYS_NAMED) {
            keys += ", and " + (repeated.size() - KEYS_NAMED) + " more keys more than once";
        }
        return file + " gives " + keys + ": FileInstall keeps the last value of a key and drops the others without a"
                + " word; give each key once";
    }

    /** @return the value in quotes, as {@link ByteOrderMarks#printable} shows it (at most 40 characters) */
    private static String quoted(String value) {
        return "'" + ByteOrderMarks.printable(value) + "'";
    }
}
