package io.ferrum.memory.launcher;

import java.io.File;
import java.io.IOException;
import java.nio.file.DirectoryIteratorException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
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
import java.util.regex.Matcher;
import java.util.regex.Pattern;

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
 * Stands before FileInstall's own configuration installer and refuses, in one error line naming the
 * file, the bad value and what became of the configuration, a file in the watched folders that Config
 * Admin or FileInstall's reader would refuse with a stack trace:
 * <ul>
 * <li>two keys that differ only in case ({@code capacity=64m} and {@code Capacity=1g}): Config Admin
 * takes keys in any case as one and refuses such a dictionary with IllegalArgumentException, which
 * FileInstall logged as an error with two stack traces naming one of the keys;
 * <li>a typed value that its type cannot take ({@code index=I"abc"} in a file whose values are all typed,
 * which FileInstall reads in the typed format): its reader threw NumberFormatException, naming neither
 * the key nor the file's fate;
 * <li>a file larger than {@link ConfigFileEntries#MAX_BYTES} (a log saved there by mistake), which
 * FileInstall's reader read whole into memory, and this one after it;
 * <li>an entry that is no regular file (a named pipe, a socket, a device: {@code mkfifo config/x.cfg}),
 * whose open blocked this gate's reader, and FileInstall's after it, until a writer came: at start,
 * FileInstall's first scan runs on the framework's start-level thread, and the distribution hung;
 * <li>anything else FileInstall's installer throws on the file, in its own words.
 * </ul>
 * A new file so refused makes no configuration, an edited one leaves the configuration made of it before
 * as it was; the file fixed, it applies. Every other file goes to FileInstall's installer unchanged.
 *
 * <p>It stands before that installer by a higher service ranking: FileInstall asks its installers in
 * that order for a new file, and keeps asking the one that took it. So it is registered by {@link
 * EarlyHooks} before FileInstall starts: a file taken by FileInstall's installer at its first scan would
 * stay with it.
 */
final class ConfigFileGate implements ArtifactInstaller {
    private static final String FILEINSTALL = "org.apache.felix.fileinstall";

    private final BundleContext context;
    /** FileInstall's configuration installer: its ArtifactInstaller that is a ConfigurationListener too. */
    private final ServiceTracker<ArtifactInstaller, ArtifactInstaller> configInstaller;
    private final ServiceTracker<LoggerFactory, LoggerFactory> logs;
    /**
     * The files refused before any configuration was made of them: deleting one deletes nothing. Known again
     * after a restart of this bundle ({@link #neverAppliedBeforeTheRestart}).
     */
    private final Set<File> neverApplied = ConcurrentHashMap.newKeySet();

    ConfigFileGate(BundleContext context) {
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
        if (ClaimingInstaller.restartedInARunningFramework(context)) {
            neverAppliedBeforeTheRestart(WatchedFolders.of(context));
        }
        Hashtable<String, Object> props = new Hashtable<>();
        props.put(Constants.SERVICE_RANKING, 1);
        return context.registerService(ArtifactInstaller.class, this, props);
    }

    /**
     * After a restart of this bundle in a running framework ({@code update io.ferrum.memory.launcher}, a stop and
     * start, a refresh): takes as {@link #neverApplied} each entry of {@code watched} that FileInstall's installer
     * handles and of which Config Admin holds no configuration, as the instance before the restart refused them.
     * FileInstall asks this instance to uninstall a file the one before took; without its set, the deletion of a
     * file refused before the restart was handed to FileInstall's installer, which looks a configuration up by
     * PID when none was made of the file, and deleted the one another file of that PID had made. Nothing is
     * opened: FileInstall's installer knows its files by name.
     */
    void neverAppliedBeforeTheRestart(List<Path> watched) {
        ArtifactInstaller delegate = configInstaller.getService();
        if (delegate == null) {
            return;
        }
        for (Path dir : watched) {
            try (DirectoryStream<Path> entries = Files.newDirectoryStream(dir)) {
                for (Path entry : entries) {
                    File file = entry.toFile().getAbsoluteFile();
                    if (delegate.canHandle(file) && !madeOf(file)) {
                        neverApplied.add(file);
                    }
                }
            } catch (IOException | DirectoryIteratorException | SecurityException unreadable) {
                // The folder gone or unreadable: FileInstall finds nothing in it either.
            }
        }
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
            applyOrSay(artifact, () -> delegate().install(artifact));
        }
    }

    @Override
    public void update(File artifact) throws Exception {
        if (!refused(artifact)) {
            applyOrSay(artifact, () -> delegate().update(artifact));
        }
    }

    @Override
    public void uninstall(File artifact) throws Exception {
        if (!neverApplied.remove(artifact.getAbsoluteFile())) {
            delegate().uninstall(artifact);
        }
    }

    private interface Apply {
        void run() throws Exception;
    }

    /** Hands the file to FileInstall's installer; what it throws is said in one line, without its stack trace. */
    private void applyOrSay(File artifact, Apply apply) {
        File file = artifact.getAbsoluteFile();
        try {
            apply.run();
            neverApplied.remove(file);
        } catch (Exception e) {
            Throwable why = e.getCause() != null && e.getMessage() != null && e.getMessage().equals(e.getCause().toString())
                    ? e.getCause() : e;
            refuse(file, "cannot be read by FileInstall (" + ControlCharacters.escaped(why.toString()) + "),",
                    "check the file's syntax");
        }
    }

    private ArtifactInstaller delegate() throws IOException {
        ArtifactInstaller delegate = configInstaller.getService();
        if (delegate == null) {
            throw new IOException("FileInstall's configuration installer has gone (Config Admin stopped)");
        }
        return delegate;
    }

    /**
     * @return whether {@code artifact} is no regular file, is larger than {@link ConfigFileEntries#MAX_BYTES},
     *         gives keys that differ only in case or a typed value its type cannot take, which is then logged
     */
    private boolean refused(File artifact) {
        File file = artifact.getAbsoluteFile();
        List<ConfigFileEntries.Entry> entries;
        try {
            String notRegular = ConfigFileEntries.notRegular(file.toPath());
            if (notRegular != null) {
                // Not handed to FileInstall's installer either: its reader would open it as this one would.
                refuse(file, notRegular + ": FileInstall would wait on it for ever, and the distribution with it,",
                        "put the configuration in a regular file");
                return true;
            }
            String tooLarge = ConfigFileEntries.tooLarge(file.toPath());
            if (tooLarge != null) {
                refuse(file, tooLarge + ": FileInstall would read it whole into memory,",
                        "keep a configuration in a file of " + (ConfigFileEntries.MAX_BYTES >> 20) + " MiB at most");
                return true;
            }
            entries = ConfigFileEntries.read(file.toPath());
        } catch (IOException | RuntimeException unreadable) {
            return false; // FileInstall's installer reads it, and what it throws is said (applyOrSay)
        }
        List<String> clashes = clashes(entries);
        if (!clashes.isEmpty()) {
            refuse(file, "gives keys that differ only in case, " + String.join(", ", clashes)
                    + ": Config Admin takes them as one key and refuses the file,", "give each key once");
            return true;
        }
        String badValue = badTypedValue(entries);
        if (badValue != null) {
            refuse(file, "gives " + badValue + ",", "write the value as its type takes it");
            return true;
        }
        return false;
    }

    /** Logs that {@code file} {@code what}, so ... (what became of its configuration); {@code advice}. */
    private void refuse(File file, String what, String advice) {
        boolean applied = madeOf(file);
        if (!applied) {
            neverApplied.add(file);
        }
        String message = ControlCharacters.escaped(file.toString()) + " " + what + " so "
                + (applied ? "the configuration made of it before stays as it was" : "no configuration is made of it")
                + "; " + advice;
        LoggerFactory factory = logs.getService();
        if (factory != null) {
            factory.getLogger(ConfigFileGate.class).error(message);
        } else {
            System.err.println("ERROR: " + message);
        }
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
        return clashes(ConfigFileEntries.read(file));
    }

    private static List<String> clashes(List<ConfigFileEntries.Entry> entries) {
        Map<String, Set<String>> spellings = new LinkedHashMap<>();
        for (ConfigFileEntries.Entry e : entries) {
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

    /** A number of the typed format: its type letter, then its text in quotes ({@code I"3"}, {@code D"0.85"}). */
    private static final Pattern TYPED_NUMBER = Pattern.compile("\\s*([ILSXFDilsxfd])\"([^\"\\\\]*)\"\\s*");

    /**
     * @param entries the entries of a file, as FileInstall reads them
     * @return the first number of a typed file whose text its type cannot take, as {@code key=I"abc",
     *         which FileInstall cannot read as a typed value (I: a whole number)}; null when there is none
     *         or the file is not typed (FileInstall reads its values as text then)
     */
    static String badTypedValue(List<ConfigFileEntries.Entry> entries) {
        if (entries.isEmpty() || !entries.stream().allMatch(e -> ConfigFileEntries.isTyped(e.value()))) {
            return null;
        }
        for (ConfigFileEntries.Entry e : entries) {
            Matcher m = TYPED_NUMBER.matcher(e.value());
            if (!m.matches()) {
                continue;
            }
            char type = Character.toUpperCase(m.group(1).charAt(0));
            String text = m.group(2);
            try {
                switch (type) {
                    case 'I' -> Integer.parseInt(text);
                    case 'L' -> Long.parseLong(text);
                    case 'S' -> Short.parseShort(text);
                    case 'X' -> Byte.parseByte(text);
                    // A decimal with a point, else its bits as a whole number (the format's own writing).
                    case 'F' -> Float.parseFloat(text.contains(".") ? text : String.valueOf(Float.intBitsToFloat(Integer.parseInt(text))));
                    default -> Double.parseDouble(text.contains(".") ? text : String.valueOf(Double.longBitsToDouble(Long.parseLong(text))));
                }
            } catch (NumberFormatException bad) {
                String takes = switch (type) {
                    case 'I', 'L' -> "a whole number";
                    case 'S' -> "a whole number from -32768 to 32767";
                    case 'X' -> "a whole number from -128 to 127";
                    default -> "a decimal number";
                };
                return ByteOrderMarks.printable(e.key()) + "=" + ByteOrderMarks.printable(e.value().strip())
                        + ", which FileInstall cannot read as a typed value (" + m.group(1) + ": " + takes + ")";
            }
        }
        return null;
    }
}
