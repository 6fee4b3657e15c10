package io.ferrum.memory.shell;

import java.io.File;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedByInterruptException;
import java.nio.channels.FileChannel;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileSystemException;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.FileAttribute;
import java.nio.file.attribute.PosixFileAttributeView;
import java.nio.file.attribute.PosixFileAttributes;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.EnumSet;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;

import io.ferrum.memory.api.InvalidMemoryRequestException;

/**
 * The files {@code mem:load} reads and {@code mem:save} writes ({@link FileCommands}), each check
 * made before a byte moves and each refusal naming the file. Regular files only: a device, a pipe or
 * a socket is refused (opening a pipe would wait for a writer for good; renaming over {@code
 * /dev/null} would replace it), and so is a file with more bytes than its size says ({@code /proc}'s
 * say 0). A save goes to a hidden file beside its target, renamed over it when complete; through a
 * symbolic link, beside the file the link names, so that the link stays.
 */
final class FilePaths {
    private FilePaths() {
    }

    /**
     * @return the path, absolute, with its {@code ..} left for the file system to resolve (removing
     *         {@code link/..} as text would name another file than the one a link leads to)
     */
    static Path path(String file) {
        try {
            return Path.of(file).toAbsolutePath();
        } catch (InvalidPathException e) {
            throw new InvalidMemoryRequestException("Invalid file name '" + file + "': " + e.getReason());
        }
    }

    /** @return whether the name as typed ends with a separator, so names a folder ({@code out/}) */
    static boolean namesFolder(String file) {
        return file.length() > 1 && (file.endsWith("/") || file.endsWith(File.separator));
    }

    /**
     * @param file the name as typed
     * @param p    its absolute path
     * @return the file, open for reading; every refusal names the file and says nothing was loaded
     */
    static FileChannel openToLoad(String file, Path p) throws IOException {
        if (Files.isDirectory(p)) {
            throw new InvalidMemoryRequestException(p + " is a folder, not a file; nothing loaded");
        }
        if (!Files.exists(p)) {
            throw new InvalidMemoryRequestException(missing(p) + "; nothing loaded");
        }
        if (namesFolder(file)) {
            throw new InvalidMemoryRequestException("'" + file + "' ends with " + File.separator + ", but " + p
                    + " is a file, not a folder; nothing loaded");
        }
        if (!Files.isRegularFile(p)) {
            throw new InvalidMemoryRequestException(p + " is not a regular file (a device, a pipe or a socket); mem:load"
                    + " reads regular files only; nothing loaded");
        }
        try {
            return FileChannel.open(p, StandardOpenOption.READ);
        } catch (NoSuchFileException e) {
            throw new InvalidMemoryRequestException("No file " + p + "; nothing loaded");
        } catch (IOException e) {
            throw new InvalidMemoryRequestException("Cannot read " + p + ": " + why(e) + "; nothing loaded");
        }
    }

    /**
     * @return the size of the open file {@code p}
     * @throws InvalidMemoryRequestException if the file has a byte past that size: a file of {@code
     *         /proc}, whose size says 0, or one being written; so nothing is loaded from a size that lies
     */
    static long sizeOf(FileChannel in, Path p) throws IOException {
        long size;
        int past;
        try {
            size = in.size();
            past = in.read(ByteBuffer.allocate(1), size);
        } catch (IOException e) {
            throw new InvalidMemoryRequestException("Cannot read " + p + ": " + why(e) + "; nothing loaded");
        }
        if (past > 0) {
            throw new InvalidMemoryRequestException("File " + p + " has more than the " + Sizes.count(size) + " its size says (a"
                    + " special file, as in /proc, or one being written); nothing loaded");
        }
        return size;
    }

    /**
     * @param file the name as typed
     * @param p    its absolute path
     * @return the file a save replaces: {@code p}, or the file it links to
     * @throws InvalidMemoryRequestException naming what is wrong if {@code p} is not a file to save to
     */
    static Path saveTarget(String file, Path p) throws IOException {
        if (Files.isDirectory(p)) {
            throw new InvalidMemoryRequestException(p + " is a folder; give a file name; nothing saved");
        }
        if (namesFolder(file)) {
            throw new InvalidMemoryRequestException("'" + file + "' ends with " + File.separator + ", so it names a folder;"
                    + " give a file name; nothing saved");
        }
        if (Files.isSymbolicLink(p) && !Files.exists(p)) {
            throw new InvalidMemoryRequestException(missing(p) + "; nothing saved");
        }
        if (!Files.exists(p)) {
            if (!Files.notExists(p) && !(why(p) instanceof NoSuchFileException)) {
                throw new InvalidMemoryRequestException(missing(p) + "; nothing saved");
            }
            return p;
        }
        if (!Files.isRegularFile(p)) {
            throw new InvalidMemoryRequestException(p + " is not a regular file (a device, a pipe or a socket); mem:save"
                    + " writes regular files only; nothing saved");
        }
        Path through = throughProc(p);
        if (through != null) {
            // /dev/stdout leads to the file the shell's output goes to: renaming over it would delete
            // that file's earlier lines, and every later line would go to the old one.
            throw new InvalidMemoryRequestException(p + " leads to a file a process has open (through " + through
                    + "); mem:save writes files by name only; nothing saved");
        }
        return p.toRealPath();
    }

