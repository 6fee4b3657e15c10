package io.ferrum.memory.launcher;

import java.io.IOException;
import java.nio.file.FileVisitOption;
import java.nio.file.FileVisitResult;
import java.nio.file.Path;
import java.nio.file.Files;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.EnumSet;
import java.util.function.Predicate;
import java.util.regex.Pattern;

/**
 * The files by which FileInstall 3.7.4 notices a folder in a watched folder. Its watcher reports a file
 * at any depth whose path relative to the watched folder its filter ({@code felix.fileinstall.filter}, a
 * regular expression) takes, as a change of the folder of the watched folder it lies in; any other file
 * in that folder (a class, a manifest) changes nothing FileInstall sees.
 */
final class NoticedFiles {
    /**
     * At most this many entries of a folder are looked at each time (a folder may be looked at at every
     * poll): a folder with more is judged by these.
     */
    static final int MOST_ENTRIES_OF_A_FOLDER = 256;

    private NoticedFiles() {
    }

    /**
     * @param folder a folder in a watched folder
     * @param filter the paths FileInstall looks at; null: every path
     * @return the first regular file under {@code folder}, at any depth and following links, whose path
     *         relative to the watched folder {@code filter} takes; null when there is none among its first
     *         {@link #MOST_ENTRIES_OF_A_FOLDER} entries
     */
    static Path first(Path folder, Pattern filter) throws IOException {
        return first(folder, filter, file -> true);
    }

    /**
     * @param folder a folder in a watched folder
     * @param filter the paths FileInstall looks at; null: every path
     * @param also   what else the file must be
     * @return as {@link #first(Path, Pattern)}, the first such file that {@code also} takes
     */
    static Path first(Path folder, Pattern filter, Predicate<Path> also) throws IOException {
        Path watched = folder.getParent();
        Path[] found = {null};
        Files.walkFileTree(folder, EnumSet.of(FileVisitOption.FOLLOW_LINKS), Integer.MAX_VALUE, new SimpleFileVisitor<>() {
            private int seen;

            @Override
            public FileVisitResult preVisitDirectory(Path dir, BasicFileAttributes attrs) {
                return ++seen > MOST_ENTRIES_OF_A_FOLDER ? FileVisitResult.TERMINATE : FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) {
                if (attrs.isRegularFile()
                        && (filter == null || filter.matcher(watched.relativize(file).toString()).matches()) && also.test(file)) {
                    found[0] = file;
                }
                return found[0] != null || ++seen > MOST_ENTRIES_OF_A_FOLDER ? FileVisitResult.TERMINATE : FileVisitResult.CONTINUE;
            }

            @Override
            public FileVisitResult visitFileFailed(Path file, IOException unreadable) {
                // A loop of links or an entry out of reach: FileInstall's walk passes it by too.
                return FileVisitResult.CONTINUE;
            }
        });
        return found[0];
    }
}
