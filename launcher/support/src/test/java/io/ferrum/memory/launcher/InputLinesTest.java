package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.ByteArrayInputStream;
import java.nio.charset.StandardCharsets;
import java.util.List;

import org.junit.jupiter.api.Test;

/** Piped lines as the console reads them: each decoded on its own, one that is not valid refused by number. */
class InputLinesTest {
    @Test
    void aLineNotValidInTheEncodingIsRefusedByNumberAndTheNextIsRead() throws Exception {
        byte[] input = {'a', '\r', '\n', 'c', 'a', 'f', (byte) 0xe9, '\n', 'c', 'a', 'f', (byte) 0xc3, (byte) 0xa9};
        InputLines lines = new InputLines(new ByteArrayInputStream(input), StandardCharsets.UTF_8);
        assertEquals("a", lines.next(), "the \\r of a Windows line end is dropped");
        InputLines.Malformed refused = assertThrows(InputLines.Malformed.class, lines::next);
        assertEquals("line 2 of standard input is not valid UTF-8 (stdin.encoding): e9 at byte 4; it was not run."
                + " Save the script in UTF-8", refused.getMessage());
        assertEquals("caf\u00e9", lines.next(), "a last line without its end");
        assertNull(lines.next());
    }

    @Test
    void anEncodingWhoseLineEndIsNotOneByteIsReadAsText() throws Exception {
        InputLines lines = new InputLines(new ByteArrayInputStream("mem:devices\nmem:gc\n".getBytes(StandardCharsets.UTF_16)),
                StandardCharsets.UTF_16);
        assertEquals("mem:devices", lines.next());
        assertEquals("mem:gc", lines.next());
        assertNull(lines.next());
    }

    /**
     * A UTF-16 script (stdin.encoding UTF-16BE) holding a lone surrogate, as a program cutting a pair in
     * two writes it: the Reader put U+FFFD in its place, and {@code mem:write --text} wrote that
     * character's three bytes as data without a word. The line is refused by number and position, as
     * a UTF-8 line is, and the next line is read, even when the lone half stands right before the line
     * end (the decoder takes four bytes for a half and what follows it).
     */
    @Test
    void aLoneSurrogateInAnEncodingReadAsTextIsRefusedByPosition() throws Exception {
        java.io.ByteArrayOutputStream script = new java.io.ByteArrayOutputStream();
        script.writeBytes("mem:write --text $h 0 'a".getBytes(StandardCharsets.UTF_16BE));
        script.writeBytes(new byte[] {(byte) 0xd8, 0x3d}); // the high half of U+1F600, alone
        script.writeBytes("b'\nmem:gc\n#x".getBytes(StandardCharsets.UTF_16BE));
        script.writeBytes(new byte[] {(byte) 0xdc, 0x00}); // a low half, alone, in a comment
        script.writeBytes("\nmem:devices ".getBytes(StandardCharsets.UTF_16BE));
        script.writeBytes(new byte[] {(byte) 0xd8, 0x3d}); // a high half right before the line end
        script.writeBytes("\nmem:backends\n\ud83d\ude00\n".getBytes(StandardCharsets.UTF_16BE));
        InputLines lines = new InputLines(new ByteArrayInputStream(script.toByteArray()), StandardCharsets.UTF_16BE);
        InputLines.Malformed refused = assertThrows(InputLines.Malformed.class, lines::next);
        assertEquals("line 1 of standard input is not valid UTF-16BE (stdin.encoding): d8 3d at byte 49; it was not run."
                + " Save the script in UTF-16BE, or start Java with -Dstdin.encoding=UTF-8 for a UTF-8 script", refused.getMessage());
        assertEquals("mem:gc", lines.next());
        assertEquals("#x\ufffd", lines.next(), "a comment is given as read: the console skips it");
        refused = assertThrows(InputLines.Malformed.class, lines::next);
        assertEquals("line 4 of standard input is not valid UTF-16BE (stdin.encoding): d8 3d at byte 25; it was not run."
                + " Save the script in UTF-16BE, or start Java with -Dstdin.encoding=UTF-8 for a UTF-8 script", refused.getMessage());
        assertEquals("mem:backends", lines.next(), "the line end after a lone half ends its line");
        assertEquals("\ud83d\ude00", lines.next(), "a whole pair is a character");
        assertNull(lines.next());
    }

