package io.ferrum.memory.launcher;

import java.io.File;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.Collection;

/**
 * Has FileInstall read a file of a watched folder again at its next poll: it reads a file only when
 * its modification time changed since it last looked, so the time is moved on, by at least a second
 * (a file system may keep whole seconds).
 *
 * <p>Only a file that lies in a watched folder: a symbolic link there may lead to a file elsewhere (a
 * jar of a library folder, {@code /etc/x.cfg}), and FileInstall reads that file's time, but the file is
 * the user's and the distribution changes nothing outside its watched folders.
 */
final class ReadAgain {
    private ReadAgain() {
    }

    /**
     * @param file    a file FileInstall reads, in a watched folder or reached through a link there
     * @param watched the watched folders
     * @return whether its time was moved on: false when it lies outside {@code watched} (links followed) or
     *         is gone
     */
    static boolean atNextPoll(File file, Collection<Path> watched) {
        if (!inside(file.toPath(), watched)) {
            return false;
        }
        try {
            Path real = file.toPath().toRealPath();
            long now = Math.max(System.currentTimeMillis(), Files.getLastModifiedTime(real).toMillis() + 1000);
            Files.setLastModifiedTime(real, FileTime.fromMillis(now));
            return true;
        } catch (IOException | SecurityException gone) {
            return false;
        }
    }

    /** @return whether {@code file}, its links followed, lies in one of {@code watched} */
    static boolean inside(Path file, Collection<Path> watched) {
        try {
            Path real = file.toRealPath();
            for (Path w : watched) {
                if (real.startsWith(w.toRealPath())) {
                    return true;
                }
            }
        } catch (IOException | SecurityException gone) {
            // Gone or out of reach: not the distribution's to touch.
        }
        return false;
    }
}
