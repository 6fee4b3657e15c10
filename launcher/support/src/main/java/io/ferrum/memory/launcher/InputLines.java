package io.ferrum.memory.launcher;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.CharBuffer;
import java.nio.charset.Charset;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CoderResult;
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
 * practice writes as those single bytes; an encoding that does not (UTF-16) is decoded as it comes
 * ({@link Decoded}), with the same ends and limit, and a line with a sequence not valid in it (a
 * lone surrogate) is refused as well, by the sequence's bytes and place.
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
    /** The characters of an encoding whose line ends are not single bytes, or null. */
    private final Decoded decoded;
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
        this.decoded = asciiLines ? null : new Decoded(in, charset);
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
            decoded.bad = null;
            if (!readLine(decoded, c -> chars.append((char) c), chars::length, MAX_LINE / 2)) {
                return null;
            }
            // A byte order mark the decoder kept (UTF-16LE, UTF-16BE) is no part of the first command.
            String line = chars.toString();
            if (number++ == 0 && line.startsWith("\ufeff")) {
                line = line.substring(1);
            }
            if (decoded.bad != null && !line.stripLeading().startsWith("#")) {
                // A Reader's U+FFFD in place of the sequence would have run as part of an argument.
                throw malformed(decoded.bad, decoded.badAt);
            }
            return line;
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
            throw malformed(HexFormat.ofDelimiter(" ").formatHex(bytes, at, Math.min(bytes.length, at + bad)), at + 1);
        }
    }

    /**
     * @param bad the bytes not valid in the encoding, in hex
     * @param at  the line's byte where they start, from 1
     * @return the refusal of the line just read
     */
    private Malformed malformed(String bad, long at) {
        String name = charset.name();
        return new Malformed("line " + number + " of standard input is not valid " + name + " (" + chosenBy + "): "
                + bad + " at byte " + at + "; it was not run. Save the script in " + name
                + (charset.equals(StandardCharsets.UTF_8) ? "" : ", or start Java with -Dstdin.encoding=UTF-8 for a UTF-8 script"));
    }

    /** One unit of the input at a time: a byte of the stream, or a character of the reader; -1 at its end. */
    private interface Units {
        int read() throws IOException;
    }

    /**
     * The characters of an input in an encoding whose line ends are not single bytes, decoded as a
     * {@code Reader} decodes them but for a sequence not valid in the encoding: a {@code Reader} puts
     * U+FFFD in its place without a word; here the first such sequence of a line is kept ({@link
     * #bad}) for the line's refusal, and a U+FFFD stands in the line (a comment is given as read).
     * Such a sequence is skipped by one code unit of the encoding (two bytes in UTF-16): the decoder
     * takes a lone high surrogate with the two bytes after it, which may be the line's end. Bytes are
     * read as they come, no more than the stream has (a pipe's line is given without waiting for the
     * next), and each decoding gives one character, or the two halves of a pair, so that the bytes
     * counted so far end where the last character given ends.
     */
    private static final class Decoded implements Units {
        private final InputStream in;
        private final CharsetDecoder decoder;
        /** Bytes of one code unit: what a sequence not valid is skipped by. */
        private final int unit;
        private final ByteBuffer bytes = ByteBuffer.allocate(8192).flip();
        /** One character, a pair's two halves, or U+FFFD after a character the decoder gave before a bad sequence. */
        private final CharBuffer chars = CharBuffer.allocate(3).flip();
        private boolean end;
        private boolean flushed;
        /** Bytes decoded so far, and how many of them came before the current line. */
        private long consumed;
        private long lineStart;
        /** The first sequence of the current line not valid in the encoding, in hex, or null; set to null for each line. */
        String bad;
        /** Where {@link #bad} starts in its line, in bytes from 1. */
        long badAt;

        Decoded(InputStream in, Charset charset) {
            this.in = in;
            this.decoder = charset.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT);
            this.unit = Math.max(1, Math.round(1 / decoder.averageCharsPerByte()));
        }

        @Override
        public int read() throws IOException {
            while (!chars.hasRemaining()) {
                if (flushed) {
                    return -1;
                }
                chars.clear().limit(1);
                int before = bytes.position();
                CoderResult r = decoder.decode(bytes, chars, end);
                if (r.isOverflow() && chars.position() == 0) {
                    chars.limit(2); // a pair of surrogates, given together
                    r = decoder.decode(bytes, chars, end);
                }
                consumed += bytes.position() - before;
                if (r.isError() && chars.position() == 0) {
                    int skip = Math.min(r.length(), unit);
                    if (bad == null) {
                        bad = HexFormat.ofDelimiter(" ").formatHex(bytes.array(), bytes.position(), bytes.position() + skip);
                        badAt = consumed - lineStart + 1;
                    }
                    bytes.position(bytes.position() + skip);
                    consumed += skip;
                    chars.limit(chars.capacity()).put('\ufffd');
                } else if (r.isUnderflow() && chars.position() == 0) {
                    if (end) {
                        decoder.flush(chars);
                        flushed = true;
                    } else {
                        bytes.compact();
                        int n = in.read(bytes.array(), bytes.position(), bytes.remaining());
                        if (n < 0) {
                            end = true;
                        } else {
                            bytes.position(bytes.position() + n);
                        }
                        bytes.flip();
                    }
                }
                // else a character: one before a bad sequence is given first, the sequence decoded again next
                chars.flip();
            }
            char c = chars.get();
            if (c == '\n' || c == '\r') {
                lineStart = consumed;
            }
            return c;
        }
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
