package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

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

    /** A logger that keeps each error line, as the Log Service formats {@code error("{}", line)}. */
    private final Logger log = (Logger) Proxy.newProxyInstance(Logger.class.getClassLoader(), new Class<?>[] {Logger.class},
            (proxy, m, args) -> {
                if (m.getName().equals("error")) {
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
}
