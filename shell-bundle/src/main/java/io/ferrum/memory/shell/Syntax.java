package io.ferrum.memory.shell;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

import io.ferrum.memory.api.InvalidMemoryRequestException;

/**
 * The words one {@code mem:*} command takes, and the shell's one parser of them. Every command is a
 * single Gogo method {@code Reply name(String... args)}: Gogo then always calls it (a {@code
 * String...} method matches any number of words, and Gogo hands over each word as typed), and this
 * class, not Gogo's overload matching, decides what a wrong call is. Typed overloads would let Gogo
 * answer a wrong count with {@code Cannot coerce alloc() to any of [...]} and take an unknown option
 * such as {@code --size} as a positional value.
 *
 * <p>Grammar: options anywhere before a {@code --} word, each {@code -x VALUE}, {@code --long VALUE},
 * {@code --long=VALUE} or a flag; then the positional words in order: the required ones, the optional ones, and, where
 * the command has it, a rest of any length. A word is an option when it starts with {@code -} and a
 * letter, so negative numbers ({@code -1}) are positional and reach the argument's own check, which
 * names it. A wrong call (unknown option, option without its value or given twice, missing or extra word) is one
 * {@link InvalidMemoryRequestException} whose message ends with the command's usage.
 */
final class Syntax {
    private static final Pattern OPTION = Pattern.compile("--?[A-Za-z].*");

    private final String command;
    private final Map<String, Option> options = new LinkedHashMap<>();
    private final List<String> required = new ArrayList<>();
    private final List<String> optional = new ArrayList<>();
    private String rest;

    record Option(String shortName, String longName, String value) {
        /** @return e.g. {@code [-t TYPE]}, or for a flag its long name, which says what it does: {@code [--text]} */
        String usage() {
            return value == null ? "[" + longName + "]" : "[" + (shortName != null ? shortName : longName) + " " + value + "]";
        }
    }

    private Syntax(String command) {
        this.command = command;
    }

    /**
     * @param name the command without its scope, e.g. {@code alloc}
     * @return the syntax of a command that takes nothing yet
     */
    static Syntax of(String name) {
        return new Syntax("mem:" + name);
    }

    /**
     * @param shortName e.g. {@code -t}, or null
     * @param longName  e.g. {@code --type}: the key of its value
     * @param value     the value's name in the usage, e.g. {@code TYPE}
     * @return this syntax
     */
    Syntax option(String shortName, String longName, String value) {
        options.put(longName, new Option(shortName, longName, value));
        return this;
    }

    /** @return this syntax, with a flag (an option without value) */
    Syntax flag(String shortName, String longName) {
        options.put(longName, new Option(shortName, longName, null));
        return this;
    }

    /** @return this syntax, with a positional word that must be given, after those declared before */
    Syntax required(String name) {
        required.add(name);
        return this;
    }

    /** @return this syntax, with a positional word that may be left out, after those declared before */
    Syntax optional(String name) {
        optional.add(name);
        return this;
    }

    /** @return this syntax, taking any number of further words, e.g. {@code DATA} */
    Syntax rest(String name) {
        rest = name;
        return this;
    }

    /**
     * @return e.g. {@code mem:alloc [-t TYPE] [-a ALIGN] SIZE [DEVICE]}; optional words nest (a later
     *         one only after the earlier: {@code [SRC_OFFSET [DST_OFFSET]]}), a rest stands apart,
     *         as the one command with both reads it: {@code mem:pool DEVICE [TYPE] [KEY=VALUE...]}
     *         takes {@code cpu:0 maxSize=8g}
     */
    String usage() {
        StringBuilder sb = new StringBuilder(command);
        options.values().forEach(o -> sb.append(' ').append(o.usage()));
        required.forEach(r -> sb.append(' ').append(r));
        StringBuilder tail = new StringBuilder();
        for (String o : optional) {
            sb.append(" [").append(o);
            tail.append(']');
        }
        sb.append(tail);
        if (rest != null) {
            sb.append(" [").append(rest).append("...]");
        }
        return sb.toString();
    }

