package io.ferrum.memory.pool;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.OptionalLong;
import java.util.function.Supplier;
import java.util.regex.Pattern;

import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;

/**
 * Reads and checks the attributes of a device configuration before any of it applies, collecting
 * every problem, so that a refusal names every bad value at once (docs/DEPLOYING.md).
 *
 * <p>Values arrive as a FileInstall file gives them (text) or as a Config Admin user set them
 * ({@code Boolean}, {@code Integer}, {@code Long}, {@code Double}; DS hands a {@code String}
 * attribute their text). Backends therefore declare flags and numbers as {@code String} attributes
 * (typed for Metatype with {@code @AttributeDefinition(type = ...)}): DS's own conversion would turn
 * {@code autoExpansion=yes} into {@code false} silently and fail {@code index=abc} with a stack trace.
 *
 * <p>Each read answers the value, or null after recording why it is bad. A rule across attributes is
 * skipped only when an attribute it needs is null (already named). The rules of {@link
 * MemoryPoolConfig} and {@link MemoryManagerConfig} run one at a time, each with neutral values in
 * the other fields, so that the messages are the API's and every broken rule is named. Not
 * thread-safe: one instance per configuration checked.
 */
public final class ConfigurationCheck {
    /** The words a flag accepts, case and blanks aside: those of the shell's {@code mem:pool}. */
    public static final String FLAG_WORDS = "true, yes, on, false, no or off";

    // No sign, as in the shell (docs/SHELL.md): every number of a device configuration is zero or more.
    private static final Pattern WHOLE = Pattern.compile("\\d+");
    private static final Pattern DECIMAL = Pattern.compile("(?:\\d+\\.?\\d*|\\.\\d+)(?:[eE][+-]?\\d+)?");
    private static final Pattern SIGNED = Pattern.compile("[+-].*");

    /** How many unknown attributes a refusal names; beyond them it counts the rest. */
    static final int MAX_UNKNOWN_NAMED = 3;
    /** How many characters of an unknown attribute's name a refusal shows. */
    static final int MAX_KEY_SHOWN = 40;

    private final List<String> problems = new ArrayList<>();

    /**
     * @param attribute the attribute, named in the message
     * @param value     a {@code Boolean}, or text: one of {@value #FLAG_WORDS}
     * @return the flag
     * @throws InvalidMemoryRequestException naming the attribute and the value if it is neither
     */
    public static boolean toFlag(String attribute, Object value) {
        if (value instanceof Boolean b) {
            return b;
        }
        return switch (value == null ? "" : value.toString().strip().toLowerCase(Locale.ROOT)) {
            case "true", "yes", "on" -> true;
            case "false", "no", "off" -> false;
            default -> throw new InvalidMemoryRequestException("Invalid " + attribute + " " + quoted(value)
                    + ": use true or false (yes/no and on/off work too)");
        };
    }

    /**
     * @param attribute the attribute, named in the message
     * @param value     an {@code Integer}, {@code Short}, {@code Byte}, a {@code Long} in range, or
     *                  the text of a whole number
     * @return the number
     * @throws InvalidMemoryRequestException naming the attribute and the value if it is none
     */
    public static int toInteger(String attribute, Object value) {
        return toInteger(attribute, value, 0);
    }

    /** @return as {@link #toInteger(String, Object)}; a value with a sign is named with {@code least} as the bound */
    private static int toInteger(String attribute, Object value, int least) {
        long v = toLong(attribute, value, least);
        if (v > Integer.MAX_VALUE) {
            throw new InvalidMemoryRequestException("Invalid " + attribute + " " + quoted(value) + ": out of range, use at most "
                    + Integer.MAX_VALUE);
        }
        return (int) v;
    }

    /**
     * @param attribute the attribute, named in the message
     * @param value     a {@code Long}, {@code Integer}, {@code Short}, {@code Byte}, or the text of a
     *                  whole number, zero or more; text takes no sign ({@code +5} and {@code -0} are
     *                  refused, as in the shell)
     * @return the number
     * @throws InvalidMemoryRequestException naming the attribute and the value if it is none
     */
    public static long toLong(String attribute, Object value) {
        return toLong(attribute, value, 0);
    }

