package io.ferrum.memory.launcher;

import java.io.FilterOutputStream;
import java.io.IOException;
import java.io.OutputStream;

/**
 * One of the process's standard streams (or the terminal's output) as a Gogo session is given it: a
 * close of the session's side only flushes it. Gogo writes what a command prints to {@code
 * System.out} or {@code System.err} (Felix logs so, on the command's thread) through a {@code
 * java.nio} channel over the session's stream, and
 * such a channel closes itself and the stream under it when a thread that was interrupted writes to
 * it. The session's own close interrupts the thread of a statement still running, so a statement
 * that stopped the console's bundle closed the process's standard output and error (the JVM puts
 * {@code /dev/null} in their place): the line that says the script ends there, written next, was
 * lost, and the run exited 1 with nothing on standard error. At a terminal, Ctrl-C interrupts a
 * command that then erases its progress line through {@code System.out}: the terminal's output was
 * closed, and no answer showed after it. The session's own channels are replaced by ones that never
 * close ({@link SessionChannels}), so this guards the console's streams where that cannot be done.
 */
final class KeptOpen extends FilterOutputStream {
    KeptOpen(OutputStream out) {
        super(out);
    }

    @Override
    public void write(byte[] b, int off, int len) throws IOException {
        out.write(b, off, len);
    }

    @Override
    public void close() throws IOException {
        out.flush();
    }
}
