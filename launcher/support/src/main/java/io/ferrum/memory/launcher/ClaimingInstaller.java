package io.ferrum.memory.launcher;

import java.io.File;
import java.io.IOException;
import java.nio.file.DirectoryIteratorException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.felix.fileinstall.ArtifactInstaller;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;
import org.osgi.framework.startlevel.FrameworkStartLevel;

/**
 * The shape of the installers that claim, for FileInstall, an entry of a watched folder that no other
 * installer takes and that FileInstall would otherwise pass over without a word, or try again at every
 * poll ({@link NotABundleReporter}, {@link FolderNamedAsConfigFile}, {@link SpecialFilesInPlugins},
 * {@link FolderThatIsNoBundle}): each says in {@link #report} why the entry is neither installed nor
 * applied, unless another class says so already.
 *
 * <p>FileInstall calls {@link #install} for a new entry and {@link #update} only when it changed, so
 * each version of an entry is named once. When the entry is replaced by a file that another installer
 * takes (a bundle, a configuration file), FileInstall asks this one to {@link #uninstall} it and then
 * forgets the file until it changes again (FileInstall 3.7.4, {@code DirectoryWatcher.doProcess}): so
 * the file's modification time is moved on ({@link ReadAgain}), and the next poll installs it. The same
 * holds for an entry still there that this installer no longer takes ({@link #handBack}). A file outside
 * the watched folders (the entry a symbolic link to it) is left as it is, and one error line says to
 * touch it.
 *
 * <p>When this bundle is restarted in a running framework ({@code update io.ferrum.memory.launcher}, a
 * stop and start, a refresh), FileInstall only takes the old instance off the entries it claimed, and asks
 * a new installer again about bundles only (3.7.4, {@code DirectoryWatcher.removeListener} and {@code
 * addListener}). An entry left without installer that FileInstall then finds to be a bundle is taken as an
 * update of a bundle it never installed, and nothing is installed. So a new instance brings each regular file
 * of the watched folders it claims to FileInstall's notice once, and takes it when FileInstall asks, whatever
 * it is by then ({@link #claimEntriesAgain}, {@link #takenAgain}); one that is no longer its own is then handed
 * back as above. {@link FolderThatIsNoBundle} does the same for the folders FileInstall packs. A pipe ({@link
 * SpecialFilesInPlugins}) cannot be: its time cannot be moved on without opening it, and FileInstall notices
 * no change of one but its name.
 */
abstract class ClaimingInstaller implements ArtifactInstaller {
    /** The watched folders, absolute and normalized. */
    final List<Path> watched;

    /** The entries to take again whatever they are ({@link #claimEntriesAgain}), until FileInstall asks about them. */
    private final Set<Path> reclaimed = ConcurrentHashMap.newKeySet();

    ClaimingInstaller(List<Path> watched) {
        this.watched = List.copyOf(watched);
    }

    @Override
    public final void install(File artifact) {
        taken(artifact);
    }

    @Override
    public final void update(File artifact) {
        taken(artifact);
    }

    private void taken(File artifact) {
        boolean again = reclaimed.remove(artifact.toPath().toAbsolutePath().normalize());
        if (again && !claims(artifact)) {
            // Taken only because it was this installer's before a restart: FileInstall is to ask again.
            handBack(artifact);
        } else {
            report(artifact);
        }
    }

    /** Calls {@link #claimEntriesAgain} when this bundle is (re)started while the framework runs ({@link #restartedInARunningFramework}). */
    final void claimAgainIfRestarted(BundleContext context) {
        if (restartedInARunningFramework(context)) {
            claimEntriesAgain();
        }
    }

    /**
     * @return true when this bundle starts in a framework that has started (an {@code update} or a stop and
     *         start of it), false while the framework itself starts: Felix marks the system bundle ACTIVE
     *         before it raises the start level, so the framework counts as started only once its start
     *         level reached the beginning one ({@link BeginningStartLevel}: under the bnd launcher not the one
     *         the framework's property names)
     */
    static boolean restartedInARunningFramework(BundleContext context) {
        Bundle system = context.getBundle(Constants.SYSTEM_BUNDLE_ID);
        return system.getState() == Bundle.ACTIVE
                && system.adapt(FrameworkStartLevel.class).getStartLevel() >= BeginningStartLevel.of(context);
    }