    /**
     * @param least the attribute's own lower bound, named when the value has a sign (its check against
     *              the bound is the rule's: here a value is only read)
     */
    private static long toLong(String attribute, Object value, long least) {
        String bound = least == 0 ? "zero or more" : least + " or more";
        if (value instanceof Long || value instanceof Integer || value instanceof Short || value instanceof Byte) {
            long v = ((Number) value).longValue();
            if (v < 0) {
                throw new InvalidMemoryRequestException("Invalid " + attribute + " " + quoted(value) + ": use a whole number, " + bound);
            }
            return v;
        }
        String text = value instanceof String s ? s.strip() : null;
        if (text != null && SIGNED.matcher(text).matches()) {
            throw new InvalidMemoryRequestException("Invalid " + attribute + " " + quoted(value) + ": use a whole number, " + bound
                    + ", without a sign");
        }
        if (text != null && WHOLE.matcher(text).matches()) {
            try {
                return Long.parseLong(text);
            } catch (NumberFormatException tooLarge) {
                throw new InvalidMemoryRequestException("Invalid " + attribute + " " + quoted(value) + ": out of range, use at most "
                        + Long.MAX_VALUE);
            }
        }
        throw new InvalidMemoryRequestException("Invalid " + attribute + " " + quoted(value) + ": use a whole number");
    }

    /**
     * @param attribute the attribute, named in the message
     * @param value     any {@code Number}, or the text of a decimal number without a sign ({@code 0.85},
     *                  {@code 1}, {@code 8.5e-1})
     * @return the number
     * @throws InvalidMemoryRequestException naming the attribute and the value if it is none
     */
    public static double toDecimal(String attribute, Object value) {
        if (value instanceof Number n) {
            if (Double.isNaN(n.doubleValue()) || Double.isInfinite(n.doubleValue())) {
                throw new InvalidMemoryRequestException("Invalid " + attribute + " " + quoted(value) + ": use a finite decimal number");
            }
            return n.doubleValue();
        }
        String text = value instanceof String s ? s.strip() : null;
        if (text != null && SIGNED.matcher(text).matches()) {
            throw new InvalidMemoryRequestException("Invalid " + attribute + " " + quoted(value) + ": use a decimal number, zero"
                    + " or more, without a sign");
        }
        if (text != null && DECIMAL.matcher(text).matches()) {
            double v = Double.parseDouble(text);
            if (Double.isInfinite(v)) {
                // Named as written: "Infinity" is not what the file says.
                throw new InvalidMemoryRequestException("Invalid " + attribute + " " + quoted(value) + ": out of range");
            }
            return v;
        }
        throw new InvalidMemoryRequestException("Invalid " + attribute + " " + quoted(value) + ": use a decimal number, e.g. 0.85");
    }

    /**
     * Runs one read or rule; its failure is recorded.
     *
     * @param rule a read or check that throws {@link InvalidMemoryRequestException} naming a bad value
     * @return what it answered, or null if it failed
     */
    public <T> T read(Supplier<T> rule) {
        try {
            return rule.get();
        } catch (InvalidMemoryRequestException e) {
            problems.add(e.getMessage());
            return null;
        }
    }

    /** @return the flag (see {@link #toFlag}), or null after recording why it is none */
    public Boolean flag(String attribute, Object value) {
        return read(() -> toFlag(attribute, value));
    }

    /** @return the number (see {@link #toInteger}), or null after recording why it is none */
    public Integer integer(String attribute, Object value) {
        return read(() -> toInteger(attribute, value));
    }

    /**
     * @param least the attribute's lower bound ({@code maxConcurrentTransfers}: 1), which a value with
     *              a sign is told to keep: {@code -2} is named {@code use a whole number, 1 or more,
     *              without a sign}, not {@code zero or more}, which would offer a 0 the rule refuses.
     *              The rule itself (the API's, the backend's) still checks the bound
     * @return the number (see {@link #toInteger}), or null after recording why it is none
     * @since 2.8
     */
    public Integer integer(String attribute, Object value, int least) {
        return read(() -> toInteger(attribute, value, least));
    }

