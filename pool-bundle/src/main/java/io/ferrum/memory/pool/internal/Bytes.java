package io.ferrum.memory.pool.internal;

import java.util.Locale;

/** Human-readable byte counts for messages: {@code 1536 (1.5 KiB)}. */
public final class Bytes {
    private Bytes() {
    }

    /** @return e.g. {@code 512.0 MiB}, or {@code 100 B} */
    public static String human(long bytes) {
        if (bytes < 1024 && bytes > -1024) {
            return bytes + " B";
        }
        String[] units = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
        double v = bytes;
        int u = -1;
        while (Math.abs(v) >= 1024 && u < units.length - 1) {
            v /= 1024;
            u++;
        }
        return String.format(Locale.ROOT, "%.1f %s", v, units[u]);
    }

    /** @return e.g. {@code 1048576 bytes (1.0 MiB)}, {@code 1 byte} */
    public static String exact(long bytes) {
        return bytes < 1024 ? count(bytes) : bytes + " bytes (" + human(bytes) + ")";
    }

    /** @return e.g. {@code 100 bytes}, {@code 1 byte}: a count as a sentence says it */
    public static String count(long bytes) {
        return bytes + (bytes == 1 ? " byte" : " bytes");
    }
}
