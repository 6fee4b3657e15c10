package io.ferrum.memory.shell;

import java.util.Locale;

import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryType;

/**
 * The command arguments that are not sizes ({@link Sizes}), devices ({@code Device.parse}) or
 * handles ({@code MemoryHandle.parse}): memory types, access modes, byte values and flags. Each
 * parser is lenient about case and blanks, and its message names the text and lists what is valid.
 */
final class Arguments {
    private Arguments() {
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
        try {
            String t = text.strip().toLowerCase(Locale.ROOT);
            int v = t.startsWith("0x") ? Integer.parseInt(t.substring(2), 16) : Integer.parseInt(t);
            if (v < 0 || v > 255) {
                throw new NumberFormatException();
            }
            return (byte) v;
        } catch (NumberFormatException e) {
            throw new InvalidMemoryRequestException("Invalid byte '" + text + "': use 0-255 or 0x00-0xff");
        }
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
}
