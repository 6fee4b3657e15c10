package io.ferrum.memory.api;

import java.util.HexFormat;

/**
 * An opaque reference to one live allocation. Handles are unique in the process: the monitor routes
 * any handle to the manager that issued it, and a handle once freed is never issued again.
 *
 * <p>The id {@code 0} is never issued and means "no allocation" ({@link #INVALID}). The text form
 * is {@code 0x} followed by 16 hex digits, accepted by {@link #parse(String)}.
 *
 * @param id the opaque id; its bits are the issuing manager's business
 */
public record MemoryHandle(long id) {

    /** The handle that names nothing. */
    public static final MemoryHandle INVALID = new MemoryHandle(0);

    /** @return false only for the zero handle; a non-zero handle may still be freed or foreign */
    public boolean isValid() {
        return id != 0;
    }

    /**
     * Parses the text form, with or without the {@code 0x} prefix, or a plain decimal id.
     *
     * @param text for example {@code 0x0000000100000003} or {@code 4294967299}
     * @return the handle
     * @throws InvalidMemoryRequestException if the text is not a handle
     */
    public static MemoryHandle parse(String text) {
        if (text == null || text.isBlank()) {
            throw new InvalidMemoryRequestException("Invalid handle '" + text + "': expected 0x followed by hex digits");
        }
        String t = text.strip();
        // ASCII digits only, at most as many as the id has: Long.parseUnsignedLong also takes a sign
        // (+1, 0x+1), other scripts' digits and any number of leading zeros.
        boolean hex = t.startsWith("0x") || t.startsWith("0X");
        String digits = hex ? t.substring(2) : t;
        if (!digits.matches(hex ? "[0-9a-fA-F]{1,16}" : "[0-9]{1,20}")) {
            throw new InvalidMemoryRequestException("Invalid handle '" + text
                    + "': expected 0x followed by up to 16 hex digits, as printed by mem:alloc");
        }
        try {
            return new MemoryHandle(Long.parseUnsignedLong(digits, hex ? 16 : 10));
        } catch (NumberFormatException e) { // 20 decimal digits above 2^64 - 1
            throw new InvalidMemoryRequestException("Invalid handle '" + text
                    + "': expected 0x followed by up to 16 hex digits, as printed by mem:alloc");
        }
    }

    /** @return {@code 0x} and 16 hex digits */
    @Override
    public String toString() {
        return "0x" + HexFormat.of().toHexDigits(id);
    }
}
