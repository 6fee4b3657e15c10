package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.apache.felix.fileinstall.shaded.util.properties.TypedProperties;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class SavedStrategyTest {
    @TempDir
    Path dir;

    @Test
    void aTypedConfigFileGetsAQuotedStrategyAndKeepsItsOtherLines() throws Exception {
        Path file = dir.resolve("io.ferrum.memory.monitor.config");
        Files.write(file, List.of("maxAttempts=I\"2\"", "strategy=\"round-robin\""));
        SavedStrategy.save(file, "most-free");
        assertEquals(List.of("maxAttempts=I\"2\"", "strategy=\"most-free\""), Files.readAllLines(file));
    }

    /**
     * FileInstall 3.7.4 reads a {@code .cfg} and a {@code .config} file alike, in the typed format
     * only when every value of the file is typed. A {@code .config} of plain values ({@code
     * maxAttempts=3}, copied from a {@code .cfg}) got {@code strategy="most-free"}, which FileInstall
     * read with its quotes: the router fell back to its default, and the name read back was quoted
     * again at every poll, the file growing without end. A {@code .cfg} of typed values ({@code
     * maxAttempts=I"3"}) got {@code strategy=most-free}, which made the whole file untyped: maxAttempts
     * became the text {@code I"3"}, which the monitor refuses. The strategy is now written in the
     * format the file's other values are in.
     */
    @Test
    void theStrategyIsWrittenInTheFormatOfTheFilesOtherValues() throws Exception {
        Path plain = dir.resolve("io.ferrum.memory.monitor.config");
        Files.write(plain, List.of("maxAttempts=3"));
        SavedStrategy.save(plain, "most-free");
        assertEquals("most-free", asFileInstallReads(plain), "as FileInstall reads " + Files.readAllLines(plain));
        byte[] saved = Files.readAllBytes(plain);
        SavedStrategy.save(plain, asFileInstallReads(plain));
        assertEquals(new String(saved, StandardCharsets.ISO_8859_1), Files.readString(plain, StandardCharsets.ISO_8859_1),
                "saving what FileInstall read back changes the file again");

        Path typed = dir.resolve("other").resolve("io.ferrum.memory.monitor.cfg");
        Files.createDirectories(typed.getParent());
        Files.write(typed, List.of("maxAttempts=I\"3\"", "samplePeriodMs=L\"0\""));
        SavedStrategy.save(typed, "most-free");
        assertEquals("most-free", asFileInstallReads(typed), "as FileInstall reads " + Files.readAllLines(typed));
        TypedProperties p = new TypedProperties();
        try (java.io.InputStream in = Files.newInputStream(typed)) {
            p.load(in);
        }
        assertEquals(3, p.get("maxAttempts"), "the other values stay typed");
    }

    @Test
    void aQuotedNameEscapesWhatTheTypedFormatReads() {
        assertEquals("\"a\\\"b\\\\c\\u00e9\"", SavedStrategy.quoted("a\"b\\cé"));
    }

    /**
     * FileInstall reads a {@code .cfg} file as ISO-8859-1 with the escapes of a properties file; a name
     * written raw in UTF-8 came back as another name ({@code é} as {@code Ã©}), which was saved again,
     * read back longer, and so on: the file doubled at every poll (64 MiB within seconds).
     */
    @Test
    void aNameOutsideAsciiOrWithABackslashReadsBackAsItselfAndIsSavedOnce() throws Exception {
        Path file = dir.resolve("io.ferrum.memory.monitor.cfg");
        Files.write(file, List.of("# chosen by mem:strategy", "maxAttempts=3"));
        for (String value : List.of("r\u00e9sum\u00e9-fit", "a\\b", " leading-space", "\u4e2d-fit")) {
            SavedStrategy.save(file, value);
            assertEquals(value, asFileInstallReads(file), "the strategy FileInstall reads back from " + Files.readAllLines(file));
            byte[] saved = Files.readAllBytes(file);
            SavedStrategy.save(file, asFileInstallReads(file));
            assertEquals(new String(saved, StandardCharsets.ISO_8859_1), Files.readString(file, StandardCharsets.ISO_8859_1),
                    "saving what FileInstall read back changes the file again");
        }
        assertEquals("# chosen by mem:strategy", Files.readAllLines(file).get(0));
    }

    /** A name already in the file, written by a person in UTF-8, is not written again (FileInstall reads it as ISO-8859-1). */
    @Test
    void aLineThatFileInstallReadsAsTheNameIsKept() throws Exception {
        Path file = dir.resolve("io.ferrum.memory.monitor.cfg");
        byte[] mine = "strategy=r\u00e9sum\u00e9\nmaxAttempts=\u00e9\n".getBytes(StandardCharsets.UTF_8);
        Files.write(file, mine);
        SavedStrategy.save(file, asFileInstallReads(file));
        assertEquals(new String(mine, StandardCharsets.ISO_8859_1), Files.readString(file, StandardCharsets.ISO_8859_1));
    }

    /**
     * A file that gives the strategy twice: FileInstall applies the last line. A choice that an
     * earlier line names was taken for one the file holds already and not written, so FileInstall
     * went on reading the last line's strategy and the choice was lost at the next start.
     */
    @Test
    void aChoiceThatOnlyAnEarlierOfTwoStrategyLinesNamesIsWritten() throws Exception {
        Path file = dir.resolve("io.ferrum.memory.monitor.cfg");
        Files.write(file, List.of("strategy=best-fit", "maxAttempts=3", "strategy=most-free"));
        assertEquals("most-free", asFileInstallReads(file));
        SavedStrategy.save(file, "best-fit");                // mem:strategy best-fit
        assertEquals("best-fit", asFileInstallReads(file), "the strategy FileInstall reads: " + Files.readAllLines(file));
        assertEquals(List.of("strategy=best-fit", "maxAttempts=3"), Files.readAllLines(file));

        Files.write(file, List.of("strategy=best-fit", "strategy=most-free"));
        byte[] before = Files.readAllBytes(file);
        SavedStrategy.save(file, "most-free");               // the last line says so already
        assertEquals(new String(before, StandardCharsets.ISO_8859_1), Files.readString(file, StandardCharsets.ISO_8859_1));
    }

    /** @return the strategy as FileInstall 3.7.4 reads a {@code .cfg} file (ConfigInstaller: TypedProperties) */
    private static String asFileInstallReads(Path file) throws Exception {
        TypedProperties p = new TypedProperties();
        try (java.io.InputStream in = Files.newInputStream(file)) {
            p.load(in);
        }
        return (String) p.get("strategy");
    }

    /**
     * Two edits of the monitor's file in quick succession: FileInstall applied the first, and the
     * second was saved before Config Admin's event of the first came. The event found the file saying
     * another strategy than Config Admin and wrote the first edit's back over the second. An edit
     * since the file last agreed with Config Admin is FileInstall's to apply; a file unchanged since
     * then is older than Config Admin (mem:strategy chose), and the choice is written.
     */
    @Test
    void aSecondEditMadeBeforeTheEventOfTheFirstIsKept() throws Exception {
        Path file = dir.resolve("io.ferrum.memory.monitor.cfg");
        SavedStrategy saved = new SavedStrategy(null, file);
        Files.write(file, List.of("strategy=best-fit"));
        saved.saveCurrent(file, "best-fit");                 // FileInstall applied the file: they agree

        Files.write(file, List.of("strategy=most-free"));    // the first edit, which FileInstall applies
        Files.write(file, List.of("strategy=round-robin"));  // the second, before the first's event
        saved.saveCurrent(file, "most-free");                // the first edit's event
        assertEquals(List.of("strategy=round-robin"), Files.readAllLines(file), "the second edit was overwritten");

        saved.saveCurrent(file, "round-robin");              // FileInstall applied the second
        saved.saveCurrent(file, "preferred-order");          // mem:strategy preferred-order
        assertEquals(List.of("strategy=preferred-order"), Files.readAllLines(file));

        Path none = dir.resolve("other").resolve("io.ferrum.memory.monitor.cfg");
        saved.saveCurrent(none, "most-free");                // no file yet: the choice makes one
        assertEquals(List.of("strategy=most-free"), Files.readAllLines(none));
    }

    /**
     * A monitor file that gives no strategy ({@code maxAttempts=3} only): FileInstall applied it, and
     * Config Admin held no strategy either, but that agreement was not recorded, so mem:strategy's
     * choice found the file "edited since" and never wrote it: the next start ran the default strategy.
     * Driven as the distribution does: Config Admin's configuration of the file, then its update.
     */
    @Test
    void aChoiceIsWrittenIntoAFileThatGaveNoStrategy() throws Exception {
        Path file = dir.resolve("io.ferrum.memory.monitor.cfg");
        Files.write(file, List.of("maxAttempts=3"));
        java.util.Hashtable<String, Object> props = new java.util.Hashtable<>();
        props.put("maxAttempts", "3");
        props.put(SavedStrategy.FILENAME, file.toUri().toString());
        org.osgi.service.cm.Configuration monitor = proxy(org.osgi.service.cm.Configuration.class,
                (p, m, a) -> m.getName().equals("getProperties") ? props : null);
        org.osgi.service.cm.ConfigurationAdmin admin = proxy(org.osgi.service.cm.ConfigurationAdmin.class,
                (p, m, a) -> m.getName().equals("listConfigurations") ? new org.osgi.service.cm.Configuration[] {monitor} : null);
        SavedStrategy saved = new SavedStrategy(admin, dir.resolve("unused.cfg"));
        org.osgi.service.cm.ConfigurationEvent updated = new org.osgi.service.cm.ConfigurationEvent(
                proxy(org.osgi.framework.ServiceReference.class, (p, m, a) -> null),
                org.osgi.service.cm.ConfigurationEvent.CM_UPDATED, null, SavedStrategy.MONITOR_PID);
        saved.configurationEvent(updated);                    // FileInstall applied the file: no strategy in either

        props.put("strategy", "most-free");                   // mem:strategy most-free
        saved.configurationEvent(updated);
        assertEquals(List.of("maxAttempts=3", "strategy=most-free"), Files.readAllLines(file));
    }

    /**
     * A monitor file of XML properties (FileInstall reads a file whose first byte is {@code <} so) that
     * gives no strategy: a choice was added to it as a {@code strategy=} line after its end, which made
     * it no XML at all, and FileInstall's next read failed. An XML file is not written into.
     */
    @Test
    void aChoiceIsNotWrittenIntoAnXmlFile() throws Exception {
        Path file = dir.resolve("io.ferrum.memory.monitor.cfg");
        List<String> xml = List.of("<?xml version=\"1.0\" encoding=\"UTF-8\"?>", "<properties>",
                "<entry key=\"maxAttempts\">3</entry>", "</properties>");
        Files.write(file, xml);
        java.util.Hashtable<String, Object> props = new java.util.Hashtable<>();
        props.put("maxAttempts", "3");
        props.put(SavedStrategy.FILENAME, file.toUri().toString());
        org.osgi.service.cm.Configuration monitor = proxy(org.osgi.service.cm.Configuration.class,
                (p, m, a) -> m.getName().equals("getProperties") ? props : null);
        org.osgi.service.cm.ConfigurationAdmin admin = proxy(org.osgi.service.cm.ConfigurationAdmin.class,
                (p, m, a) -> m.getName().equals("listConfigurations") ? new org.osgi.service.cm.Configuration[] {monitor} : null);
        SavedStrategy saved = new SavedStrategy(admin, dir.resolve("unused.cfg"));
        org.osgi.service.cm.ConfigurationEvent updated = new org.osgi.service.cm.ConfigurationEvent(
                proxy(org.osgi.framework.ServiceReference.class, (p, m, a) -> null),
                org.osgi.service.cm.ConfigurationEvent.CM_UPDATED, null, SavedStrategy.MONITOR_PID);
        saved.configurationEvent(updated);
        props.put("strategy", "most-free");
        saved.configurationEvent(updated);
        assertEquals(xml, Files.readAllLines(file));
    }

    @SuppressWarnings("unchecked")
    private static <T> T proxy(Class<T> type, java.lang.reflect.InvocationHandler h) {
        return (T) java.lang.reflect.Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, h);
    }

    /**
     * The monitor's file was read whole (its bytes, to tell an edit from the last save) before the
     * choice was written, whatever its size: one that grew past what a configuration file may be (a
     * log saved there by mistake; the gate refuses it, but Config Admin still holds what it applied
     * before) was read into memory at each choice, and one above 2 GiB threw OutOfMemoryError, which
     * the listener's catch of exceptions let out into Config Admin's event thread. It is now left
     * unread and unchanged, and the refusal names its size, as the gate's line does.
     */
    @Test
    void aFileAboveTheConfigurationLimitIsNeitherReadNorWritten() throws Exception {
        Path file = dir.resolve("io.ferrum.memory.monitor.cfg");
        long size = 3L << 30; // sparse: nothing is written but its first line
        try (RandomAccessFile f = new RandomAccessFile(file.toFile(), "rw")) {
            f.write("strategy=best-fit\n".getBytes(StandardCharsets.ISO_8859_1));
            f.setLength(size);
        }
        SavedStrategy saved = new SavedStrategy(null, file);
        IOException e = assertThrows(IOException.class, () -> saved.saveCurrent(file, "most-free"));
        assertEquals(file + " is 3072.0 MiB (3221225472 bytes), more than the 4 MiB a configuration file may be", e.getMessage());
        assertEquals(size, Files.size(file), "the file is as it was");
        try (RandomAccessFile f = new RandomAccessFile(file.toFile(), "r")) {
            byte[] head = new byte[18];
            f.readFully(head);
            assertEquals("strategy=best-fit\n", new String(head, StandardCharsets.ISO_8859_1));
        }
    }
}
