package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.io.InputStreamReader;
import java.io.Reader;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

import org.apache.felix.fileinstall.shaded.util.properties.TypedProperties;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The files are read with FileInstall 3.7.4's own parser, as its ConfigInstaller reads a {@code .cfg} file. */
class ByteOrderMarksTest {
    private static final byte[] UTF_8_BOM = {(byte) 0xef, (byte) 0xbb, (byte) 0xbf};

    @TempDir
    Path dir;

    /** A Windows editor's "UTF-8 with BOM": the first key got the mark's three characters in front, silently. */
    @Test
    void aFileSavedWithAUtf8MarkIsNamedWithTheKeyAsRead() throws Exception {
        Path file = write("io.ferrum.memory.cpu.cfg", bom("capacity=64m\ninitialSize=4m\n"));
        assertEquals(file + " starts with a UTF-8 byte order mark (BOM), which FileInstall reads as part of its first line:"
                        + " the key 'capacity' is read as '\\u00ef\\u00bb\\u00bfcapacity' and configures nothing;"
                        + " save the file as UTF-8 without BOM (or as ASCII)",
                ByteOrderMarks.warning(file.toString(), keysAsFileInstallReads(file, StandardCharsets.ISO_8859_1)));
    }

    /** With {@code felix.fileinstall.configEncoding=UTF-8} the mark is one character, and still in the key. */
    @Test
    void theMarkIsFoundWhenFileInstallReadsUtf8Too() throws Exception {
        Path file = write("org.example.plugin.cfg", bom("size=3\n"));
        assertEquals(file + " starts with a UTF-8 byte order mark (BOM), which FileInstall reads as part of its first line:"
                        + " the key 'size' is read as '\\ufeffsize' and configures nothing; save the file as UTF-8 without BOM"
                        + " (or as ASCII)",
                ByteOrderMarks.warning(file.toString(), keysAsFileInstallReads(file, StandardCharsets.UTF_8)));
    }

    /** A first line that was a comment becomes a key of its own, which our components refuse as unknown. */
    @Test
    void aCommentAfterTheMarkIsNamedAsTheKeyItBecame() throws Exception {
        Path file = write("io.ferrum.memory.monitor.cfg", bom("# the router\nmaxAttempts=3\n"));
        assertEquals(file + " starts with a UTF-8 byte order mark (BOM), which FileInstall reads as part of its first line:"
                        + " its first line is no comment or blank line any more but the key '\\u00ef\\u00bb\\u00bf#';"
                        + " save the file as UTF-8 without BOM (or as ASCII)",
                ByteOrderMarks.warning(file.toString(), keysAsFileInstallReads(file, StandardCharsets.ISO_8859_1)));
    }

    @Test
    void aUtf16FileIsNamedAsUnreadable() throws Exception {
        Path file = write("io.ferrum.memory.cpu.cfg", "capacity=64m\n".getBytes(StandardCharsets.UTF_16));
        assertEquals(file + " starts with a UTF-16 byte order mark (BOM): it is saved as UTF-16, which FileInstall does"
                        + " not read, so none of its lines configures anything; save the file as UTF-8 without BOM (or as ASCII)",
                ByteOrderMarks.warning(file.toString(), keysAsFileInstallReads(file, StandardCharsets.ISO_8859_1)));
    }

    @Test
    void aFileWithoutAMarkIsNotNamed() throws Exception {
        Path file = write("io.ferrum.memory.cpu.cfg", "capacity=r\u00e9sum\u00e9\n\u00efkey=1\n".getBytes(StandardCharsets.UTF_8));
        assertNull(ByteOrderMarks.warning(file.toString(), keysAsFileInstallReads(file, StandardCharsets.ISO_8859_1)));
    }

    private Path write(String name, byte[] content) throws Exception {
        return Files.write(dir.resolve(name), content);
    }

    private static byte[] bom(String text) {
        byte[] body = text.getBytes(StandardCharsets.UTF_8);
        byte[] all = new byte[UTF_8_BOM.length + body.length];
        System.arraycopy(UTF_8_BOM, 0, all, 0, UTF_8_BOM.length);
        System.arraycopy(body, 0, all, UTF_8_BOM.length, body.length);
        return all;
    }

    private static Iterable<String> keysAsFileInstallReads(Path file, Charset encoding) throws Exception {
        TypedProperties p = new TypedProperties();
        try (Reader r = new InputStreamReader(Files.newInputStream(file), encoding)) {
            p.load(r);
        }
        return p.keySet();
    }
}