    /** @return the number (see {@link #toLong}), or null after recording why it is none */
    public Long longInteger(String attribute, Object value) {
        return read(() -> toLong(attribute, value));
    }

    /** @return the number (see {@link #toDecimal}), or null after recording why it is none */
    public Double decimal(String attribute, Object value) {
        return read(() -> toDecimal(attribute, value));
    }

    /**
     * Names each attribute given a list (an array or a {@code Collection}, as a typed {@code .config}
     * file or a Config Admin user may give): DS would hand the component its first element and drop
     * the others silently. Call it with the component's raw properties.
     *
     * @param properties the configuration's properties as DS passes them; null: none
     */
    public void singleValues(java.util.Map<String, ?> properties) {
        if (properties == null) {
            return;
        }
        new java.util.TreeMap<String, Object>(properties).forEach((key, value) -> {
            if (value instanceof java.util.Collection<?> || value != null && value.getClass().isArray()) {
                problem("Invalid " + key + " " + listText(value) + ": " + key + " takes one value, not a list");
            }
        });
    }

    /**
     * Names each property that is no attribute of the component (a typo such as {@code capacty=1g}
     * would otherwise be ignored, and its attribute keep its default), suggesting the closest
     * attribute when one is close. Keys with a dot are left alone: Config Admin, DS and FileInstall
     * use them ({@code service.pid}, {@code component.name}, {@code felix.fileinstall.filename}).
     *
     * @param properties the configuration's raw properties; null: none
     * @param config     the component's configuration type, whose methods are its attributes
     */
    public void knownAttributes(java.util.Map<String, ?> properties, Class<? extends java.lang.annotation.Annotation> config) {
        if (properties == null) {
            return;
        }
        List<String> known = new ArrayList<>();
        for (java.lang.reflect.Method m : config.getDeclaredMethods()) {
            known.add(m.getName());
        }
        List<String> unknown = new ArrayList<>();
        for (String key : new java.util.TreeSet<>(properties.keySet())) {
            if (!key.contains(".") && !known.contains(key)) {
                unknown.add(key);
            }
        }
        // A file that is no configuration at all (binary bytes in a .cfg) reads as many keys of noise:
        // a few named are enough to show what is wrong, and the line stays one line.
        for (String key : unknown.subList(0, Math.min(unknown.size(), MAX_UNKNOWN_NAMED))) {
            problem(unknownAttribute(key, known));
        }
        if (unknown.size() > MAX_UNKNOWN_NAMED) {
            problem((unknown.size() - MAX_UNKNOWN_NAMED) + " more unknown attributes: is this a configuration file?");
        }
    }

    /**
     * @return {@code key} as it can be shown on one log line or in a table: a character outside
     *         printable ASCII as a Java escape (a backslash, u and four hex digits), and at most
     *         {@value #MAX_KEY_SHOWN} characters of it, the rest counted ({@code ...(+1200 characters)})
     */
    public static String printable(String key) {
        StringBuilder shown = new StringBuilder();
        int i = 0;
        for (; i < key.length() && shown.length() < MAX_KEY_SHOWN; i++) {
            char c = key.charAt(i);
            if (c >= 0x20 && c < 0x7f) {
                shown.append(c);
            } else {
                shown.append(String.format("\\u%04x", (int) c));
            }
        }
        if (i < key.length()) {
            shown.append("...(+").append(key.length() - i).append(" characters)");
        }
        return shown.toString();
    }

    /**
     * @return {@code value} as a refusal names it: in single quotes, {@link #printable}, so that a
     *         value with an ESC sequence or a line break (FileInstall reads {@code \u001b} in a file)
     *         can neither recolour a terminal nor forge a log line
     */
    public static String quoted(Object value) {
        return "'" + printable(String.valueOf(value)) + "'";
    }