    /**
     * @return the first place on the way from {@code p} to the file it names that lies in
     *         {@code /proc} (or {@code /dev/fd}, which leads there), or null: {@code p} itself, a
     *         folder of its path, or a link it follows, each as the file system resolves it
     */
    private static Path throughProc(Path p) throws IOException {
        Path at = p;
        for (int hops = 0; hops < 40; hops++) {
            Path folder = at.getParent();
            Path here = folder != null && Files.isDirectory(folder) ? folder.toRealPath().resolve(at.getFileName())
                    : at.normalize();
            if (here.startsWith("/proc") || here.startsWith("/dev/fd")) {
                return here;
            }
            if (!Files.isSymbolicLink(here)) {
                return null;
            }
            at = here.resolveSibling(Files.readSymbolicLink(here));
        }
        return null; // a loop: refused as missing before this is asked
    }

    /**
     * @return why {@code p}, which {@link Files#exists} did not find, is missing, as the file system
     *         says it: no file, a link to nothing, a link in a loop, a folder on the way that may not
     *         be searched, a name too long
     */
    private static String missing(Path p) throws IOException {
        String link = Files.isSymbolicLink(p) ? " (a symbolic link to " + Files.readSymbolicLink(p) + ")" : "";
        try {
            Files.readAttributes(p, BasicFileAttributes.class);
            return "No file " + p + link; // it appeared since: say what was seen
        } catch (NoSuchFileException e) {
            return link.isEmpty() ? "No file " + p : p + " is a symbolic link to " + Files.readSymbolicLink(p)
                    + ", which does not exist";
        } catch (IOException e) {
            return "Cannot reach " + p + link + ": " + why(e);
        }
    }

    /**
     * @param p      the file as named (for messages)
     * @param target the file to replace, or to create: {@link #saveTarget}
     * @return a new, empty, hidden file beside {@code target}, to be renamed over it once complete
     * @throws InvalidMemoryRequestException naming what is wrong if {@code target} cannot be written
     */
    static Path openToSave(Path p, Path target) throws IOException {
        Path folder = target.getParent();
        if (folder != null && !Files.exists(folder) && !Files.notExists(folder)) {
            throw new InvalidMemoryRequestException(missing(folder) + ", the folder of " + p + "; nothing saved");
        }
        if (folder == null || !Files.isDirectory(folder)) {
            throw new InvalidMemoryRequestException("No folder " + folder + " for " + p + "; create it first; nothing saved");
        }
        if (Files.exists(target) && !Files.isWritable(target)) {
            throw new InvalidMemoryRequestException("File " + p + " is not writable; nothing saved");
        }
        // A short name of its own: one built from the target's could pass the file system's limit.
        Path tmp = folder.resolve(".ferrum-save." + Long.toHexString(ThreadLocalRandom.current().nextLong()) + ".part");
        try {
            Files.newByteChannel(tmp, Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE), ownerOnly(target))
                    .close();
        } catch (IOException e) {
            throw new InvalidMemoryRequestException("Cannot create a file in " + folder + ": " + why(e) + "; nothing saved");
        }
        return tmp;
    }

    /**
     * @return the permissions a temporary file that replaces {@code target} is created with: its
     *         owner's alone where {@code target} exists, so that no one else can open it while the
     *         block's bytes are written (a descriptor opened then keeps reading after {@link
     *         #keepAttributes} narrows the permissions); none, so the defaults, for a new file,
     *         which ends with them anyway
     */
    private static FileAttribute<?>[] ownerOnly(Path target) {
        if (!Files.exists(target) || Files.getFileAttributeView(target, PosixFileAttributeView.class) == null) {
            return new FileAttribute<?>[0];
        }
        return new FileAttribute<?>[] {PosixFilePermissions.asFileAttribute(
                EnumSet.of(PosixFilePermission.OWNER_READ, PosixFilePermission.OWNER_WRITE))};
    }

    /**
     * Gives the new file, once written, the permissions (and, where the process may, the owner and
     * group) of the file it replaces: a save must not make a private file readable by everyone. The
     * group comes first: permissions that let a group read must not apply to the file's group before
     * it is the replaced file's.
     */
    static void keepAttributes(Path target, Path tmp) throws IOException {
        PosixFileAttributeView old = Files.getFileAttributeView(target, PosixFileAttributeView.class);
        PosixFileAttributeView now = Files.getFileAttributeView(tmp, PosixFileAttributeView.class);
        if (old == null || now == null || !Files.exists(target)) {
            return;
        }
        PosixFileAttributes a = old.readAttributes();
        try {
            now.setGroup(a.group());
            now.setOwner(a.owner());
        } catch (IOException notPermitted) {
            // Only a privileged process gives a file away; the save goes on as the caller's file.
        }
        now.setPermissions(a.permissions());
    }

    /** @return what reading {@code p}'s attributes throws, or null if nothing */
    private static IOException why(Path p) {
        try {
            Files.readAttributes(p, BasicFileAttributes.class);
            return null;
        } catch (IOException e) {
            return e;
        }
    }

    /**
     * @return what the file system said, in words: {@code permission denied}, {@code No space left on
     *         device}; {@code interrupted} where the command's thread was (Ctrl-C at the console),
     *         which closed the file and says only the exception's name
     */
    static String why(IOException e) {
        if (e instanceof ClosedByInterruptException) {
            return "interrupted";
        }
        if (e instanceof AccessDeniedException) {
            return "permission denied";
        }
        if (e instanceof NoSuchFileException) {
            return "no such file or folder";
        }
        if (e instanceof FileSystemException f && f.getReason() != null) {
            return f.getReason();
        }
        return e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName();
    }
}
