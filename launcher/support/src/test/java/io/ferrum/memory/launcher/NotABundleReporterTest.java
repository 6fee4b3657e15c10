package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.List;
import java.util.jar.Attributes;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;

import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.osgi.service.log.Logger;

/** The jars of a watched folder that are no bundle, on a real file system; FileInstall's calls played by the test. */
class NotABundleReporterTest {
    private static final FileTime BACK = FileTime.fromMillis(1_000_000_000_000L);

    @TempDir
    Path dir;

    private Path plugins;
    private Path config;
    private NotABundleReporter installer;
    private final List<String> errors = new ArrayList<>();

    /** A logger that keeps each error line's arguments. */
    private final Logger log = (Logger) Proxy.newProxyInstance(Logger.class.getClassLoader(), new Class<?>[] {Logger.class},
            (proxy, m, args) -> {
                if (m.getName().equals("error")) {
                    errors.add(String.valueOf(args[1]));
                }
                return null;
            });

    @BeforeEach
    void folders() throws IOException {
        plugins = Files.createDirectories(dir.resolve("plugins"));
        config = Files.createDirectories(dir.resolve("config"));
        installer = new NotABundleReporter(List.of(config, plugins), log);
    }

    /** Writes a jar with a manifest naming {@code symbolicName} (none when null) at {@code jar}, its time set back. */
    private static Path jar(Path jar, String symbolicName) throws IOException {
        Manifest m = new Manifest();
        m.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
        if (symbolicName != null) {
            m.getMainAttributes().putValue("Bundle-ManifestVersion", "2");
            m.getMainAttributes().putValue("Bundle-SymbolicName", symbolicName);
        }
        Path written = jar.resolveSibling(jar.getFileName() + ".part");
        try (JarOutputStream out = new JarOutputStream(Files.newOutputStream(written), m)) {
            out.putNextEntry(new JarEntry("a.txt"));
            out.closeEntry();
        }
        Files.move(written, jar, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        Files.setLastModifiedTime(jar, BACK);
        return jar;
    }

    private static Path text(Path file) throws IOException {
        Files.writeString(file, "no jar");
        Files.setLastModifiedTime(file, BACK);
        return file;
    }

    @Test
    void takesTheJarsOfTheWatchedFoldersThatAreNoBundleAndNamesEachVersionOnce() throws Exception {
        Path plain = text(plugins.resolve("plain.jar"));
        Path noName = jar(plugins.resolve("no-name.jar"), null);
        Path bundle = jar(plugins.resolve("bundle.jar"), "org.example.bundle");
        Path elsewhere = text(Files.createDirectories(dir.resolve("lib")).resolve("other.jar"));

        assertTrue(installer.canHandle(plain.toFile()), "a file that is no jar");
        assertTrue(installer.canHandle(noName.toFile()), "a jar without Bundle-SymbolicName");
        assertFalse(installer.canHandle(bundle.toFile()), "a bundle: FileInstall's");
        assertFalse(installer.canHandle(elsewhere.toFile()), "outside the watched folders");
        assertFalse(installer.canHandle(Files.createDirectories(plugins.resolve("folder.jar")).toFile()), "a folder");

        installer.install(plain.toFile());
        assertEquals(List.of(plain.toString()), errors, "one line for the version FileInstall installs");
        installer.uninstall(jar(plain, "org.example.plain").toFile());
        assertNotEquals(BACK, Files.getLastModifiedTime(plain), "a bundle in its place is read again");
    }

    /**
     * After a restart of this bundle FileInstall asks no installer about a file it has taken until it changes,
     * and would update a bundle it never installed when one replaces it: each jar of the watched folders that is
     * no bundle is brought to its notice, and taken when FileInstall asks next even if it became a bundle
     * meanwhile, which is then handed back at once. A bundle, a configuration file or a folder is left alone.
     */
    @Test
    void afterARestartTheJarsThatAreNoBundleAreBroughtToNoticeAndTakenAgain() throws Exception {
        Path plain = text(plugins.resolve("plain.jar"));
        Path late = text(plugins.resolve("late.jar"));
        Path bundle = jar(plugins.resolve("bundle.jar"), "org.example.bundle");
        Path cfg = text(config.resolve("a.cfg"));
        Path folder = Files.createDirectories(plugins.resolve("folder.jar"));
        Files.setLastModifiedTime(folder, BACK);

        installer.claimEntriesAgain();

        assertNotEquals(BACK, Files.getLastModifiedTime(plain), "plain was not brought to notice");
        assertNotEquals(BACK, Files.getLastModifiedTime(late), "late was not brought to notice");
        assertEquals(BACK, Files.getLastModifiedTime(bundle), "a bundle was brought to notice");
        assertEquals(BACK, Files.getLastModifiedTime(cfg), "a configuration file was");
        assertEquals(BACK, Files.getLastModifiedTime(folder), "a folder was");

        jar(late, "org.example.late");
        assertTrue(installer.canHandle(plain.toFile()), "plain is claimed again");
        assertTrue(installer.canHandle(late.toFile()), "late, a bundle now, is taken once all the same");
        assertFalse(installer.canHandle(bundle.toFile()), "a bundle: FileInstall's");

        installer.update(late.toFile());
        assertNotEquals(BACK, Files.getLastModifiedTime(late), "late, a bundle, was not handed back");
        assertFalse(installer.canHandle(late.toFile()), "late is still taken");
        installer.update(plain.toFile());
        assertEquals(List.of(plain.toString()), errors, "plain is named again, late not at all");
        assertTrue(installer.canHandle(plain.toFile()), "plain, still no bundle, is still claimed");
    }
}