    /** @return {@code Unknown attribute 'capacty' (capacity?)}, the suggestion only when one is close */
    public static String unknownAttribute(String key, List<String> known) {
        String closest = null;
        int best = Integer.MAX_VALUE;
        for (String k : known) {
            int d = distance(key.toLowerCase(Locale.ROOT), k.toLowerCase(Locale.ROOT));
            if (d < best) {
                best = d;
                closest = k;
            }
        }
        // Close: a typo or two, not a different word (capacity is no suggestion for index).
        boolean close = closest != null && best <= Math.max(1, Math.min(3, key.length() / 3));
        return "Unknown attribute '" + printable(key) + "'" + (close ? " (" + closest + "?)" : "") + ": the attributes are "
                + String.join(", ", known.stream().sorted().toList());
    }

    /** @return the Levenshtein distance: edits (insert, delete, replace) from a to b */
    private static int distance(String a, String b) {
        int[] prev = new int[b.length() + 1];
        int[] cur = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) {
            prev[j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            cur[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                int replace = prev[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1);
                cur[j] = Math.min(replace, Math.min(prev[j], cur[j - 1]) + 1);
            }
            int[] t = prev;
            prev = cur;
            cur = t;
        }
        return prev[b.length()];
    }

    /** @return a list as a configuration file writes it: {@code ["3", "abc"]} */
    static String listText(Object list) {
        List<Object> items = new ArrayList<>();
        if (list instanceof java.util.Collection<?> c) {
            items.addAll(c);
        } else {
            for (int i = 0; i < java.lang.reflect.Array.getLength(list); i++) {
                items.add(java.lang.reflect.Array.get(list, i));
            }
        }
        return items.stream().map(o -> o instanceof String t ? "\"" + printable(t) + "\"" : printable(String.valueOf(o)))
                .collect(java.util.stream.Collectors.joining(", ", "[", "]"));
    }

    /** @param problem a problem found by the caller's own rule, naming the value */
    public void problem(String problem) {
        problems.add(problem);
    }

    /**
     * Checks the rules of {@link MemoryPoolConfig} one at a time. Each argument is null when it was
     * bad already; the rules that need it are skipped.
     *
     * @param maxSize the pool's limit; 0 means unlimited
     */
    public void poolRules(Long initialSize, Long maxSize, Long growthIncrement, Boolean autoExpansion, Long alignment) {
        OptionalLong unlimited = OptionalLong.empty();
        if (initialSize != null) {
            read(() -> new MemoryPoolConfig(initialSize, unlimited, 0, false, 1, false, false));
        }
        if (growthIncrement != null) {
            read(() -> new MemoryPoolConfig(0, unlimited, growthIncrement, false, 1, false, false));
        }
        if (alignment != null) {
            read(() -> new MemoryPoolConfig(0, unlimited, 0, false, alignment, false, false));
        }
        if (maxSize != null && maxSize < 0) {
            problem("Invalid maxSize " + maxSize + " bytes: use 0 for unlimited or a positive limit");
        } else if (maxSize != null && maxSize > 0 && initialSize != null && initialSize >= 0) {
            read(() -> new MemoryPoolConfig(initialSize, OptionalLong.of(maxSize), 0, false, 1, false, false));
        }
        if (growthIncrement != null && growthIncrement >= 0 && autoExpansion != null) {
            read(() -> new MemoryPoolConfig(0, unlimited, growthIncrement, autoExpansion, 1, false, false));
        }
    }

    /** Checks the rules of {@link MemoryManagerConfig} one at a time; a null argument was bad already. */
    public void managerRules(Double gcThreshold, Integer maxConcurrentTransfers) {
        if (gcThreshold != null) {
            read(() -> MemoryManagerConfig.defaults().withAutoGc(true, gcThreshold));
        }
        if (maxConcurrentTransfers != null) {
            read(() -> MemoryManagerConfig.defaults().withMaxConcurrentTransfers(maxConcurrentTransfers));
        }
    }

    /** @return every problem found, in the order found; empty when the configuration can apply */
    public List<String> problems() {
        return List.copyOf(problems);
    }
}
