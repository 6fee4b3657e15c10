package io.ferrum.memory.shell;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryType;

/**
 * The command arguments that are not sizes ({@link Sizes}), devices ({@code Device.parse}) or
 * handles ({@code MemoryHandle.parse}): memory types, access modes, byte values, flags and the data
 * of {@code mem:write}. Each parser is lenient about case and blanks, and its message names the text
 * and lists what is valid.
 */
final class Arguments {
    /**
     * One hex word of {@code mem:write}'s data, the same rule for every word: pairs of hex digits,
     * with or without {@code 0x} ({@code de}, {@code cafe}, {@code 0xdeadbeef}).
     */
    private static final Pattern HEX_WORD = Pattern.compile("(?i)(?:0x)?(?:[0-9a-f]{2})+");

    /** A byte of {@code mem:fill}: {@code 0x} and one or two hex digits, or up to three decimal ones; no sign. */
    private static final Pattern BYTE = Pattern.compile("(?i)0x([0-9a-f]{1,2})|([0-9]{1,3})");

    /** What {@code mem:alloc} answers: a handle, {@code on} and the device; {@code $h} of {@code h = mem:alloc 1m} is this text. */
    private static final Pattern ALLOCATED = Pattern.compile("(\\S+) on \\S+");

    private Arguments() {
    }

    /**
     * @param text a handle as {@code mem:alloc} printed it ({@code 0x...}), or its whole answer
     *             ({@code 0x... on cpu:0}), which is what a shell variable set to its value holds
     * @return the handle
     * @throws InvalidMemoryRequestException naming {@code text} if it is no handle
     */
    static MemoryHandle handle(String text) {
        Matcher m = text == null ? null : ALLOCATED.matcher(text.strip());
        return MemoryHandle.parse(m != null && m.matches() ? m.group(1) : text);
    }

    /**
     * @param name e.g. {@code tensor}
     * @return the memory type
     * @throws InvalidMemoryRequestException naming {@code name} if there is no such type
     */
    static MemoryType memoryType(String name) {
        try {
            return MemoryType.valueOf(name.strip().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new InvalidMemoryRequestException("Invalid memory type '" + name
                    + "': use GENERAL, TENSOR, CACHE, TEMPORARY, PINNED or MAPPED");
        }
    }

    /**
     * @param name e.g. {@code read_only}
     * @return the access mode
     * @throws InvalidMemoryRequestException naming {@code name} if there is no such mode
     */
    static MemoryAccess access(String name) {
        try {
            return MemoryAccess.valueOf(name.strip().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new InvalidMemoryRequestException("Invalid access '" + name + "': use READ_ONLY, WRITE_ONLY or READ_WRITE");
        }
    }

    /**
     * @param text {@code 0}-{@code 255} or {@code 0x00}-{@code 0xff}
     * @return the byte
     * @throws InvalidMemoryRequestException naming {@code text} if it is not one byte
     */
    static byte byteValue(String text) {
        // Digits only: Integer.parseInt alone would take a sign (+5, 0x+f), which is no byte as written.
        Matcher m = text == null ? null : BYTE.matcher(text.strip());
        int v = m == null || !m.matches() ? -1
                : m.group(1) != null ? Integer.parseInt(m.group(1), 16) : Integer.parseInt(m.group(2));
        if (v < 0 || v > 255) {
            throw new InvalidMemoryRequestException("Invalid byte '" + text + "': use 0-255 or 0x00-0xff");
        }
        return (byte) v;
    }

    /**
     * @param key   the setting the flag is for, named in the message
     * @param value {@code true}/{@code yes}/{@code on} or {@code false}/{@code no}/{@code off}
     * @return the flag
     * @throws InvalidMemoryRequestException naming {@code key} and {@code value} if it is neither
     */
    static boolean flag(String key, String value) {
        return switch (value.strip().toLowerCase(Locale.ROOT)) {
            case "true", "yes", "on" -> true;
            case "false", "no", "off" -> false;
            default -> throw new InvalidMemoryRequestException("Invalid " + key + " '" + value + "': use true or false");
        };
    }

    /**
     * The bytes of {@code mem:write}. The data is hex when its first word is a hex word: pairs of hex
     * digits, with or without {@code 0x} ({@code de}, {@code cafe}, {@code 0xdeadbeef}); then every
     * word must be one ({@code de ad be ef}, {@code 0xdead beef}). A first word that starts with
     * {@code 0x} is meant as hex, so it must be a hex word ({@code 0xabc} and {@code 0x} are
     * errors). Any other first word, or {@code text}, makes the words UTF-8 text joined by one space
     * (a quoted word keeps its own spaces). Words are split at blanks first, so a quoted {@code
     * "de ad"} is hex too.
     *
     * @param text  true to take the words as text even when they look like hex
     * @param words the data words as the shell passed them
     * @return the bytes, at least one
     * @throws InvalidMemoryRequestException if there are no bytes, hex data has a word that is not
     *                                       hex (naming it), or text holds half of a surrogate pair alone
     */
    static byte[] data(boolean text, String... words) {
        List<String> tokens = new ArrayList<>();
        for (String w : words) {
            for (String t : w.strip().split("\\s+")) {
                if (!t.isEmpty()) {
                    tokens.add(t);
                }
            }
        }
        byte[] bytes;
        if (!text && !tokens.isEmpty() && (HEX_WORD.matcher(tokens.get(0)).matches()
                || tokens.get(0).regionMatches(true, 0, "0x", 0, 2))) {
            StringBuilder digits = new StringBuilder();
            for (String t : tokens) {
                if (!HEX_WORD.matcher(t).matches()) {
                    throw new InvalidMemoryRequestException("Invalid hex data '" + t + "': write bytes as pairs of hex"
                            + " digits (de ad be ef, or 0xdeadbeef), or pass --text to write the words as text");
                }
                digits.append(t.regionMatches(true, 0, "0x", 0, 2) ? t.substring(2) : t);
            }
            bytes = new byte[digits.length() / 2];
            for (int i = 0; i < bytes.length; i++) {
                bytes[i] = (byte) Integer.parseInt(digits, 2 * i, 2 * i + 2, 16);
            }
        } else {
            String joined = String.join(" ", words);
            loneSurrogate(joined);
            bytes = joined.getBytes(StandardCharsets.UTF_8);
        }
        if (bytes.length == 0) {
            throw new InvalidMemoryRequestException("No data to write: give hex bytes (de ad be ef, 0xdeadbeef) or a"
                    + " quoted string");
        }
        return bytes;
    }

    /**
     * Half of a surrogate pair without its other half (Gogo's {@code "\\ud83d"} escape, a variable
     * set from another answer) has no bytes in UTF-8: {@code getBytes} would write a {@code ?} in its
     * place, a byte nobody typed.
     *
     * @throws InvalidMemoryRequestException naming the character's place (in characters, from 1) and code
     */
    private static void loneSurrogate(String text) {
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (Character.isHighSurrogate(c) && i + 1 < text.length() && Character.isLowSurrogate(text.charAt(i + 1))) {
                i++; // a whole pair: one character
            } else if (Character.isSurrogate(c)) {
                throw new InvalidMemoryRequestException(String.format(Locale.ROOT, "Invalid text: character %d is U+%04X,"
                        + " half of a surrogate pair without its other half, which UTF-8 cannot write; give the whole"
                        + " character, or its bytes in hex; nothing written", text.codePointCount(0, i) + 1, (int) c));
            }
        }
    }
}