    /**
     * Brings to FileInstall's notice each entry of the watched folders that {@link #claims} (after a restart of
     * this bundle in a running framework: see the class comment), and has {@link #takenAgain} say yes to it until
     * FileInstall asks this installer to take it.
     */
    final void claimEntriesAgain() {
        for (Path dir : watched) {
            try (DirectoryStream<Path> entries = Files.newDirectoryStream(dir)) {
                for (Path entry : entries) {
                    Path p = entry.toAbsolutePath().normalize();
                    // Only a regular file: moving a pipe's time on opens it (and waits for a writer), and FileInstall
                    // notices no change of one but its name.
                    if (Files.isRegularFile(p) && claims(p.toFile())) {
                        reclaim(p);
                        readAgain(p.toFile(), p.toFile());
                    }
                }
            } catch (IOException | DirectoryIteratorException | SecurityException unreadable) {
                // The folder gone or unreadable: FileInstall finds nothing in it either.
            }
        }
    }

    /**
     * Has {@link #takenAgain} say yes to {@code entry} until FileInstall asks this installer to take it (an entry
     * this installer claimed before a restart, brought to FileInstall's notice again).
     */
    final void reclaim(Path entry) {
        reclaimed.add(entry.toAbsolutePath().normalize());
    }

    /**
     * @param artifact what FileInstall asks about
     * @return whether this installer is to take {@code artifact} whatever it is now: it claimed it before a
     *         restart ({@link #claimEntriesAgain}) and FileInstall has not asked it to take it since
     */
    final boolean takenAgain(File artifact) {
        return !reclaimed.isEmpty() && reclaimed.contains(artifact.toPath().toAbsolutePath().normalize());
    }

    /**
     * @param entry an entry of a watched folder
     * @return whether this installer claims {@code entry} as it is now: those claimed in {@link
     *         #canHandle} but for {@link #takenAgain}; false for installers that claim no regular file of the watched
     *         folders themselves.
     */
    boolean claims(File entry) {
        return false;
    }

    /** @param artifact the claimed entry's path: a file now when it was replaced by one (see the class comment) */
    @Override
    public final void uninstall(File artifact) {
        handBack(artifact);
    }

    /**
     * Called when FileInstall takes {@code entry} from this installer: gone, or no longer what this one
     * claims. Moves the time of an entry replaced by a file on (see the class comment).
     */
    void handBack(File entry) {
        if (entry.isFile()) {
            readAgain(entry, entry);
        }
    }

    /**
     * Moves the time of {@code noticed}, a file by which FileInstall notices {@code entry}, on ({@link ReadAgain});
     * when it lies outside the watched folders, says in one error line that the user is to.
     */
    final void readAgain(File entry, File noticed) {
        if (!ReadAgain.atNextPoll(noticed, watched) && noticed.exists()) {
            error(ControlCharacters.escaped(entry.getAbsolutePath()) + " is not read again: FileInstall notices it only by "
                    + ControlCharacters.escaped(noticed.getAbsolutePath()) + ", which lies outside the watched folders (a"
                    + " symbolic link leads there), and the distribution changes no file there; touch that file to have"
                    + " FileInstall read " + ControlCharacters.escaped(entry.getName()) + " again");
        }
    }

    /**
     * @param artifact a file FileInstall asks about
     * @param watched  the watched folders
     * @return the folders in {@code watched} of which {@code artifact} is FileInstall's jar: it ends in
     *         {@code .jar}, lies outside them (FileInstall packs a folder of a watched folder into {@code
     *         <felix.fileinstall.tmpdir>/<name>.jar}), and they hold a folder of its name without {@code .jar}
     */
    static List<File> packedFolders(File artifact, List<Path> watched) {
        String name = artifact.getName();
        File parent = artifact.getAbsoluteFile().getParentFile();
        List<File> folders = new ArrayList<>();
        if (!name.endsWith(".jar") || name.equals(".jar") || parent == null || watched.contains(parent.toPath().normalize())) {
            return folders;
        }
        for (Path dir : watched) {
            File f = dir.resolve(name.substring(0, name.length() - ".jar".length())).toFile();
            if (f.isDirectory()) {
                folders.add(f);
            }
        }
        return folders;
    }

    /** Names {@code artifact} in one error line, if it is still what this installer claims. */
    abstract void report(File artifact);

    /** Logs {@code line}, already escaped, as an error. */
    abstract void error(String line);
}
