package io.ferrum.memory.launcher;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.DirectoryIteratorException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.FileTime;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.jar.Manifest;
import java.util.regex.Pattern;

import org.apache.felix.fileinstall.ArtifactInstaller;
import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.log.Logger;
import org.osgi.service.log.LoggerFactory;

/**
 * Claims, for FileInstall, the jar it packs of a folder in a watched folder that is no bundle: a folder of
 * configuration files or jars ({@code config/ferrum/}, {@code plugins/extra/}), an unzipped archive, an
 * exploded bundle still being copied in (its manifest not there yet). FileInstall 3.7.4 notices such a
 * folder by a file in it ({@link NoticedFiles}), packs the whole folder into a jar of its temporary folder
 * ({@code tmp/ferrum.jar}), finds no installer for that jar, and tries again at every poll what no installer
 * took: it read and wrote the whole folder every 50 ms for as long as the folder was there. Claimed, the
 * folder is packed again only when a file FileInstall notices in it changes.
 *
 * <p>FileInstall asks its installers by service ranking, and this one has the lowest (-1): it takes only
 * what every other installer passed over, and never a jar with a {@code Bundle-SymbolicName}, which
 * FileInstall's own bundle installer, asked last, takes; nor a folder named as a configuration file,
 * {@link FolderNamedAsConfigFile}'s.
 *
 * <p>A folder that becomes a bundle must be handed back, and FileInstall would not see it: a manifest
 * written into a claimed folder is no file it notices. So the manifest of each claimed folder is looked
 * at at FileInstall's poll interval (one file's attributes a folder; spaced by {@link PacedChecks} when the
 * look takes longer than a ninth of it); when it changed since FileInstall
 * packed the folder, the modification time of a file FileInstall notices in it is moved on ({@link
 * ReadAgain}; one that lies in the watched folders: when FileInstall notices the folder only by files
 * behind symbolic links that lead out of them, one error line says to touch one). FileInstall packs the folder again and asks this installer about it; a bundle now, it is
 * taken from this installer ({@link #handBack}), which moves the time on once more, since FileInstall
 * then forgets the folder until it changes; at its next poll FileInstall installs it.
 *
 * <p>When this bundle is restarted in a running framework ({@code update io.ferrum.memory.launcher}, a
 * stop and start, a refresh), FileInstall only takes the old instance off the artifacts it claimed, and asks
 * no installer about them until a file it notices in them changes (3.7.4, {@code
 * DirectoryWatcher.removeListener} and {@code addListener}, which asks again about bundles only): the new
 * instance would start with no claims, and a manifest written into such a folder then would go unseen for
 * good. Nor may the new instance just watch the folder: an artifact without installer that FileInstall finds
 * to be a bundle is taken as an update of a bundle it never installed, which fails. So each folder whose jar
 * FileInstall packed ({@code felix.fileinstall.tmpdir}) holds no bundle is brought to FileInstall's notice
 * once, and this installer takes it again even if it became a bundle meanwhile ({@link #claimAgain}); one
 * that did is then handed back as above. At the framework's start FileInstall asks the installers itself,
 * and a jar there may be left from a killed run, so nothing is claimed again then.
 *
 * <p>A folder holding a manifest without a {@code Bundle-SymbolicName} is named in one error line, once for
 * each version of it; {@link SkippedEntries} names a folder without one.
 */
@Component(service = ArtifactInstaller.class, property = Constants.SERVICE_RANKING + ":Integer=-1")
public final class FolderThatIsNoBundle extends ClaimingInstaller {
    private final Pattern filter;
    private final Logger log;
    /** Each claimed folder, and what became of its manifest; changed by FileInstall's threads and the checks. */
    private final Map<Path, Claim> claimed = new ConcurrentHashMap<>();
    private final PacedChecks checks;

    /**
     * A claimed folder's manifest: {@code packed} as it was when FileInstall last packed the folder,
     * {@code prodded} as it was when the folder was last brought to FileInstall's notice because of it.
     */
    private record Claim(ManifestStamp packed, ManifestStamp prodded) {
    }

    /**
     * A folder's manifest's attributes that change when it is written or replaced; {@link #NONE} when there
     * is none, {@link #UNREADABLE} when they cannot be read.
     */
    private record ManifestStamp(FileTime modified, long size, Object fileKey) {
        static final ManifestStamp NONE = new ManifestStamp(FileTime.fromMillis(0), -1, null);
        static final ManifestStamp UNREADABLE = new ManifestStamp(FileTime.fromMillis(0), -2, null);

        static ManifestStamp of(Path folder) {
            try {
                BasicFileAttributes a = Files.readAttributes(manifest(folder), BasicFileAttributes.class);
                return new ManifestStamp(a.lastModifiedTime(), a.size(), a.fileKey());
            } catch (NoSuchFileException none) {
                return NONE;
            } catch (IOException | SecurityException unreadable) {
                return UNREADABLE;
            }
        }
    }

    @Activate
    public FolderThatIsNoBundle(BundleContext context, @Reference(service = LoggerFactory.class) Logger log) {
        this(WatchedFolders.of(context), context.getProperty("felix.fileinstall.filter"), log);
        String tmp = context.getProperty("felix.fileinstall.tmpdir");
        if (tmp != null && !tmp.isBlank() && restartedInARunningFramework(context)) {
            claimAgain(Path.of(tmp.strip()));
        }
        start(WatchedFolders.pollMillis(context));
    }

    /**
     * @param watched the watched folders
     * @param filter  the paths FileInstall looks at, a regular expression; null: every path
     */
    FolderThatIsNoBundle(List<Path> watched, String filter, Logger log) {
        this(watched, filter, log, PacedChecks.Timer.ofThread("ferrum folders that are no bundle"));
    }

