package io.ferrum.memory.launcher;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.regex.Pattern;

import javax.xml.parsers.SAXParser;

import org.xml.sax.Attributes;
import org.xml.sax.SAXException;
import org.xml.sax.helpers.DefaultHandler;

/**
 * The keys of a file in the watched folders, each with its value as written, in the order of the file
 * and repeats included, as FileInstall 3.7.4 reads them: FileInstall itself keeps only the last value
 * of each key. It reads a {@code .cfg} and a {@code .config} file alike ({@code ConfigInstaller.setConfig}):
 * <ul>
 * <li>a file whose first byte is {@code <} as Java's XML properties ({@code <entry key="k">v</entry>});
 * <li>any other as a properties file in ISO-8859-1 ({@code felix.fileinstall.configEncoding}, which
 * the distribution leaves alone): {@code key=value}, {@code key: value} or {@code key value}, {@code #}
 * and {@code !} comments, a key's escapes ({@code \=}, {@code \u0061}). A value in the typed format
 * ({@code I"3"}, {@code ["a", "b"]}) is a value like any other here. Unlike {@link java.util.Properties},
 * a line ending in a backslash goes on past blank and comment lines to the next other line, and a file
 * that ends in such a line drops that last key.
 * </ul>
 */
final class ConfigFileEntries {
    /** One key of a file and its value as the file writes it (a continued line joined, the key's escapes read). */
    record Entry(String key, String value) {
    }

    /**
     * The largest file read, 4 MiB: a configuration is a few lines, and a larger file (a log or a dump
     * saved into config/ by mistake) would be held whole in memory, by FileInstall's reader as by this one.
     */
    static final long MAX_BYTES = 4L << 20;

    /** The names FileInstall's configuration installer takes: a {@code .cfg} or a {@code .config} file. */
    static final List<String> EXTENSIONS = List.of(".cfg", ".config");

    private ConfigFileEntries() {
    }

    /** @return whether {@code name} ends as the name of a configuration file ({@link #EXTENSIONS}) */
    static boolean isConfigName(String name) {
        return EXTENSIONS.stream().anyMatch(name::endsWith);
    }

    /**
     * @return what is wrong with the size of {@code file} ({@code "is 256.0 MiB (268435456 bytes), more than
     *         ..."}), or null when it is {@link #MAX_BYTES} or less
     */
    static String tooLarge(Path file) throws IOException {
        long size = Files.size(file);
        return size <= MAX_BYTES ? null : String.format(Locale.ROOT, "is %.1f MiB (%d bytes), more than the %d MiB"
                + " a configuration file may be", size / (double) (1 << 20), size, MAX_BYTES >> 20);
    }

    /**
     * @return what {@code file} is when it is no regular file ({@code "is not a regular file (a pipe, a
     *         socket or a device)"}), or null when it is one: a pipe blocks whoever opens it to read until a
     *         writer comes, for ever if none does, and a device may never end
     */
    static String notRegular(Path file) {
        return Files.isRegularFile(file) ? null : "is not a regular file (a pipe, a socket or a device)";
    }

    /**
     * @return the keys of {@code file} with their values, in the order of the file, a key given twice twice
     * @throws IOException when it cannot be read, is no regular file ({@link #notRegular}), or is larger
     *                     than {@link #MAX_BYTES}; neither of the last two is opened
     */
    static List<Entry> read(Path file) throws IOException {
        String notRegular = notRegular(file);
        if (notRegular != null) {
            throw new IOException(file + " " + notRegular);
        }
        String tooLarge = tooLarge(file);
        if (tooLarge != null) {
            throw new IOException(file + " " + tooLarge);
        }
        if (isXml(file)) {
            return xml(file);
        }
        try (BufferedReader in = Files.newBufferedReader(file, StandardCharsets.ISO_8859_1)) {
            return lines(in);
        }
    }

    /**
     * A value in the typed format: an optional type letter, then a quoted string, an array or a
     * collection ({@code "x"}, {@code I"3"}, {@code ["a", "b"]}). FileInstall reads a file in that format
     * when every value of it is one, as text otherwise.
     */
    private static final Pattern TYPED_VALUE = Pattern.compile("\\s*[TILFDXSCBilfdxscb]?(\\[.*\\]|\\{.*\\}|\".*\")\\s*",
            Pattern.DOTALL);

    /** @return whether {@code value}, as a file writes it, is in the typed format ({@link #TYPED_VALUE}) */
    static boolean isTyped(String value) {
        return TYPED_VALUE.matcher(value).matches();
    }