    @Test
    void aLoneCarriageReturnEndsALineAsAReaderEndsIt() throws Exception {
        // A script saved with classic Mac line ends (\r alone), or written by printf 'a\rb': a
        // BufferedReader, which read the piped lines before, ended a line at each \r too.
        byte[] input = "mem:devices\rmem:gc\r\r\nmem:backends\r".getBytes(StandardCharsets.UTF_8);
        InputLines lines = new InputLines(new ByteArrayInputStream(input), StandardCharsets.UTF_8);
        assertEquals("mem:devices", lines.next());
        assertEquals("mem:gc", lines.next());
        assertEquals("", lines.next(), "\r then \r\n: an empty line, its \n no second one");
        assertEquals("mem:backends", lines.next());
        assertNull(lines.next());
    }

    @Test
    void aLineEndedByACarriageReturnIsGivenWithoutWaitingForTheNextByte() throws Exception {
        // A program that feeds the console a line at a time ("cmd\r") and waits for its answer: a read
        // past the line, for a byte that only tells whether a \n follows, would wait for ever.
        byte[] fed = "mem:devices\r".getBytes(StandardCharsets.UTF_8);
        java.io.InputStream feeder = new java.io.InputStream() {
            private int at;

            @Override
            public int read() {
                if (at == fed.length) {
                    throw new AssertionError("read past the line: a pipe would block here");
                }
                return fed[at++];
            }

            @Override
            public int read(byte[] b, int off, int len) {
                if (len == 0) {
                    return 0;
                }
                b[off] = (byte) read();
                return 1; // what a pipe has: no more than was written
            }
        };
        assertEquals("mem:devices", new InputLines(feeder, StandardCharsets.UTF_8).next());
    }

    @Test
    void aCommentLineIsNoFailureWhateverItsBytes() throws Exception {
        // "# Größe prüfen" in Latin-1 under a UTF-8 locale (or the C locale, read as UTF-8): the console
        // skips a comment, so its bytes say nothing about the script. A line with a statement is still refused.
        byte[] input = "# Gr\u00f6\u00dfe\n  \t# 1 \u00b5s\nmem:devices # \u00b5\n".getBytes(StandardCharsets.ISO_8859_1);
        for (java.nio.charset.Charset locale : List.of(StandardCharsets.UTF_8, StandardCharsets.US_ASCII)) {
            InputLines lines = new InputLines(new ByteArrayInputStream(input), locale);
            assertEquals("#", lines.next().substring(0, 1));
            assertEquals("# 1 ", lines.next().strip().substring(0, 4));
            InputLines.Malformed refused = assertThrows(InputLines.Malformed.class, lines::next);
            String chosenBy = locale.equals(StandardCharsets.UTF_8) ? "stdin.encoding" : "stdin.encoding US-ASCII, read as UTF-8";
            assertEquals("line 3 of standard input is not valid UTF-8 (" + chosenBy + "): b5 at byte 15; it was not run."
                    + " Save the script in UTF-8", refused.getMessage());
            assertNull(lines.next());
        }
    }

    @Test
    void aByteOrderMarkThatAReaderKeepsIsDroppedToo() throws Exception {
        // UTF-16LE is read through a Reader, which keeps a mark as U+FEFF: not part of the first command.
        byte[] script = "\ufeffmem:devices\nmem:gc\n".getBytes(StandardCharsets.UTF_16LE);
        InputLines lines = new InputLines(new ByteArrayInputStream(script), StandardCharsets.UTF_16LE);
        assertEquals("mem:devices", lines.next());
        assertEquals("mem:gc", lines.next());
        assertNull(lines.next());
    }

    @Test
    void theCLocalesUsAsciiIsReadAsUtf8() throws Exception {
        // LC_ALL=C makes stdin.encoding US-ASCII: the locale chose no encoding, and a UTF-8 script that
        // ran before stdin.encoding was honoured must not be refused now.
        byte[] script = "mem:write --text $h 0 'caf\u00e9'\n".getBytes(StandardCharsets.UTF_8);
        InputLines lines = new InputLines(new ByteArrayInputStream(script), StandardCharsets.US_ASCII);
        assertEquals("mem:write --text $h 0 'caf\u00e9'", lines.next());
        assertNull(lines.next());
    }