    /** @param timer where and when the checks of the claimed folders run */
    FolderThatIsNoBundle(List<Path> watched, String filter, Logger log, PacedChecks.Timer timer) {
        super(watched);
        this.filter = filter == null || filter.isBlank() ? null : Pattern.compile(filter);
        this.log = log;
        checks = new PacedChecks(this::check, e -> log.error("Looking at the manifests of the claimed folders of {} failed:"
                + " {}; the looks go on", ControlCharacters.escaped(watched),
                ControlCharacters.escaped(e.toString()), e), timer);
    }

    /** Checks at once, then at FileInstall's poll interval {@code pollMillis}, spaced ({@link PacedChecks}). */
    void start(long pollMillis) {
        checks.start(pollMillis);
    }

    @Deactivate
    void stop() {
        checks.stop();
    }

    /** @return whether {@code artifact} is FileInstall's jar of a folder in a watched folder that is no bundle */
    @Override
    public boolean canHandle(File artifact) {
        List<File> folders = packedFolders(artifact, watched).stream()
                .filter(f -> !ConfigFileEntries.isConfigName(f.getName())).toList();
        return !folders.isEmpty() && (folders.stream().anyMatch(this::takenAgain)
                || NotABundleReporter.whyNotABundle(artifact) != null);
    }

    /** @param folder the folder: FileInstall asks about its jar, and installs the path it watches */
    @Override
    void report(File folder) {
        Path f = folder.toPath().toAbsolutePath().normalize();
        ManifestStamp now = ManifestStamp.of(f);
        claimed.put(f, new Claim(now, now));
        if (now.equals(ManifestStamp.NONE)) {
            return;
        }
        String why = whyNoBundle(f);
        if (why == null) {
            // Its manifest came after FileInstall packed it: FileInstall is to look again.
            prod(f);
        } else {
            log.error("{} is not installed: it holds META-INF/MANIFEST.MF, but {}; give the manifest a Bundle-SymbolicName,"
                    + " or remove the folder", ControlCharacters.escaped(f), why);
        }
    }

    /**
     * Brings to FileInstall's notice each folder of the watched folders, but one named as a configuration
     * file ({@link FolderNamedAsConfigFile}'s), whose jar in {@code tmp} holds no bundle (FileInstall packed it
     * and found none), and takes it when FileInstall asks next, whatever its manifest says then ({@link
     * #canHandle}); {@link #report} hands back one that became a bundle.
     *
     * @param tmp where FileInstall packs the folders ({@code felix.fileinstall.tmpdir})
     */
    void claimAgain(Path tmp) {
        for (Path dir : watched) {
            try (DirectoryStream<Path> entries = Files.newDirectoryStream(dir, Files::isDirectory)) {
                for (Path entry : entries) {
                    Path folder = entry.toAbsolutePath().normalize();
                    String name = folder.getFileName().toString();
                    File jar = tmp.resolve(name + ".jar").toFile();
                    if (ConfigFileEntries.isConfigName(name) || !jar.isFile() || NotABundleReporter.whyNotABundle(jar) == null) {
                        continue;
                    }
                    reclaim(folder);
                    prod(folder);
                }
            } catch (IOException | DirectoryIteratorException | SecurityException unreadable) {
                // The folder gone or unreadable: FileInstall finds nothing in it either.
            }
        }
    }

    /**
     * A folder taken again after a restart ({@link #claimAgain}) goes to {@link #report} whatever its manifest
     * says now: report hands on one that became a bundle (it prods FileInstall, which then takes it from this
     * installer), as it does for a folder whose manifest came after FileInstall packed it.
     */
    @Override
    boolean claims(File entry) {
        return entry.isDirectory();
    }

    @Override
    void error(String line) {
        log.error("{}", line);
    }

    @Override
    void handBack(File entry) {
        claimed.remove(entry.toPath().toAbsolutePath().normalize());
        super.handBack(entry);
        if (entry.isDirectory()) {
            // A bundle now: FileInstall forgets it until it changes again.
            prod(entry.toPath().toAbsolutePath().normalize());
        }
    }

    /** Brings to FileInstall's notice each claimed folder whose manifest changed since it was packed. */
    void check() {
        claimed.forEach((folder, claim) -> {
            ManifestStamp now = ManifestStamp.of(folder);
            if (!now.equals(claim.packed()) && !now.equals(claim.prodded())
                    && claimed.replace(folder, claim, new Claim(claim.packed(), now))) {
                prod(folder);
            }
        });
    }

    /**
     * Moves the time of a file FileInstall notices in {@code folder} on, so that it packs the folder again: one
     * that lies in the watched folders; when every such file lies outside, behind links, one error line says so.
     */
    private void prod(Path folder) {
        try {
            Path noticed = NoticedFiles.first(folder, filter, f -> ReadAgain.inside(f, watched));
            if (noticed == null) {
                noticed = NoticedFiles.first(folder, filter);
            }
            if (noticed != null) {
                readAgain(folder.toFile(), noticed.toFile());
            }
        } catch (IOException | SecurityException gone) {
            // Gone meanwhile: FileInstall sees that itself.
        }
    }

    /** @return why the manifest of {@code folder} makes no bundle, or null when it does */
    private static String whyNoBundle(Path folder) {
        try (InputStream in = Files.newInputStream(manifest(folder))) {
            return new Manifest(in).getMainAttributes().getValue("Bundle-SymbolicName") == null
                    ? "it has no Bundle-SymbolicName" : null;
        } catch (IOException | RuntimeException unreadable) {
            return "it cannot be read (" + ControlCharacters.escaped(unreadable.toString()) + ")";
        }
    }

    private static Path manifest(Path folder) {
        return folder.resolve("META-INF").resolve("MANIFEST.MF");
    }
}
