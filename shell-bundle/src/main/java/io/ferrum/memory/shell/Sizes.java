package io.ferrum.memory.shell;

import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import io.ferrum.memory.api.InvalidMemoryRequestException;

/**
 * The shell's one parser and formatter of byte sizes: as people type them ({@code 4096}, {@code
 * 64k}, {@code 64KiB}, {@code 512MiB}, {@code 2g}; binary units) and as they read them ({@code 64.0
 * KiB}). Every size argument and every size a command shows goes through here.
 */
final class Sizes {
    /** Digits and an optional unit in any case: {@code k}, {@code KB}, {@code KiB}, {@code KIB} are all 1024. */
    private static final Pattern SIZE = Pattern.compile("(?i)(\\d+)\\s*(?:([kmgt])(?:i?b)?|b)?");
    private static final String[] UNITS = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};

    private Sizes() {
    }

    /**
     * @param text a number of bytes with an optional binary unit in any case: k/KiB, m/MiB, g/GiB, t/TiB (all x1024)
     * @return the number of bytes
     * @throws InvalidMemoryRequestException if the text is not a size or overflows
     */
    static long parse(String text) {
        return parse("size", text);
    }

    /**
     * @param what the argument the text is for, named in the message: {@code size}, {@code
     *             alignment}, {@code offset}, {@code length}, {@code maxSize}...
     * @param text a number of bytes with an optional binary unit: k/KiB, m/MiB, g/GiB, t/TiB (all x1024)
     * @return the number of bytes
     * @throws InvalidMemoryRequestException naming {@code what} and the text if it is not a number
     *                                       of bytes (a negative number is not) or overflows
     */
    static long parse(String what, String text) {
        Matcher m = text == null ? null : SIZE.matcher(text.strip());
        if (m == null || !m.matches()) {
            throw new InvalidMemoryRequestException("Invalid " + what + " '" + text
                    + "': use bytes with an optional unit, e.g. 4096, 64k, 64KiB, 512MiB, 2g");
        }
        try {
            long value = Long.parseLong(m.group(1));
            String unit = m.group(2) == null ? "" : m.group(2).toLowerCase(Locale.ROOT);
            int shift = switch (unit) {
                case "k" -> 10;
                case "m" -> 20;
                case "g" -> 30;
                case "t" -> 40;
                default -> 0;
            };
            if (shift > 0 && value > (Long.MAX_VALUE >> shift)) {
                throw new NumberFormatException();
            }
            return value << shift;
        } catch (NumberFormatException e) {
            throw new InvalidMemoryRequestException("Invalid " + what + " '" + text + "': too large");
        }
    }

    /**
     * An amount a success line reports: as the tables show sizes, with the exact count kept where
     * the human form rounds.
     *
     * @return e.g. {@code 100 bytes}, {@code 50.0 MiB (52428800 bytes)}
     */
    static String amount(long bytes) {
        return bytes < 1024 ? count(bytes) : human(bytes) + " (" + bytes + " bytes)";
    }

    /** @return e.g. {@code 100 bytes}, {@code 1 byte}: an exact count as a sentence says it */
    static String count(long bytes) {
        return bytes + (bytes == 1 ? " byte" : " bytes");
    }

    /**
     * The age of something, as a person reads it: whole seconds under a minute, whole minutes under
     * an hour, else hours with one decimal (each rounded down).
     *
     * @param seconds the age in seconds, zero or more
     * @return e.g. {@code 12 s}, {@code 5 min}, {@code 2.5 h}
     */
    static String age(long seconds) {
        if (seconds < 60) {
            return Math.max(0, seconds) + " s";
        }
        if (seconds < 3600) {
            return seconds / 60 + " min";
        }
        return String.format(Locale.ROOT, "%.1f h", Math.floor(seconds / 360.0) / 10);
    }

    /** @return e.g. {@code 512 B}, {@code 64.0 KiB}, {@code 1.5 GiB} */
    static String human(long bytes) {
        if (bytes < 1024) {
            return bytes + " B";
        }
        double v = bytes;
        int u = 0;
        // Up a unit while the figure would print as 1024.0 or more: 1048575 bytes is 1.0 MiB, not 1024.0 KiB.
        while (Math.round(v * 10) >= 10240 && u < UNITS.length - 1) {
            v /= 1024;
            u++;
        }
        return String.format(Locale.ROOT, "%.1f %s", v, UNITS[u]);
    }
}
