package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.List;
import java.util.jar.Attributes;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.osgi.service.log.Logger;

/**
 * What FileInstall packs of a folder in a watched folder and no installer takes, on a real file system;
 * FileInstall's side (its packing and its calls) played by the test.
 */
class FolderThatIsNoBundleTest {
    private static final String FILTER = ".*\\.(jar|cfg|config)";
    private static final FileTime BACK = FileTime.fromMillis(1_000_000_000_000L);

    @TempDir
    Path dir;

    private Path config;
    private Path plugins;
    private Path tmp;
    private FolderThatIsNoBundle installer;
    private final List<String> errors = new ArrayList<>();
    /** How many error lines the logger is to refuse yet, throwing. */
    private int refuse;

    /** A logger that keeps each error line, its arguments put in place of {@code {}}. */
    private final Logger log = (Logger) Proxy.newProxyInstance(Logger.class.getClassLoader(), new Class<?>[] {Logger.class},
            (proxy, m, args) -> {
                if (m.getName().equals("error")) {
                    if (refuse > 0) {
                        refuse--;
                        throw new IllegalStateException("refused");
                    }
                    String line = (String) args[0];
                    Object[] values = args.length == 2 && args[1] instanceof Object[] all ? all
                            : java.util.Arrays.copyOfRange(args, 1, args.length);
                    for (Object value : values) {
                        line = line.replaceFirst("\\{}", java.util.regex.Matcher.quoteReplacement(String.valueOf(value)));
                    }
                    errors.add(line);
                }
                return null;
            });

    @BeforeEach
    void folders() throws IOException {
        config = Files.createDirectories(dir.resolve("config"));
        plugins = Files.createDirectories(dir.resolve("plugins"));
        tmp = Files.createDirectories(dir.resolve("tmp"));
        installer = new FolderThatIsNoBundle(List.of(config, plugins), FILTER, log);
    }

    @AfterEach
    void stop() {
        installer.stop();
    }

    /** Packs {@code folder} into {@code tmp/<name>.jar} as FileInstall does: its manifest first, if any. */
    private Path packed(Path folder) throws IOException {
        Path jar = tmp.resolve(folder.getFileName() + ".jar");
        Path manifest = folder.resolve("META-INF").resolve("MANIFEST.MF");
        try (JarOutputStream out = new JarOutputStream(Files.newOutputStream(jar))) {
            if (Files.isRegularFile(manifest)) {
                out.putNextEntry(new JarEntry("META-INF/MANIFEST.MF"));
                out.write(Files.readAllBytes(manifest));
                out.closeEntry();
            }
            out.putNextEntry(new JarEntry("x"));
            out.closeEntry();
        }
        return jar;
    }

    private static void manifest(Path folder, String symbolicName) throws IOException {
        Manifest m = new Manifest();
        m.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
        if (symbolicName != null) {
            m.getMainAttributes().putValue("Bundle-SymbolicName", symbolicName);
        }
        try (var out = Files.newOutputStream(Files.createDirectories(folder.resolve("META-INF")).resolve("MANIFEST.MF"))) {
            m.write(out);
        }
    }

    /** A folder of plugins/ holding a jar, by which FileInstall notices it; its time set back. */
    private Path folderWithAJar(String name) throws IOException {
        Path folder = Files.createDirectories(plugins.resolve(name));
        Path jar = Files.writeString(Files.createDirectories(folder.resolve("lib")).resolve("inner.jar"), "x");
        Files.setLastModifiedTime(jar, BACK);
        return folder;
    }

    @Test
    void takesTheJarOfAFolderThatIsNoBundleAndNothingElse() throws Exception {
        Path extra = folderWithAJar("extra");
        Path ferrum = Files.createDirectories(config.resolve("ferrum"));
        Files.writeString(ferrum.resolve("io.ferrum.memory.cpu.device-t1.cfg"), "index=1\n");
        Path noName = folderWithAJar("no-name");
        manifest(noName, null);
        Path bundle = folderWithAJar("bundle");
        manifest(bundle, "org.example.bundle");
        Path namedAsConfig = Files.createDirectories(config.resolve("x.cfg"));
        Files.writeString(namedAsConfig.resolve("inner.cfg"), "a=b\n");
        Path plain = Files.write(plugins.resolve("plain.jar"), new byte[0]);

        assertTrue(installer.canHandle(packed(extra).toFile()), "a folder of jars");
        assertTrue(installer.canHandle(packed(ferrum).toFile()), "a folder of configuration files");
        assertTrue(installer.canHandle(packed(noName).toFile()), "a manifest without Bundle-SymbolicName");
        assertFalse(installer.canHandle(packed(bundle).toFile()), "an exploded bundle: FileInstall's");
        assertFalse(installer.canHandle(packed(namedAsConfig).toFile()), "FolderNamedAsConfigFile's");
        assertFalse(installer.canHandle(plain.toFile()), "a jar in a watched folder: NotABundleReporter's");
        assertFalse(installer.canHandle(Files.write(tmp.resolve("gone.jar"), new byte[0]).toFile()), "no such folder");
    }

