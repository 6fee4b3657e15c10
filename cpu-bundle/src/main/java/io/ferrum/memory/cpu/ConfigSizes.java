package io.ferrum.memory.cpu;

import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.pool.ConfigurationCheck;

/**
 * Sizes in device configurations, written as people write them in the shell: bytes with an optional
 * binary unit ({@code 4096}, {@code 64k}, {@code 64KiB}, {@code 256m}, {@code 2g}, {@code 1t};
 * k = 1024). Anything else, a negative number too, is refused with a message naming the attribute.
 */
final class ConfigSizes {
    private static final Pattern SIZE = Pattern.compile("(\\d+)\\s*(?:([kmgtKMGT])(?:i?[bB])?|[bB])?");

    private ConfigSizes() {
    }

    /**
     * @param attribute the configuration attribute, for the message
     * @param text      its value
     * @return the number of bytes
     * @throws InvalidMemoryRequestException if the text is not a size or overflows
     */
    static long parse(String attribute, String text) {
        Matcher m = text == null ? null : SIZE.matcher(text.strip());
        if (m == null || !m.matches()) {
            throw new InvalidMemoryRequestException("Invalid " + attribute + " " + ConfigurationCheck.quoted(text)
                    + ": use bytes with an optional unit, e.g. 4096, 64k, 64KiB, 512MiB, 2g"
                    + (text != null && text.strip().startsWith("-") ? " (zero or more, without a sign)" : ""));
        }
        int shift = switch (m.group(2) == null ? "" : m.group(2).toLowerCase(Locale.ROOT)) {
            case "k" -> 10;
            case "m" -> 20;
            case "g" -> 30;
            case "t" -> 40;
            default -> 0;
        };
        try {
            long value = Long.parseLong(m.group(1));
            if (value > (Long.MAX_VALUE >> shift)) {
                throw new NumberFormatException();
            }
            return value << shift;
        } catch (NumberFormatException e) {
            throw new InvalidMemoryRequestException("Invalid " + attribute + " " + ConfigurationCheck.quoted(text) + ": too large");
        }
    }
}
