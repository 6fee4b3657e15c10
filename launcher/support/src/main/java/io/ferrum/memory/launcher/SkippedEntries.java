package io.ferrum.memory.launcher;

import java.io.IOException;
import java.nio.file.DirectoryIteratorException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

import org.osgi.framework.BundleContext;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.log.Logger;
import org.osgi.service.log.LoggerFactory;

/**
 * Names the entries of the watched folders that FileInstall skips without a word, each in one error
 * line:
 * <ul>
 * <li>a symbolic link that leads to no file ({@code ln -s /nowhere config/x.cfg}: its target gone,
 * never there, out of reach, or a loop of links), which FileInstall takes for a file deleted;
 * <li>an empty folder named as a configuration file ({@code config/x.cfg/}, or a symbolic link to an
 * empty folder), which FileInstall fails to pack into a jar (a jar needs an entry) and says so only at
 * a log level the distribution does not show. A folder with something in it is packed, and {@link
 * FolderNamedAsConfigFile} names it;
 * <li>any other folder holding a file FileInstall would read in the watched folder itself (one whose
 * name its filter takes: {@code config/ferrum/io.ferrum.memory.cpu.device-t1.cfg}, {@code
 * plugins/extra/x.jar}). A watched folder is not read recursively: FileInstall 3.7.4 takes such a
 * folder for an exploded bundle, packs it into a jar of its temporary folder, which no installer but
 * {@link FolderThatIsNoBundle} takes (and that one silently), without a word;
 * <li>an exploded bundle (a folder holding {@code META-INF/MANIFEST.MF}) holding no file whose path the
 * filter takes: FileInstall notices a folder only by such a file in it ({@link NoticedFiles}), so it never
 * installs this one. One holding such a file
 * (a {@code .jar} on its {@code Bundle-ClassPath}) is installed, and not named.
 * </ul>
 * Only the names FileInstall looks at ({@code felix.fileinstall.filter}) are looked at, folders whatever
 * their names, and no hidden name (a name starting with {@code .}: an editor's lock, {@code .#x.cfg}, is
 * a link to nothing while the file is edited; {@code config/.git/}). The folders are looked at when this component starts, then at FileInstall's
 * poll interval ({@code felix.fileinstall.poll}, 2 s unless set), or nine times as long as the last look took
 * when that is longer ({@link PacedChecks}: a folder of many thousand entries); an entry is named again only when
 * what is wrong with it changes, or once it was fixed or removed and comes back.
 */
@Component(immediate = true, service = {})
public final class SkippedEntries {
    private final List<Path> watched = new ArrayList<>();
    private final Pattern filter;
    private final Logger log;
    /** The line given for each entry while the entry earns it; used by the scanning thread only. */
    private final Map<Path, String> named = new HashMap<>();
    private final PacedChecks scans;

    @Activate
    public SkippedEntries(BundleContext context, @Reference(service = LoggerFactory.class) Logger log) {
        this(WatchedFolders.of(context), context.getProperty("felix.fileinstall.filter"), log);
        start(WatchedFolders.pollMillis(context));
    }

    /**
     * @param watched the watched folders
     * @param filter  the names FileInstall looks at, a regular expression; null: every name
     */
    SkippedEntries(List<Path> watched, String filter, Logger log) {
        this(watched, filter, log, PacedChecks.Timer.ofThread("ferrum skipped entries"));
    }

    /** @param timer where and when the scans run */
    SkippedEntries(List<Path> watched, String filter, Logger log, PacedChecks.Timer timer) {
        this.watched.addAll(watched);
        this.filter = filter == null || filter.isBlank() ? null : Pattern.compile(filter);
        this.log = log;
        scans = new PacedChecks(this::scan, e -> log.error("Looking at the watched folders {} for entries FileInstall skips"
                + " failed: {}; the looks go on", ControlCharacters.escaped(watched),
                ControlCharacters.escaped(e.toString()), e), timer);
    }

    /** Scans at once, then at FileInstall's poll interval {@code pollMillis}, spaced ({@link PacedChecks}). */
    void start(long pollMillis) {
        scans.start(pollMillis);
    }

    @Deactivate
    void stop() {
        scans.stop();
    }

    /** Looks at every watched folder once, and names each entry that earns a line it was not given yet. */
    void scan() {
        Map<Path, String> now = new HashMap<>();
        for (Path dir : watched) {
            try (DirectoryStream<Path> entries = Files.newDirectoryStream(dir)) {
                for (Path entry : entries) {
                    String name = entry.getFileName().toString();
                    if (name.startsWith(".")
                            || filter != null && !filter.matcher(name).matches() && !Files.isDirectory(entry)) {
                        continue;
                    }
                    String why = whySkipped(entry, filter);
                    if (why != null) {
                        now.put(entry, why);
                    }
                }
            } catch (IOException | DirectoryIteratorException | SecurityException unreadable) {
                // The folder gone or unreadable: FileInstall finds nothing in it either.
            }
        }
        now.forEach((entry, why) -> {
            if (!why.equals(named.get(entry))) {
                log.error("{}", why);
            }
        });
        named.keySet().retainAll(now.keySet());
        named.putAll(now);
    }

    /**
     * @param entry  an entry of a watched folder
     * @param filter the names FileInstall looks at; null: every name
     * @return the line naming it when FileInstall skips it without a word, or null
     */
    static String whySkipped(Path entry, Pattern filter) {
        try {
            boolean link = Files.isSymbolicLink(entry);
            String shown = ControlCharacters.escaped(entry.toAbsolutePath())
                    + (link ? " (a symbolic link to " + ControlCharacters.escaped(Files.readSymbolicLink(entry)) + ")" : "");
            if (link && !Files.exists(entry)) {
                return shown + " leads to no file FileInstall can see (gone, never there, out of reach, or a loop of"
                        + " links): FileInstall skips it, so nothing is made of it; point the link at a file or remove it";
            }
            if (!Files.isDirectory(entry)) {
                return null;
            }
            if (ConfigFileEntries.isConfigName(entry.getFileName().toString())) {
                try (DirectoryStream<Path> in = Files.newDirectoryStream(entry)) {
                    return in.iterator().hasNext() ? null : shown + " is an empty folder: FileInstall makes configurations"
                            + " of files only, so it configures nothing; put the configuration in a file of that name";
                }
            }
            boolean readable = NoticedFiles.first(entry, filter) != null;
            if (Files.isRegularFile(entry.resolve("META-INF").resolve("MANIFEST.MF"))) {
                return readable ? null : shown + " is an exploded bundle (it holds META-INF/MANIFEST.MF) that FileInstall"
                        + " never installs: it notices a folder only by a file in it whose name its filter takes ("
                        + ControlCharacters.escaped(filter) + "), and none does; put the bundle in a jar in its place";
            }
            if (readable) {
                String watched = ControlCharacters.escaped(entry.toAbsolutePath().getParent());
                return shown + " is a folder: " + watched + " is not read recursively, so the configuration files and"
                        + " bundles in it are neither applied nor installed; put them in " + watched + " itself (a folder"
                        + " there is installed only as an exploded bundle, one holding META-INF/MANIFEST.MF)";
            }
        } catch (IOException | DirectoryIteratorException | SecurityException unreadable) {
            // Gone or changed meanwhile: the next look decides.
        }
        return null;
    }
}