    @Test
    void aUtf8ByteOrderMarkAtTheStartSaysTheScriptIsUtf8WhateverTheLocale() throws Exception {
        // A script saved as "UTF-8 with BOM", piped in under LC_ALL=C (US-ASCII) or a Latin-1 locale:
        // its first line was refused ("ef at byte 1") or run as "\u00ef\u00bb\u00bfmem:devices".
        byte[] script = "\ufeffmem:devices\nmem:write --text $h 0 'caf\u00e9'\n".getBytes(StandardCharsets.UTF_8);
        for (java.nio.charset.Charset locale : List.of(StandardCharsets.US_ASCII, StandardCharsets.ISO_8859_1)) {
            InputLines lines = new InputLines(new ByteArrayInputStream(script), locale);
            assertEquals("mem:devices", lines.next(), locale.name());
            assertEquals("mem:write --text $h 0 'caf\u00e9'", lines.next(), locale.name());
            assertNull(lines.next());
        }
        InputLines latin1 = new InputLines(new ByteArrayInputStream(new byte[] {(byte) 0xef, (byte) 0xbb, (byte) 0xbf, 'a', (byte) 0xe9}),
                StandardCharsets.US_ASCII);
        assertEquals("line 1 of standard input is not valid UTF-8 (its byte order mark): e9 at byte 5; it was not run."
                + " Save the script in UTF-8", assertThrows(InputLines.Malformed.class, latin1::next).getMessage());
    }

    /**
     * Input with no line end for a long way (a binary file piped in by mistake, /dev/zero): the line
     * was kept whole, until the console's thread died of an OutOfMemoryError and the process stayed
     * up with no console, for good. A line longer than the limit is refused, its bytes not kept, and
     * the next line is read.
     */
    @Test
    void aLineLongerThanTheLimitIsRefusedWithoutKeepingItAndTheNextIsRead() throws Exception {
        byte[] after = "\nmem:gc\n".getBytes(StandardCharsets.US_ASCII);
        long length = InputLines.MAX_LINE + 1L;
        java.io.InputStream endless = new java.io.InputStream() {
            private long at;

            @Override
            public int read() {
                if (at < length) {
                    at++;
                    return 'a';
                }
                int i = (int) (at++ - length);
                return i < after.length ? after[i] : -1;
            }
        };
        InputLines lines = new InputLines(endless, StandardCharsets.UTF_8);
        InputLines.Malformed refused = assertThrows(InputLines.Malformed.class, lines::next);
        assertEquals("line 1 of standard input is longer than " + InputLines.MAX_LINE / (1 << 20) + " MiB; it was not run",
                refused.getMessage());
        assertEquals("mem:gc", lines.next());
        assertNull(lines.next());
    }

    /**
     * A binary file piped in under a UTF-16 {@code stdin.encoding}: the {@code Reader}'s line had no
     * limit, so the whole input went into one line in memory.
     */
    @Test
    void aLineLongerThanTheLimitIsRefusedInAnEncodingReadAsTextToo() throws Exception {
        byte[] after = "\r\nmem:gc\r\n".getBytes(StandardCharsets.UTF_16BE);
        long length = InputLines.MAX_LINE + 2L; // bytes: MAX_LINE / 2 + 1 characters
        java.io.InputStream endless = new java.io.InputStream() {
            private long at;

            @Override
            public int read() {
                if (at < length) {
                    return at++ % 2 == 0 ? 0 : 'a';
                }
                int i = (int) (at++ - length);
                return i < after.length ? after[i] & 0xff : -1;
            }
        };
        InputLines lines = new InputLines(endless, StandardCharsets.UTF_16BE);
        InputLines.Malformed refused = assertThrows(InputLines.Malformed.class, lines::next);
        assertEquals("line 1 of standard input is longer than " + InputLines.MAX_LINE / (1 << 20) + " MiB; it was not run",
                refused.getMessage());
        assertEquals("mem:gc", lines.next(), "the next line, its \\r\\n one end");
        assertNull(lines.next());
    }
}