    /**
     * @param args the words after the command, as the shell passed them (null: none)
     * @return the words by name
     * @throws InvalidMemoryRequestException if the words do not fit this syntax, naming what is wrong
     *                                       and giving the usage; the command then does nothing
     */
    Words parse(String... args) {
        Map<String, String> values = new HashMap<>();
        List<String> positional = new ArrayList<>();
        boolean optionsEnded = false;
        List<String> words = args == null ? List.of() : Arrays.asList(args);
        int unset = words.indexOf(null);
        if (unset >= 0) {
            throw wrong(command + " got no value for its word " + (unset + 1) + " (a variable that is not set?)");
        }
        for (int i = 0; i < words.size(); i++) {
            String w = words.get(i);
            if (!optionsEnded && w.equals("--")) {
                optionsEnded = true;
            } else if (!optionsEnded && OPTION.matcher(w).matches()) {
                int eq = w.indexOf('=');
                Option o = find(eq > 0 ? w.substring(0, eq) : w);
                String value;
                if (eq > 0) { // --type=TENSOR, -t=TENSOR
                    if (o.value == null) {
                        throw wrong("Option " + w.substring(0, eq) + " of " + command + " takes no value");
                    }
                    value = w.substring(eq + 1);
                } else if (o.value == null) {
                    value = "true";
                } else if (i + 1 < words.size()) {
                    value = words.get(++i);
                } else {
                    throw wrong("Option " + w + " of " + command + " needs a value (" + o.value + ")");
                }
                String earlier = values.put(o.longName, value);
                if (earlier != null) { // which one was meant? (-t CACHE ... -t TENSOR): the call is refused, not guessed
                    throw wrong("Option " + o.longName + " of " + command + " is given twice" + (o.value == null ? ""
                            : " ('" + earlier + "', then '" + value + "')") + ": give it once");
                }
            } else {
                positional.add(w);
            }
        }
        if (positional.size() < required.size()) {
            throw wrong(command + " is missing " + String.join(" ", required.subList(positional.size(), required.size())));
        }
        int most = required.size() + optional.size();
        if (rest == null && positional.size() > most) {
            List<String> extra = positional.subList(most, positional.size());
            throw wrong(command + " takes " + (most == 0 ? "no arguments" : "at most " + most + (most == 1 ? " argument"
                    : " arguments")) + ", not also '" + String.join(" ", extra) + "'");
        }
        Map<String, String> named = new HashMap<>();
        List<String> names = new ArrayList<>(required);
        names.addAll(optional);
        for (int i = 0; i < Math.min(names.size(), positional.size()); i++) {
            named.put(names.get(i), positional.get(i));
        }
        List<String> more = positional.size() > names.size() ? positional.subList(names.size(), positional.size()) : List.of();
        return new Words(values, named, List.copyOf(more));
    }

    private Option find(String word) {
        for (Option o : options.values()) {
            if (word.equals(o.longName) || word.equals(o.shortName)) {
                return o;
            }
        }
        throw wrong("Unknown option " + word + " for " + command + (options.isEmpty() ? " (it has none)" : "")
                + "; a value starting with - goes after --");
    }

    private InvalidMemoryRequestException wrong(String what) {
        return new InvalidMemoryRequestException(what + "; usage: " + usage());
    }

    /** The words of one call, by name: options by their long name, positional words by their usage name. */
    static final class Words {
        private final Map<String, String> options;
        private final Map<String, String> positional;
        private final List<String> rest;

        private Words(Map<String, String> options, Map<String, String> positional, List<String> rest) {
            this.options = options;
            this.positional = positional;
            this.rest = rest;
        }

        /** @return the value of the option with this long name, or {@code absent} if it was not given */
        String option(String longName, String absent) {
            return options.getOrDefault(longName, absent);
        }

        /** @return whether the flag with this long name was given */
        boolean flag(String longName) {
            return options.containsKey(longName);
        }

        /** @return the positional word of this name, or {@code absent} if an optional one was left out */
        String get(String name, String absent) {
            return positional.getOrDefault(name, absent);
        }

        /** @return the positional word of this name (a required one) */
        String get(String name) {
            return positional.get(name);
        }

        /** @return the words after the named positional ones */
        List<String> rest() {
            return rest;
        }
    }
}
