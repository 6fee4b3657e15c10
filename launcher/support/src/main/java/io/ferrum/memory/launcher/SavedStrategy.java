package io.ferrum.memory.launcher;

import java.io.IOException;
import java.io.StringReader;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileSystemNotFoundException;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Dictionary;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.osgi.framework.BundleContext;
import org.osgi.service.cm.Configuration;
import org.osgi.service.cm.ConfigurationAdmin;
import org.osgi.service.cm.ConfigurationEvent;
import org.osgi.service.cm.ConfigurationListener;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;

/**
 * Keeps the router's strategy choice across restarts of the distribution. The distribution starts
 * with a fresh framework storage each time, so Config Admin forgets what {@code mem:strategy} saved;
 * its configuration lives in the {@code config/} folder FileInstall watches. When the monitor's
 * configuration ({@value #MONITOR_PID}) gets a {@code strategy} that its file there does not hold,
 * this writes it into the file the configuration came from ({@code config/io.ferrum.memory.monitor.cfg}
 * or {@code .config}; as {@code strategy="name"} where FileInstall reads the file typed, see {@link
 * #typed}), else into
 * {@code config/io.ferrum.memory.monitor.cfg}: the {@code strategy=} line is replaced (or added),
 * every other line of the file stays as it was, and the file is replaced in one move. FileInstall
 * then reads the same value back, which changes nothing.
 */
@Component(immediate = true)
public final class SavedStrategy implements ConfigurationListener {
    static final String MONITOR_PID = "io.ferrum.memory.monitor";
    static final String KEY = "strategy";
    /** The property FileInstall gives a configuration it read from a file: the file's URI. */
    static final String FILENAME = "felix.fileinstall.filename";
    /** The extension of FileInstall's typed configuration files. */
    static final String TYPED = ".config";

    private final ConfigurationAdmin configAdmin;
    private final Path file;
    /**
     * Per file, its bytes when it last said the strategy Config Admin held. A file that says another
     * strategy and still has these bytes is older than Config Admin (mem:strategy chose since): the
     * choice is written. One whose bytes changed since was edited, and FileInstall applies the edit
     * at its next poll: it is left alone. Writing then put back the strategy of the edit before, when
     * a second edit came before the event of the first.
     */
    private final Map<Path, byte[]> agreed = new HashMap<>();

    @Activate
    public SavedStrategy(BundleContext context, @Reference ConfigurationAdmin configAdmin) {
        this(configAdmin, configFolder(context.getProperty("felix.fileinstall.dir")).resolve(MONITOR_PID + ".cfg"));
        // FileInstall may have applied the file before this listened: whether it agrees is seen now.
        saveCurrent();
    }

    /** @param file the file a configuration that came from none is saved in */
    SavedStrategy(ConfigurationAdmin configAdmin, Path file) {
        this.configAdmin = configAdmin;
        this.file = file;
    }

    /** @return the watched folder named {@code config}, else the last watched folder, else {@code config} */
    static Path configFolder(String dirs) {
        Path chosen = Path.of("config");
        if (dirs != null) {
            for (String d : dirs.split(",")) {
                if (!d.isBlank()) {
                    chosen = Path.of(d.strip());
                    if (chosen.getFileName() != null && chosen.getFileName().toString().equals("config")) {
                        break;
                    }
                }
            }
        }
        return chosen.toAbsolutePath();
    }

    @Override
    public void configurationEvent(ConfigurationEvent event) {
        if (event.getType() == ConfigurationEvent.CM_UPDATED && MONITOR_PID.equals(event.getPid())) {
            saveCurrent();
        }
    }

    /** Config Admin delivers events on its own thread: a choice made just before the framework stops is saved here. */
    @Deactivate
    void deactivate() {
        saveCurrent();
    }

    private void saveCurrent() {
        try {
            Configuration[] found = configAdmin.listConfigurations("(service.pid=" + MONITOR_PID + ")");
            Dictionary<String, Object> properties = found == null ? null : found[0].getProperties();
            Object strategy = properties == null ? null : properties.get(KEY);
            // Only a name is saved: a list (refused by the monitor) would be written as a Java array's text.
            if (strategy instanceof String name) {
                saveCurrent(fileOf(properties), name);
            } else if (strategy == null && properties != null) {
                agreeOnNone(fileOf(properties));
            }
        } catch (Exception e) {
            System.err.println("ferrum: the strategy choice could not be written to " + file + ": " + e.getMessage());
        }
    }