    /**
     * After a restart of this bundle FileInstall asks no installer about a folder it packed until it changes:
     * each folder packed as no bundle is brought to its notice, and taken when FileInstall asks, even one that
     * became a bundle meanwhile (FileInstall would update a bundle it never installed), which is then handed
     * back. A folder packed as a bundle, one not packed, or one named as a configuration file is left alone.
     */
    @Test
    void afterARestartTheFoldersPackedAsNoBundleAreBroughtToNoticeAndTakenAgain() throws Exception {
        Path plain = folderWithAJar("plain");
        packed(plain);
        Path late = folderWithAJar("late");
        packed(late);
        manifest(late, "org.example.late");
        Path bundle = folderWithAJar("bundle");
        manifest(bundle, "org.example.bundle");
        packed(bundle);
        Path unpacked = folderWithAJar("unpacked");
        Path namedAsConfig = Files.createDirectories(config.resolve("x.cfg"));
        Path cfg = Files.writeString(namedAsConfig.resolve("inner.cfg"), "a=b\n");
        Files.setLastModifiedTime(cfg, BACK);
        packed(namedAsConfig);

        installer.claimAgain(tmp);

        assertNotEquals(BACK, Files.getLastModifiedTime(plain.resolve("lib").resolve("inner.jar")), "plain was not brought to notice");
        Path lateJar = late.resolve("lib").resolve("inner.jar");
        assertNotEquals(BACK, Files.getLastModifiedTime(lateJar), "late was not brought to notice");
        assertEquals(BACK, Files.getLastModifiedTime(bundle.resolve("lib").resolve("inner.jar")), "a bundle was brought to notice");
        assertEquals(BACK, Files.getLastModifiedTime(unpacked.resolve("lib").resolve("inner.jar")), "an unpacked folder was");
        assertEquals(BACK, Files.getLastModifiedTime(cfg), "FolderNamedAsConfigFile's folder was");
        assertTrue(installer.canHandle(packed(plain).toFile()), "plain is claimed again");
        assertTrue(installer.canHandle(packed(late).toFile()), "late, a bundle now, is taken once all the same");
        assertFalse(installer.canHandle(packed(bundle).toFile()), "an exploded bundle: FileInstall's");

        Files.setLastModifiedTime(lateJar, BACK);
        installer.update(late.toFile());
        assertNotEquals(BACK, Files.getLastModifiedTime(lateJar), "late, a bundle, was not handed back");
        assertFalse(installer.canHandle(packed(late).toFile()), "late is FileInstall's now");
        assertEquals(List.of(), errors);
    }

    /**
     * A folder copied in, its manifest last: FileInstall does not notice a manifest, so the time of the jar
     * in it is moved on once, and again when FileInstall hands the folder back, a bundle now.
     */
    @Test
    void aClaimedFolderWhoseManifestComesIsBroughtBackToFileInstall() throws Exception {
        Path late = folderWithAJar("late");
        Path inner = late.resolve("lib").resolve("inner.jar");
        assertTrue(installer.canHandle(packed(late).toFile()));
        installer.install(late.toFile());
        installer.check();
        assertEquals(BACK, Files.getLastModifiedTime(inner), "nothing changed: FileInstall is left alone");

        manifest(late, "org.example.late");
        installer.check();
        FileTime prodded = Files.getLastModifiedTime(inner);
        assertNotEquals(BACK, prodded, "the manifest came: FileInstall is to pack the folder again");
        installer.check();
        assertEquals(prodded, Files.getLastModifiedTime(inner), "once, not at every look");

        assertFalse(installer.canHandle(packed(late).toFile()), "a bundle now");
        Files.setLastModifiedTime(inner, BACK);
        installer.uninstall(late.toFile());
        assertNotEquals(BACK, Files.getLastModifiedTime(inner), "handed back: FileInstall is to look at it again");
        installer.check();
        assertEquals(List.of(), errors);
    }

    /** A folder that changes and is still no bundle is claimed again, silently; one that goes is forgotten. */
    @Test
    void aFolderStillNoBundleOrGoneIsLeftToFileInstall() throws Exception {
        Path extra = folderWithAJar("extra");
        Path inner = extra.resolve("lib").resolve("inner.jar");
        installer.install(extra.toFile());
        Files.writeString(extra.resolve("more.jar"), "y");
        assertTrue(installer.canHandle(packed(extra).toFile()));
        installer.update(extra.toFile());
        installer.check();
        assertEquals(BACK, Files.getLastModifiedTime(inner));
        try (var all = Files.walk(extra)) {
            for (Path p : all.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.delete(p);
            }
        }
        installer.uninstall(extra.toFile());
        installer.check();
        assertFalse(Files.exists(extra));
        assertEquals(List.of(), errors);
    }

