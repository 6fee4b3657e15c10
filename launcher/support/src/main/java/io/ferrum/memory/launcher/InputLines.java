package io.ferrum.memory.launcher;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.Charset;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.MalformedInputException;
import java.nio.charset.StandardCharsets;
import java.nio.charset.UnmappableCharacterException;
import java.util.HexFormat;
import java.util.function.IntConsumer;
import java.util.function.IntSupplier;

/**
 * The lines of a script piped to the console, each decoded on its own in standard input's encoding.
 * A {@code Reader} puts a replacement character in place of bytes that are not valid in it (a Latin-1
 * {@code é} where UTF-8 is read), and {@code mem:write --text} wrote that character as data without
 * a word; here such a line is {@linkplain Malformed refused}, naming its number and its bytes, and the
 * next line is read. US-ASCII, the C locale's encoding, is read as UTF-8. A comment line is not refused: the console skips it, whatever its bytes. A UTF-8
 * byte order mark at the start is dropped, and says that the input is UTF-8 whatever the locale. A
 * line longer than {@link #MAX_LINE} is refused too, not kept. Lines end as a {@code BufferedReader}
 * ends them, at {@code \n}, {@code \r} or {@code \r\n}, which every encoding a standard input has in
 * practice writes as those single bytes; an encoding that does not (UTF-16) is read through a
 * {@code Reader} instead, with the same ends and limit.
 */
final class InputLines {
    /** A line whose bytes are not valid in the encoding: the message names its number (from 1) and the bytes. */
    static final class Malformed extends IOException {
        private static final long serialVersionUID = 1L;

        Malformed(String message) {
            super(message);
        }
    }

    /** The longest line kept, in bytes: a longer one (a binary file piped in, no line end in sight) is refused. */
    static final int MAX_LINE = 16 << 20;

    private final InputStream in;
    /** Standard input's encoding; UTF-8 once a UTF-8 byte order mark began the input. */
    private Charset charset;
    /** What chose the encoding, as an error line says it. */
    private String chosenBy = "stdin.encoding";
    private final boolean asciiLines;
    private final BufferedReader reader;
    private int number;
    /** The last line ended at a {@code \r}: a {@code \n} right after it is that line's end, not a line. */
    private boolean afterReturn;

    InputLines(InputStream in, Charset charset) {
        this.in = new BufferedInputStream(in);
        if (charset.equals(StandardCharsets.US_ASCII)) {
            // The C or POSIX locale (LC_ALL=C, most containers and cron jobs): no encoding chosen, not a
            // script known to be ASCII. Read as UTF-8, as piped scripts were before stdin.encoding was
            // honoured and as Python does in that locale (PEP 538, 540): every ASCII line reads the same.
            charset = StandardCharsets.UTF_8;
            chosenBy = "stdin.encoding US-ASCII, read as UTF-8";
        }
        this.charset = charset;
        byte[] ends = "\n\r".getBytes(charset);
        this.asciiLines = ends.length == 2 && ends[0] == '\n' && ends[1] == '\r';
        this.reader = asciiLines ? null : new BufferedReader(new InputStreamReader(in, charset));
    }