    /**
     * Writes {@code name}, the strategy Config Admin holds, into {@code target} unless it says so
     * already or was edited since it last did (see {@link #agreed}); a file that is not there is written.
     */
    synchronized void saveCurrent(Path target, String name) throws IOException {
        refuseTooLarge(target);
        if (Files.exists(target) && ConfigFileEntries.isXml(target)) {
            // Lines added to XML properties make it no XML at all, and FileInstall's next read fails.
            List<ConfigFileEntries.Entry> given = ConfigFileEntries.read(target).stream().filter(e -> e.key().equals(KEY)).toList();
            if (given.isEmpty() || !given.getLast().value().equals(name)) {
                System.err.println("ferrum: the strategy choice " + name + " is not written into " + target + ": it holds XML"
                        + " properties, which the distribution does not edit; give <entry key=\"strategy\">" + name
                        + "</entry> there to keep the choice after a restart");
            }
            return;
        }
        byte[] now = Files.exists(target) ? Files.readAllBytes(target) : null;
        List<String> out = withStrategy(target, name);
        if (out == null) {
            agreed.put(target, now);
        } else if (now == null || Arrays.equals(now, agreed.get(target))) {
            write(target, out);
            agreed.put(target, Files.readAllBytes(target));
        }
    }

    /**
     * Records that {@code target} agrees with Config Admin when neither gives a strategy (a monitor
     * file of {@code maxAttempts=3} only): without it, the first choice found the file changed since
     * they last agreed, took it for an edit FileInstall is to apply, and was never written.
     */
    private synchronized void agreeOnNone(Path target) throws IOException {
        refuseTooLarge(target);
        if (Files.exists(target) && !ConfigFileEntries.isXml(target)
                && Files.readAllLines(target, StandardCharsets.ISO_8859_1).stream().noneMatch(SavedStrategy::isStrategy)) {
            agreed.put(target, Files.readAllBytes(target));
        }
    }

    /**
     * A file above what a configuration file may be ({@link ConfigFileEntries#MAX_BYTES}: the gate
     * makes no configuration of it) is neither read nor written: its bytes would be read whole, and
     * above 2 GiB that is an OutOfMemoryError, out of this listener into Config Admin's thread.
     *
     * @throws IOException naming the file and its size
     */
    private static void refuseTooLarge(Path target) throws IOException {
        String tooLarge = Files.exists(target) ? ConfigFileEntries.tooLarge(target) : null;
        if (tooLarge != null) {
            throw new IOException(target + " " + tooLarge);
        }
    }

    /**
     * @return the file FileInstall read the configuration from (its {@value #FILENAME} property), when
     *         it is the monitor's {@code .cfg} or typed {@code .config} file; else {@code config/io.ferrum.memory.monitor.cfg}.
     *         A choice written into a new {@code .cfg} beside a {@code .config} would be applied by
     *         FileInstall as the whole configuration, dropping the {@code .config}'s other values.
     */
    private Path fileOf(Dictionary<String, Object> properties) {
        if (properties.get(FILENAME) instanceof String uri) {
            try {
                Path read = Path.of(URI.create(uri));
                String name = read.getFileName().toString();
                if (name.equals(MONITOR_PID + ".cfg") || name.equals(MONITOR_PID + TYPED)) {
                    return read;
                }
            } catch (IllegalArgumentException | FileSystemNotFoundException notAFile) {
                // not a file FileInstall read: the default file
            }
        }
        return file;
    }

    /**
     * Writes {@code strategy=value} into {@code file} ({@code strategy="value"} in a typed {@code .config}
     * file), keeping its other lines byte for byte; does nothing if it already says so.
     *
     * <p>FileInstall reads a {@code .cfg} file as ISO-8859-1 with the escapes of a properties file, so
     * the name is written in escapes ({@link #escaped}) and a line is read as FileInstall reads it: a
     * name written otherwise came back as another name ({@code é} read as {@code Ã©}), which was
     * saved again, read back longer, and so on, the file doubling at every poll. The file is read and
     * written as ISO-8859-1, which keeps every byte of the other lines whatever their encoding.
     */
    static void save(Path file, String value) throws IOException {
        List<String> out = withStrategy(file, value);
        if (out != null) {
            write(file, out);
        }
    }