    /** @return whether FileInstall reads {@code file} as XML properties: its first byte is {@code <} */
    static boolean isXml(Path file) throws IOException {
        try (InputStream in = Files.newInputStream(file)) {
            byte[] first = in.readNBytes(1);
            return first.length == 1 && first[0] == '<';
        }
    }

    private static List<Entry> lines(BufferedReader in) throws IOException {
        List<Entry> entries = new ArrayList<>();
        String line;
        while ((line = nextLine(in)) != null) {
            StringBuilder logical = new StringBuilder(line);
            while (endsInEscape(logical)) {
                logical.setLength(logical.length() - 1);
                String next = nextLine(in);
                if (next == null) {
                    return entries; // a last line going on to nothing: FileInstall drops its key
                }
                logical.append(next);
            }
            entries.add(entry(logical.toString()));
        }
        return entries;
    }

    /** @return the next line that is neither blank nor a comment, without its leading white space, or null at the end */
    private static String nextLine(BufferedReader in) throws IOException {
        String line;
        while ((line = in.readLine()) != null) {
            String stripped = stripLeading(line);
            if (!stripped.isEmpty() && stripped.charAt(0) != '#' && stripped.charAt(0) != '!') {
                return stripped;
            }
        }
        return null;
    }

    /** @return whether {@code line} ends in an odd number of backslashes: its last one escapes the line's end */
    private static boolean endsInEscape(CharSequence line) {
        int n = 0;
        for (int i = line.length() - 1; i >= 0 && line.charAt(i) == '\\'; i--) {
            n++;
        }
        return n % 2 == 1;
    }

    /** @param line a logical line: the key ends at the first unescaped {@code =}, {@code :} or white space */
    private static Entry entry(String line) {
        StringBuilder key = new StringBuilder();
        int i = 0;
        while (i < line.length() && !isSeparator(line.charAt(i)) && !isWhite(line.charAt(i))) {
            char c = line.charAt(i++);
            if (c != '\\' || i == line.length()) {
                key.append(c);
                continue;
            }
            char e = line.charAt(i++);
            switch (e) {
                case 't' -> key.append('\t');
                case 'n' -> key.append('\n');
                case 'r' -> key.append('\r');
                case 'f' -> key.append('\f');
                case 'u' -> {
                    if (i + 4 > line.length()) {
                        throw new IllegalArgumentException("malformed \\uxxxx escape in key " + key);
                    }
                    key.append((char) Integer.parseInt(line.substring(i, i + 4), 16));
                    i += 4;
                }
                default -> key.append(e);
            }
        }
        while (i < line.length() && isWhite(line.charAt(i))) {
            i++;
        }
        if (i < line.length() && isSeparator(line.charAt(i))) {
            i++;
        }
        return new Entry(key.toString(), stripLeading(line.substring(i)));
    }

    private static boolean isSeparator(char c) {
        return c == '=' || c == ':';
    }

    private static boolean isWhite(char c) {
        return c == ' ' || c == '\t' || c == '\f';
    }

    private static String stripLeading(String s) {
        int i = 0;
        while (i < s.length() && isWhite(s.charAt(i))) {
            i++;
        }
        return s.substring(i);
    }

    /** @return the entries of a file of Java's XML properties, as {@code Properties.loadFromXML} reads them */
    private static List<Entry> xml(Path file) throws IOException {
        SAXParser parser = SaxParsers.withoutExternalEntities(false);
        List<Entry> entries = new ArrayList<>();
        try (InputStream in = Files.newInputStream(file)) {
            parser.parse(in, new DefaultHandler() {
                private String key;
                private final StringBuilder value = new StringBuilder();

                @Override
                public void startElement(String uri, String localName, String qName, Attributes attributes) {
                    if (qName.equals("entry")) {
                        key = attributes.getValue("key");
                        value.setLength(0);
                    }
                }

                @Override
                public void characters(char[] ch, int start, int length) {
                    if (key != null) {
                        value.append(ch, start, length);
                    }
                }

                @Override
                public void endElement(String uri, String localName, String qName) {
                    if (qName.equals("entry") && key != null) {
                        entries.add(new Entry(key, value.toString()));
                        key = null;
                    }
                }
            });
        } catch (SAXException notXml) {
            throw new IOException(file + " is no XML properties file: " + notXml.getMessage(), notXml);
        }
        return entries;
    }
}
