package io.ferrum.memory.shell;

import java.io.Console;
import java.io.PrintStream;
import java.util.Locale;
import java.util.function.LongSupplier;

/**
 * The progress line of a file transfer ({@code mem:load}, {@code mem:save}) and its rate. On a
 * terminal the line is rewritten in place ({@code \r}): bytes done, total, percent and MB/s, at most
 * once per {@link #REFRESH_NANOS}, and erased when the transfer ends, so the command's reply is all
 * that stays. Without a terminal (a pipe, a script, a test) nothing is printed: progress lines would
 * only clutter a log.
 *
 * <p>Rates are in decimal megabytes (10<sup>6</sup> bytes) per second, as disks and networks are quoted.
 */
final class TransferProgress {
    /** Shortest time between two progress lines: often enough to look live, rarely enough to cost nothing. */
    static final long REFRESH_NANOS = 200_000_000L;

    private final PrintStream out;
    private final String verb;
    private final long total;
    private final LongSupplier clock;
    private final long start;
    private long lastShown;
    private int lastWidth;

    /**
     * @param out   where the line goes, or {@code null} for no progress line
     * @param verb  what is done, e.g. {@code loading}
     * @param total the bytes the transfer moves
     * @param clock the time in nanoseconds ({@link System#nanoTime} but in tests)
     */
    TransferProgress(PrintStream out, String verb, long total, LongSupplier clock) {
        this.out = out;
        this.verb = verb;
        this.total = total;
        this.clock = clock;
        this.start = clock.getAsLong();
        this.lastShown = start;
    }

    /** @return the output of an attached terminal (the command's {@code System.out}), or {@code null} if there is none */
    static PrintStream terminal() {
        Console c = System.console();
        return c != null && c.isTerminal() ? System.out : null;
    }

    /** @param done the bytes moved so far */
    void advance(long done) {
        if (out == null) {
            return;
        }
        long now = clock.getAsLong();
        if (now - lastShown < REFRESH_NANOS) {
            return;
        }
        lastShown = now;
        String line = String.format(Locale.ROOT, "%s %s / %s  %3d%%  %s", verb, Sizes.human(done), Sizes.human(total),
                total == 0 ? 100 : (int) (done * 100 / total), rate(done, now - start));
        out.print("\r" + line + " ".repeat(Math.max(0, lastWidth - line.length())));
        out.flush();
        lastWidth = line.length();
    }

    /** Erases the progress line, if one was printed. */
    void finish() {
        if (out != null && lastWidth > 0) {
            out.print("\r" + " ".repeat(lastWidth) + "\r");
            out.flush();
            lastWidth = 0;
        }
    }

    /** @return nanoseconds since this transfer started */
    long elapsedNanos() {
        return clock.getAsLong() - start;
    }

    /**
     * @param bytes bytes moved
     * @param nanos in this many nanoseconds
     * @return e.g. {@code 812.3 MB/s}, or {@code - MB/s} if no time could be measured
     */
    static String rate(long bytes, long nanos) {
        if (nanos <= 0) {
            return "- MB/s";
        }
        double mbPerSecond = bytes * 1e3 / nanos;
        // A few bytes in a few milliseconds would read 0.0 MB/s: name the rate in kB/s instead.
        return mbPerSecond >= 0.1 || bytes == 0 ? String.format(Locale.ROOT, "%.1f MB/s", mbPerSecond)
                : String.format(Locale.ROOT, "%.1f kB/s", mbPerSecond * 1e3);
    }
}
