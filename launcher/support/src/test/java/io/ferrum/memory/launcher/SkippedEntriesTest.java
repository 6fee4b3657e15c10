package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.osgi.service.log.Logger;

/**
 * Entries of config/ that FileInstall skips without a word, on a real file system: a symbolic link to
 * nothing, and an empty folder (or a link to one) named as a configuration file.
 */
class SkippedEntriesTest {
    private static final String FILTER = ".*\\.(jar|cfg|config)";

    @TempDir
    Path dir;

    private final List<String> errors = new ArrayList<>();
    /** How many error lines the logger is to refuse yet, throwing. */
    private int refuse;

    /** A logger that keeps each error line, as the Log Service formats {@code error("{}", line)}. */
    private final Logger log = (Logger) Proxy.newProxyInstance(Logger.class.getClassLoader(), new Class<?>[] {Logger.class},
            (proxy, m, args) -> {
                if (m.getName().equals("error")) {
                    if (refuse > 0) {
                        refuse--;
                        throw new IllegalStateException("refused: " + args[1]);
                    }
                    errors.add(String.valueOf(args[1] instanceof Object[] a ? a[0] : args[1]));
                }
                return null;
            });

    private static String dangling(Path link, String target) {
        return link + " (a symbolic link to " + target + ") leads to no file FileInstall can see (gone, never there, out of"
                + " reach, or a loop of links): FileInstall skips it, so nothing is made of it; point the link at a file or"
                + " remove it";
    }

    private static String emptyFolder(String shown) {
        return shown + " is an empty folder: FileInstall makes configurations of files only, so it configures nothing;"
                + " put the configuration in a file of that name";
    }

    @Test
    void aLinkToNothingAndAnEmptyFolderAreNamedOnceEachAndNothingElse() throws Exception {
        Path config = Files.createDirectories(dir.resolve("config"));
        Path plugins = Files.createDirectories(dir.resolve("plugins"));
        Path nowhere = Files.createSymbolicLink(config.resolve("io.ferrum.memory.cpu.device-t1.cfg"), Path.of("/nowhere"));
        Path loop = config.resolve("io.ferrum.memory.cpu.device-t2.cfg");
        Files.createSymbolicLink(loop, loop.getFileName());
        Path empty = Files.createDirectories(dir.resolve("empty"));
        Path toEmpty = Files.createSymbolicLink(config.resolve("io.ferrum.memory.cpu.device-t3.cfg"), empty);
        Path emptyHere = Files.createDirectories(config.resolve("io.ferrum.memory.cpu.device-t4.cfg"));
        Path jar = Files.createSymbolicLink(plugins.resolve("gone.jar"), dir.resolve("gone.jar"));
        // Not named: a link to a file, a folder with something in it (FolderNamedAsConfigFile's), a name
        // FileInstall does not look at, an editor's lock.
        Path file = Files.writeString(dir.resolve("t5.cfg"), "index=5\n");
        Files.createSymbolicLink(config.resolve("io.ferrum.memory.cpu.device-t5.cfg"), file);
        Files.writeString(Files.createDirectories(config.resolve("io.ferrum.memory.cpu.device-t6.cfg")).resolve("x"), "x");
        Files.createSymbolicLink(config.resolve("notes.txt"), Path.of("/nowhere"));
        Files.createSymbolicLink(config.resolve(".#io.ferrum.memory.cpu.cfg"), Path.of("user@host.1234:1765"));
        Files.createDirectories(plugins.resolve("empty.jar"));
        SkippedEntries entries = new SkippedEntries(List.of(config, plugins), FILTER, log);
        try {
            entries.scan();
            entries.scan();
        } finally {
            entries.stop();
        }

        assertEquals(List.of(dangling(jar, dir.resolve("gone.jar").toString()), dangling(loop, loop.getFileName().toString()),
                dangling(nowhere, "/nowhere"), emptyFolder(toEmpty + " (a symbolic link to " + empty + ")"),
                emptyFolder(emptyHere.toString())).stream().sorted().toList(), errors.stream().sorted().toList());
    }

    private static String notRecursive(Path folder, Path watched) {
        return folder + " is a folder: " + watched + " is not read recursively, so the configuration files and bundles in it"
                + " are neither applied nor installed; put them in " + watched + " itself (a folder there is installed only"
                + " as an exploded bundle, one holding META-INF/MANIFEST.MF)";
    }

    private static String unseenBundle(Path folder) {
        return folder + " is an exploded bundle (it holds META-INF/MANIFEST.MF) that FileInstall never installs: it notices"
                + " a folder only by a file in it whose name its filter takes (" + FILTER + "), and none does; put the bundle"
                + " in a jar in its place";
    }

    private static Path explodedBundle(Path folder) throws Exception {
        Path manifest = Files.createDirectories(folder.resolve("META-INF")).resolve("MANIFEST.MF");
        Files.writeString(manifest, "Manifest-Version: 1.0\nBundle-ManifestVersion: 2\nBundle-SymbolicName: org.example."
                + folder.getFileName() + "\n\n");
        return folder;
    }