    /** A folder whose manifest has no Bundle-SymbolicName is named, once for each version of it. */
    @Test
    void aFolderWithAManifestWithoutSymbolicNameIsNamed() throws Exception {
        Path noName = folderWithAJar("no-name");
        manifest(noName, null);
        String line = noName.toAbsolutePath() + " is not installed: it holds META-INF/MANIFEST.MF, but it has no"
                + " Bundle-SymbolicName; give the manifest a Bundle-SymbolicName, or remove the folder";
        installer.install(noName.toFile());
        installer.check();
        installer.check();
        assertEquals(List.of(line), errors);
    }

    /**
     * A claimed folder whose files FileInstall notices lie outside the watched folders, behind symbolic
     * links (a library folder or a jar linked in): their times are the user's, elsewhere, and stay as they
     * are; the folder whose manifest came is named instead, once. A file of the folder's own is moved on.
     */
    @Test
    void aFileOutsideTheWatchedFoldersIsNeverTouched() throws Exception {
        Path outside = Files.createDirectories(dir.resolve("outside").resolve("lib"));
        Path theirs = Files.writeString(outside.resolve("theirs.jar"), "x");
        Files.setLastModifiedTime(theirs, BACK);
        Path linkedFolder = Files.createDirectories(plugins.resolve("linked-folder"));
        Files.createSymbolicLink(linkedFolder.resolve("lib"), outside);
        Path linkedJar = Files.createDirectories(plugins.resolve("linked-jar"));
        Files.createSymbolicLink(linkedJar.resolve("theirs.jar"), theirs);

        for (Path folder : List.of(linkedFolder, linkedJar)) {
            assertTrue(installer.canHandle(packed(folder).toFile()));
            installer.install(folder.toFile());
            manifest(folder, "org.example." + folder.getFileName());
            installer.check();
            installer.check();
            assertEquals(BACK, Files.getLastModifiedTime(theirs), folder + ": a file outside was touched");
            installer.uninstall(folder.toFile());
            assertEquals(BACK, Files.getLastModifiedTime(theirs), folder + " handed back: a file outside was touched");
        }
        // Each folder named when its manifest came, and when handed back (FileInstall packed it again
        // because the user touched that file; FileInstall then forgets it until it changes once more).
        assertEquals(4, errors.size(), errors.toString());
        assertEquals(linkedFolder.toAbsolutePath() + " is not read again: FileInstall notices it only by "
                + linkedFolder.toAbsolutePath().resolve("lib").resolve("theirs.jar") + ", which lies outside the watched"
                + " folders (a symbolic link leads there), and the distribution changes no file there; touch that file to"
                + " have FileInstall read linked-folder again", errors.get(0));
        assertEquals(errors.get(0), errors.get(1));

        Path own = Files.writeString(linkedJar.resolve("own.jar"), "y");
        Files.setLastModifiedTime(own, BACK);
        Files.delete(linkedJar.resolve("META-INF").resolve("MANIFEST.MF"));
        installer.install(linkedJar.toFile());
        manifest(linkedJar, "org.example.again");
        installer.check();
        assertNotEquals(BACK, Files.getLastModifiedTime(own), "the folder's own file is moved on");
        assertEquals(BACK, Files.getLastModifiedTime(theirs));
    }

    /**
     * A check of the claimed folders that throws (here the Log Service refusing the line naming a folder
     * FileInstall notices only by a file outside) is followed by the next all the same, which brings a
     * folder whose manifest came since back to FileInstall; the checks' clock and scheduling are the test's.
     */
    @Test
    void aCheckThatThrowsIsFollowedByTheNext() throws Exception {
        installer.stop();
        ManualTimer timer = new ManualTimer();
        installer = new FolderThatIsNoBundle(List.of(config, plugins), FILTER, log, timer);
        Path outside = Files.createDirectories(dir.resolve("outside"));
        Files.setLastModifiedTime(Files.writeString(outside.resolve("theirs.jar"), "x"), BACK);
        Path linked = Files.createDirectories(plugins.resolve("linked"));
        Files.createSymbolicLink(linked.resolve("lib"), outside);
        installer.install(linked.toFile());
        installer.start(50);
        timer.runNext();
        manifest(linked, "org.example.linked");
        refuse = 1;
        timer.runNext();
        assertEquals(1, errors.size(), "the failure told: " + errors);
        assertTrue(errors.get(0).startsWith("Looking at the manifests of the claimed folders of " + List.of(config, plugins)
                + " failed: java.lang.IllegalStateException: refused; "), errors.get(0));

        Path late = folderWithAJar("late");
        installer.install(late.toFile());
        manifest(late, "org.example.late");
        timer.runNext();
        assertNotEquals(BACK, Files.getLastModifiedTime(late.resolve("lib").resolve("inner.jar")),
                "the next check brought the folder whose manifest came back to FileInstall");
    }
}