    /**
     * @return the next line without its end, or null at the end of the input
     * @throws Malformed when the line's bytes are not valid in the encoding, unless it is a comment (it is
     *         returned as decoded with replacements), or it is longer than {@link #MAX_LINE}; the next
     *         call reads the line after it
     */
    String next() throws IOException {
        if (!asciiLines) {
            // Such an encoding (UTF-16, UTF-32) writes each character in two bytes or more, so a line
            // of MAX_LINE / 2 characters holds at least MAX_LINE bytes.
            StringBuilder chars = new StringBuilder();
            if (!readLine(reader::read, c -> chars.append((char) c), chars::length, MAX_LINE / 2)) {
                return null;
            }
            // A byte order mark the decoder kept (UTF-16LE, UTF-16BE) is no part of the first command.
            String line = chars.toString();
            return number++ == 0 && line.startsWith("\ufeff") ? line.substring(1) : line;
        }
        ByteArrayOutputStream line = new ByteArrayOutputStream();
        if (!readLine(in::read, line::write, line::size, MAX_LINE)) {
            return null;
        }
        byte[] bytes = line.toByteArray();
        int start = 0;
        if (number++ == 0 && bytes.length >= 3 && (bytes[0] & 0xff) == 0xef && (bytes[1] & 0xff) == 0xbb && (bytes[2] & 0xff) == 0xbf) {
            // A UTF-8 byte order mark ("UTF-8 with BOM", as Windows editors save): the script says it
            // is UTF-8, whatever the locale says (US-ASCII under LC_ALL=C refused its first line).
            start = 3;
            charset = StandardCharsets.UTF_8;
            chosenBy = "its byte order mark";
        }
        ByteBuffer text = ByteBuffer.wrap(bytes, start, bytes.length - start);
        try {
            return charset.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT).decode(text).toString();
        } catch (MalformedInputException | UnmappableCharacterException e) {
            if (comment(bytes, start)) {
                // Skipped by the console whatever it holds ("# Größe" in UTF-8 under LC_ALL=C, which
                // reads US-ASCII): its bytes say nothing about the script, and it ran before.
                return new String(bytes, start, bytes.length - start, charset);
            }
            // The decoder stops at the bytes it could not read.
            int at = text.position();
            int bad = e instanceof MalformedInputException m ? m.getInputLength() : ((UnmappableCharacterException) e).getInputLength();
            String name = charset.name();
            throw new Malformed("line " + number + " of standard input is not valid " + name + " (" + chosenBy + "): "
                    + HexFormat.ofDelimiter(" ").formatHex(bytes, at, Math.min(bytes.length, at + bad)) + " at byte " + (at + 1)
                    + "; it was not run. Save the script in " + name
                    + (charset.equals(StandardCharsets.UTF_8) ? "" : ", or start Java with -Dstdin.encoding=UTF-8 for a UTF-8 script"));
        }
    }

    /** One unit of the input at a time: a byte of the stream, or a character of the reader; -1 at its end. */
    private interface Units {
        int read() throws IOException;
    }

    /**
     * Reads one line's units to its end ({@code \n}, {@code \r\n} or {@code \r}), keeping at most
     * {@code limit} of them; a longer line is read to its end, not kept, and refused.
     *
     * @return false at the end of the input, with no unit read
     * @throws Malformed for a line longer than {@code limit}; the next call reads the line after it
     */
    private boolean readLine(Units in, IntConsumer keep, IntSupplier kept, int limit) throws IOException {
        int u = in.read();
        if (u == '\n' && afterReturn) {
            u = in.read(); // the \n of a \r\n whose \r ended the line before
        }
        afterReturn = false;
        boolean tooLong = false;
        for (; u >= 0 && u != '\n' && u != '\r'; u = in.read()) {
            if (kept.getAsInt() < limit) {
                keep.accept(u);
            } else {
                tooLong = true;
            }
        }
        if (u < 0 && kept.getAsInt() == 0) {
            return false;
        }
        // Not read now whether a \n follows: a program that feeds a line at a time would wait.
        afterReturn = u == '\r';
        if (tooLong) {
            number++;
            throw new Malformed("line " + number + " of standard input is longer than " + (MAX_LINE >> 20) + " MiB; it was not run");
        }
        return true;
    }

    /**
     * @return whether the line is a comment: its first byte that is not blank is {@code #}, which an
     *         encoding read byte by byte here writes as that one byte
     */
    private static boolean comment(byte[] line, int start) {
        for (int i = start; i < line.length; i++) {
            byte b = line[i];
            if (b == '#') {
                return true;
            }
            if (b < 0 || !Character.isWhitespace(b)) {
                return false;
            }
        }
        return false;
    }
}
