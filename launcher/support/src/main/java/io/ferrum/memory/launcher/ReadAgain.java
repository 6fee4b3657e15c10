package io.ferrum.memory.launcher;

import java.io.File;

/**
 * Has FileInstall read a file of a watched folder again at its next poll: it reads a file only when
 * its modification time changed since it last looked, so the time is moved on, by at least a second
 * (a file system may keep whole seconds).
 */
final class ReadAgain {
    private ReadAgain() {
    }

    static void atNextPoll(File file) {
        file.setLastModified(Math.max(System.currentTimeMillis(), file.lastModified() + 1000));
    }
}
