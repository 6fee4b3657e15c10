package io.ferrum.memory.launcher;

import java.io.File;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.apache.felix.fileinstall.ArtifactInstaller;

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
 */
abstract class ClaimingInstaller implements ArtifactInstaller {
    /** The watched folders, absolute and normalized. */
    final List<Path> watched;

    ClaimingInstaller(List<Path> watched) {
        this.watched = List.copyOf(watched);
    }

    @Override
    public final void install(File artifact) {
        report(artifact);
    }

    @Override
    public final void update(File artifact) {
        report(artifact);
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