    /**
     * A folder in config/ holding a configuration file (config/ferrum/io.ferrum.memory.cpu.device-t1.cfg,
     * a user expecting subfolders to be read): FileInstall packs the folder into a jar that no installer
     * takes, again at every poll, and says nothing. It is named once, as is a folder of jars in plugins/
     * and an exploded bundle FileInstall never notices; an exploded bundle it installs, a folder holding
     * nothing FileInstall reads and a hidden one are not named.
     */
    @Test
    void aFolderHoldingFilesToReadIsNamedOnceAndAnExplodedBundleLeftAlone() throws Exception {
        Path config = Files.createDirectories(dir.resolve("config"));
        Path plugins = Files.createDirectories(dir.resolve("plugins"));
        Path ferrum = Files.createDirectories(config.resolve("ferrum"));
        Files.writeString(ferrum.resolve("io.ferrum.memory.cpu.device-t1.cfg"), "index=1\n");
        Path deep = Files.createDirectories(config.resolve("deep").resolve("er"));
        Files.writeString(deep.resolve("io.ferrum.memory.monitor.cfg"), "strategy=most-free\n");
        Path extra = Files.createDirectories(plugins.resolve("extra"));
        Files.writeString(extra.resolve("plugin.jar"), "x");
        Path unseen = explodedBundle(plugins.resolve("unseen.jar"));
        // Not named: an exploded bundle that FileInstall installs (a file in it its filter takes), a folder
        // of notes, a hidden folder.
        Path installed = explodedBundle(plugins.resolve("installed"));
        Files.writeString(Files.createDirectories(installed.resolve("lib")).resolve("inner.jar"), "x");
        Files.writeString(Files.createDirectories(config.resolve("notes")).resolve("README.txt"), "x");
        Files.writeString(Files.createDirectories(config.resolve(".git")).resolve("x.cfg"), "x");
        SkippedEntries entries = new SkippedEntries(List.of(config, plugins), FILTER, log);
        try {
            entries.scan();
            entries.scan();
        } finally {
            entries.stop();
        }

        assertEquals(List.of(notRecursive(ferrum, config), notRecursive(config.resolve("deep"), config),
                notRecursive(extra, plugins), unseenBundle(unseen)).stream().sorted().toList(), errors.stream().sorted().toList());
    }

    @Test
    void aFixedEntryIsForgottenAndNamedAgainWhenItBreaksAgain() throws Exception {
        Path config = Files.createDirectories(dir.resolve("config"));
        Path link = Files.createSymbolicLink(config.resolve("io.ferrum.memory.cpu.device-t1.cfg"), Path.of("/nowhere"));
        SkippedEntries entries = new SkippedEntries(List.of(config), FILTER, log);
        try {
            entries.scan();
            assertEquals(List.of(dangling(link, "/nowhere")), errors, "named at the first look");
            Files.delete(link);
            Files.writeString(link, "index=1\n");
            entries.scan();
            assertEquals(1, errors.size(), "a file in its place: nothing to name");
            Files.delete(link);
            Files.createSymbolicLink(link, Path.of("/elsewhere"));
            entries.scan();
            entries.scan();
            assertEquals(List.of(dangling(link, "/nowhere"), dangling(link, "/elsewhere")), errors, "named again, once");
        } finally {
            entries.stop();
        }
    }

    /**
     * A scan that throws (here the Log Service refusing a line) is followed by the next all the same, and a
     * slow one only after nine times its duration; the scans' clock and scheduling are the test's.
     */
    @Test
    void aScanThatThrowsIsFollowedByTheNextAndASlowOneIsSpaced() throws Exception {
        Path config = Files.createDirectories(dir.resolve("config"));
        Path link = Files.createSymbolicLink(config.resolve("io.ferrum.memory.cpu.device-t1.cfg"), Path.of("/nowhere"));
        ManualTimer timer = new ManualTimer();
        SkippedEntries entries = new SkippedEntries(List.of(config), FILTER, log, timer);
        refuse = 1;
        entries.start(50);
        timer.runNext();
        assertEquals(1, errors.size(), "the failure told: " + errors);
        assertEquals(List.of(config).toString(), errors.get(0), "the failure names the watched folders");
        assertEquals(TimeUnit.MILLISECONDS.toNanos(50), timer.nextDelay(), "a quick scan: the next at the poll interval");

        timer.runNext();
        assertEquals(List.of(List.of(config).toString(), dangling(link, "/nowhere")), errors, "the next scan names the link");

        timer.everyReadTakes(TimeUnit.SECONDS.toNanos(2));
        timer.runNext();
        assertEquals(TimeUnit.SECONDS.toNanos(18), timer.nextDelay(), "a scan of 2 s: the next after 18 s");
        assertEquals(2, errors.size(), "the link named once: " + errors);

        entries.stop();
        assertFalse(timer.hasNext(), "stopped: no scan scheduled");
    }
}