    /**
     * @return the lines of {@code file} with {@code value} for the strategy, in one line where the
     *         file had several, or null if the file says so already: if its last strategy line does,
     *         the one FileInstall applies (an earlier one naming the value says nothing)
     */
    private static List<String> withStrategy(Path file, String value) throws IOException {
        boolean typed = typed(file);
        String entry = KEY + "=" + (typed ? quoted(value) : escaped(value));
        List<String> lines = Files.exists(file) ? Files.readAllLines(file, StandardCharsets.ISO_8859_1) : List.of();
        String applied = null;
        for (String line : lines) {
            if (isStrategy(line)) {
                applied = line;
            }
        }
        if (applied != null && (applied.strip().equals(entry) || !typed && value.equals(readAsCfg(applied)))) {
            return null;
        }
        List<String> out = new ArrayList<>();
        boolean written = false;
        for (String line : lines) {
            if (isStrategy(line)) {
                if (!written) {
                    out.add(entry);
                    written = true;
                }
            } else {
                out.add(line);
            }
        }
        if (!written) {
            out.add(entry);
        }
        return out;
    }

    /** @return whether {@code line} gives the strategy ({@code strategy=}, {@code strategy:} or {@code strategy }) */
    /**
     * @return whether FileInstall reads {@code file} in the typed format, so that the strategy is to be
     *         written in it: FileInstall 3.7.4 reads a {@code .cfg} and a {@code .config} file alike,
     *         typed when every value of the file is typed, as plain text otherwise (a quoted strategy
     *         in a file of plain values is read with its quotes, a plain one in a typed file turns its
     *         other values into text). A file with no value but the strategy's follows its extension.
     */
    static boolean typed(Path file) throws IOException {
        List<ConfigFileEntries.Entry> others = Files.exists(file)
                ? ConfigFileEntries.read(file).stream().filter(e -> !e.key().equals(KEY)).toList() : List.of();
        if (others.isEmpty()) {
            return file.getFileName().toString().endsWith(TYPED);
        }
        return others.stream().allMatch(e -> ConfigFileEntries.isTyped(e.value()));
    }

    private static boolean isStrategy(String line) {
        String t = line.strip();
        return !t.startsWith("#") && (t.startsWith(KEY + "=") || t.startsWith(KEY + " ") || t.startsWith(KEY + ":"));
    }

    private static void write(Path file, List<String> out) throws IOException {
        Files.createDirectories(file.getParent());
        // A hidden name FileInstall's filter (*.cfg, *.config) does not take, then one move over the file.
        Path part = file.resolveSibling("." + file.getFileName() + ".part");
        Files.write(part, out, StandardCharsets.ISO_8859_1);
        try {
            Files.move(part, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (AtomicMoveNotSupportedException e) {
            Files.move(part, file, StandardCopyOption.REPLACE_EXISTING);
        }
    }

    /**
     * @return {@code value} as a value of a {@code .cfg} (properties) file: {@code \\}, characters
     *         outside printable ASCII and a leading space escaped, so that FileInstall reads it back as it is
     */
    static String escaped(String value) {
        StringBuilder b = new StringBuilder();
        for (char c : value.toCharArray()) {
            if (c == '\\') {
                b.append("\\\\");
            } else if (c < ' ' || c > '~' || c == ' ' && b.isEmpty()) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.toString();
    }

    /** @return the value of a {@code .cfg} file's {@code strategy} line as a properties file reads it */
    private static String readAsCfg(String line) throws IOException {
        Properties p = new Properties();
        p.load(new StringReader(line));
        return p.getProperty(KEY);
    }

    /**
     * @return {@code value} as a string of the typed {@code .config} format: in quotes, with
     *         {@code \\}, {@code "} and characters outside printable ASCII escaped
     */
    static String quoted(String value) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : value.toCharArray()) {
            if (c == '\\' || c == '"') {
                b.append('\\').append(c);
            } else if (c < ' ' || c > '~') {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }
}
