package io.ferrum.memory.monitor;

import java.lang.reflect.Array;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import java.util.regex.Pattern;

import io.ferrum.memory.api.InvalidMemoryRequestException;

/**
 * A checked {@link MonitorConfig}: every attribute read from its text and checked before any of it
 * applies, so that a refusal names every bad value at once and a configuration is applied whole or
 * not at all.
 *
 * @param strategy       the configured strategy's name, stripped; empty: by precedence
 * @param samplePeriodMs milliseconds between samples, 0 or more (0: no sampling)
 * @param maxAttempts    devices a routed allocation may try, 1 or more
 */
record MonitorSettings(String strategy, long samplePeriodMs, int maxAttempts) {
    /** What the monitor runs with when it has no configuration, or a refused one at start. */
    static final MonitorSettings DEFAULTS = new MonitorSettings("", 5000, 4);

    /** No sign, as in the shell (docs/SHELL.md) and the device configurations. */
    private static final Pattern WHOLE = Pattern.compile("\\d+");

    /**
     * @param config a configuration as DS hands it over
     * @return its settings
     * @throws InvalidMemoryRequestException naming every bad value, and what to write instead
     */
    static MonitorSettings of(MonitorConfig config) {
        return of(config, Map.of());
    }

    /**
     * @param config     a configuration as DS hands it over
     * @param properties its raw properties: a value given as a list is refused (DS would keep its
     *                   first element silently)
     * @return its settings
     * @throws InvalidMemoryRequestException naming every bad value, and what to write instead
     */
    static MonitorSettings of(MonitorConfig config, Map<String, ?> properties) {
        List<String> bad = new ArrayList<>();
        int[] unknown = {0};
        new TreeMap<String, Object>(properties).forEach((key, value) -> {
            if (value instanceof Collection<?> || value != null && value.getClass().isArray()) {
                bad.add("Invalid " + key + " " + listText(value) + ": " + key + " takes one value, not a list");
            }
            // Keys with a dot are Config Admin's, DS's and FileInstall's (service.pid, felix.fileinstall.filename).
            // A file that is no configuration (binary bytes in a .cfg) reads as many keys of noise: a few
            // are named, printably, and the rest counted, so that the refusal stays one readable line.
            if (!key.contains(".") && !ATTRIBUTES.contains(key) && unknown[0]++ < MAX_UNKNOWN_NAMED) {
                bad.add(unknownAttribute(key));
            }
        });
        if (unknown[0] > MAX_UNKNOWN_NAMED) {
            bad.add((unknown[0] - MAX_UNKNOWN_NAMED) + " more unknown attributes: is this a configuration file?");
        }
        long period = whole(bad, "samplePeriodMs", config.samplePeriodMs(), 0, Long.MAX_VALUE,
                "use 0 (no sampling) or a whole number of milliseconds");
        long attempts = whole(bad, "maxAttempts", config.maxAttempts(), 1, Integer.MAX_VALUE,
                "use a whole number of devices, 1 or more");
        if (!bad.isEmpty()) {
            throw new InvalidMemoryRequestException("Configuration " + MemoryMonitor.PID + " refused: " + String.join("; ", bad));
        }
        String strategy = config.strategy();
        return new MonitorSettings(strategy == null ? "" : strategy.strip(), period, (int) attempts);
    }

    /** How many unknown attributes a refusal names; beyond them it counts the rest. */
    static final int MAX_UNKNOWN_NAMED = 3;
    /** How many characters of an unknown attribute's name a refusal shows. */
    static final int MAX_KEY_SHOWN = 40;

    /**
     * @return {@code key} (or a bad value, a strategy's name) fit for one log line and the shell:
     *         characters outside printable ASCII as Java escapes, so that an ESC sequence or a line
     *         break can neither recolour a terminal nor forge a line, at most {@value #MAX_KEY_SHOWN}
     *         of them shown and the rest counted (the rule the device configurations follow too; this
     *         bundle does not import the pool's)
     */
    static String printable(String key) {
        StringBuilder shown = new StringBuilder();
        int i = 0;
        for (; i < key.length() && shown.length() < MAX_KEY_SHOWN; i++) {
            char c = key.charAt(i);
            shown.append(c >= 0x20 && c < 0x7f ? String.valueOf(c) : String.format("\\u%04x", (int) c));
        }
        return i < key.length() ? shown + "...(+" + (key.length() - i) + " characters)" : shown.toString();
    }

    /** The monitor's attributes: those of {@link MonitorConfig}. */
    private static final List<String> ATTRIBUTES = java.util.Arrays.stream(MonitorConfig.class.getDeclaredMethods())
            .map(java.lang.reflect.Method::getName).sorted().toList();

    /** @return {@code Unknown attribute 'maxAttempt' (maxAttempts?)}, the suggestion only for a small typo */
    private static String unknownAttribute(String key) {
        String closest = null;
        for (String a : ATTRIBUTES) {
            String k = key.toLowerCase(java.util.Locale.ROOT);
            String l = a.toLowerCase(java.util.Locale.ROOT);
            // Close: the same but for case, one letter missing, added, replaced, or two swapped.
            if (k.length() >= l.length() - 1 && k.length() <= l.length() + 1 && oneEditApart(k, l)) {
                closest = a;
            }
        }
        return "Unknown attribute '" + printable(key) + "'" + (closest != null ? " (" + closest + "?)" : "") + ": the attributes are "
                + String.join(", ", ATTRIBUTES);
    }

    private static boolean oneEditApart(String a, String b) {
        int i = 0;
        while (i < a.length() && i < b.length() && a.charAt(i) == b.charAt(i)) {
            i++;
        }
        int ja = a.length() - 1;
        int jb = b.length() - 1;
        while (ja >= i && jb >= i && a.charAt(ja) == b.charAt(jb)) {
            ja--;
            jb--;
        }
        int restA = ja - i + 1;
        int restB = jb - i + 1;
        boolean swap = restA == 2 && restB == 2 && a.charAt(i) == b.charAt(i + 1) && a.charAt(i + 1) == b.charAt(i);
        return Math.max(restA, restB) <= 1 || swap;
    }

    /** @return a list as a configuration file writes it: {@code ["3", "0"]} */
    private static String listText(Object list) {
        List<Object> items = new ArrayList<>();
        if (list instanceof Collection<?> c) {
            items.addAll(c);
        } else {
            for (int i = 0; i < Array.getLength(list); i++) {
                items.add(Array.get(list, i));
            }
        }
        return items.stream().map(o -> o instanceof String t ? "\"" + printable(t) + "\"" : printable(String.valueOf(o)))
                .collect(Collectors.joining(", ", "[", "]"));
    }

    /** @return the number, or -1 after adding to {@code bad} why {@code text} is none in [min, max] */
    private static long whole(List<String> bad, String attribute, String text, long min, long max, String advice) {
        String t = text == null ? "" : text.strip();
        if (WHOLE.matcher(t).matches()) {
            try {
                long v = Long.parseLong(t);
                if (v >= min && v <= max) {
                    return v;
                }
            } catch (NumberFormatException tooLarge) {
                // named below like any other bad value
            }
        }
        // The advice names the lower bound; "zero or more" only where zero is taken (maxAttempts needs 1).
        String sign = t.startsWith("-") && min == 0 ? " (zero or more, without a sign)"
                : t.startsWith("-") || t.startsWith("+") ? " (without a sign)" : "";
        bad.add("Invalid " + attribute + " '" + printable(String.valueOf(text)) + "': " + advice + sign);
        return -1;
    }
}
