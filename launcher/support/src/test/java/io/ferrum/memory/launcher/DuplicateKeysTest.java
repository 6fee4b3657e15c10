package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.io.InputStreamReader;
import java.lang.reflect.Proxy;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;

import org.apache.felix.fileinstall.shaded.util.properties.Properties;
import org.apache.felix.fileinstall.shaded.util.properties.TypedProperties;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.osgi.framework.ServiceReference;
import org.osgi.service.cm.Configuration;
import org.osgi.service.cm.ConfigurationAdmin;
import org.osgi.service.cm.ConfigurationEvent;
import org.osgi.service.log.Logger;

/** What FileInstall 3.7.4 keeps of a file is read with its own parser, as its ConfigInstaller reads a {@code .cfg} file. */
class DuplicateKeysTest {
    @TempDir
    Path dir;

    @Test
    void aKeyGivenTwiceIsNamedWithBothValuesAndTheOneFileInstallKeeps() throws Exception {
        Path file = Files.writeString(dir.resolve("io.ferrum.memory.cpu.device-t1.cfg"),
                "index=1\ncapacity=64m\n# later, by another hand\ncapacity = 1g\n", StandardCharsets.ISO_8859_1);
        assertEquals("1g", asFileInstallReads(file).get("capacity"), "FileInstall keeps the last, without a word");
        assertEquals(file + " gives capacity twice ('64m', then '1g'; '1g' applies): FileInstall keeps the last value of a"
                + " key and drops the others without a word; give each key once",
                DuplicateKeys.warning(file.toString(), DuplicateKeys.repeated(file)));
    }

    @Test
    void everyRepeatedKeyIsNamedInOneWarning() throws Exception {
        Path file = Files.writeString(dir.resolve("io.ferrum.memory.monitor.cfg"),
                "strategy=best-fit\nmaxAttempts: 3\nstrategy=most-free\nmaxAttempts 5\nstrategy=round-\\\n  robin\n",
                StandardCharsets.ISO_8859_1);
        assertEquals(Map.of("strategy", List.of("best-fit", "most-free", "round-robin"), "maxAttempts", List.of("3", "5")),
                DuplicateKeys.repeated(file));
        assertEquals("round-robin", asFileInstallReads(file).get("strategy"));
        assertEquals(file + " gives strategy 3 times ('best-fit', 'most-free', then 'round-robin'; 'round-robin' applies),"
                + " maxAttempts twice ('3', then '5'; '5' applies): FileInstall keeps the last value of a key and drops the"
                + " others without a word; give each key once", DuplicateKeys.warning(file.toString(), DuplicateKeys.repeated(file)));
    }

    @Test
    void aFileThatGivesEachKeyOnceIsNotNamed() throws Exception {
        Path file = Files.writeString(dir.resolve("io.ferrum.memory.cpu.cfg"),
                "# capacity=1g\ncapacity=64m\n! capacity=2g\ninitialSize=4m\n", StandardCharsets.ISO_8859_1);
        assertNull(DuplicateKeys.warning(file.toString(), DuplicateKeys.repeated(file)));
    }

    /**
     * A file that gives one key many times, or many keys twice (a generated file, a log saved into
     * config/ by mistake), was named in one warning holding every value of every key: a 1.7 MB file
     * made a log line of 2 MB. The warning names a few keys and a few values of each, and counts the rest.
     */
    @Test
    void aFileThatRepeatsKeysWithoutEndIsNamedInOneBoundedLine() throws Exception {
        StringBuilder text = new StringBuilder();
        for (int i = 0; i < 100_000; i++) {
            text.append("a=").append(i).append('\n');
        }
        for (int i = 0; i < 1000; i++) {
            text.append('k').append(i).append("=1\nk").append(i).append("=2\n");
        }
        Path file = Files.writeString(dir.resolve("org.example.generated.cfg"), text, StandardCharsets.ISO_8859_1);
        String warning = DuplicateKeys.warning(file.toString(), DuplicateKeys.repeated(file));
        assertEquals(file + " gives a 100000 times ('0', '1', 99997 more, then '99999'; '99999' applies), k0 twice ('1', then"
                + " '2'; '2' applies), k1 twice ('1', then '2'; '2' applies), and 998 more keys more than once: FileInstall keeps"
                + " the last value of a key and drops the others without a word; give each key once", warning);
    }

    /**
     * FileInstall reads a file whose first byte is {@code <} as Java's XML properties, a {@code .cfg}
     * as a {@code .config}: read as lines, every {@code <entry} was a key given again, and a key
     * given twice in two entries was not named.
     */
    @Test
    void anXmlFileIsReadAsFileInstallReadsIt() throws Exception {
        String head = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                + "<!DOCTYPE properties SYSTEM \"http://java.sun.com/dtd/properties.dtd\">\n<properties>\n";
        Path once = Files.writeString(dir.resolve("io.ferrum.memory.cpu.config"), head
                + "<entry key=\"capacity\">64m</entry>\n<entry key=\"initialSize\">4m</entry>\n</properties>\n");
        assertEquals(List.of("capacity", "initialSize"), asFileInstallReadsXml(once));
        assertNull(DuplicateKeys.warning(once.toString(), DuplicateKeys.repeated(once)));
        Path twice = Files.writeString(dir.resolve("io.ferrum.memory.cpu.device-t1.cfg"), head
                + "<entry key=\"capacity\">64m</entry>\n<entry key=\"index\">1</entry>\n"
                + "<entry key=\"capacity\">1g</entry>\n</properties>\n");
        assertEquals(List.of("capacity", "index", "capacity"), asFileInstallReadsXml(twice));
        assertEquals(Map.of("capacity", List.of("64m", "1g")), DuplicateKeys.repeated(twice));
    }

    /**
     * FileInstall's reader goes on from a line ending in a backslash past blank and comment lines
     * (java.util.Properties stops at a blank line and takes a comment line as the value's rest), and
     * drops a last line that goes on to nothing; a typed value ({@code I"3"}) is a value like any other.
     */
    @Test
    void continuedLinesAndTypedValuesAreReadAsFileInstallReadsThem() throws Exception {
        Path once = Files.writeString(dir.resolve("io.ferrum.memory.cpu.cfg"),
                "capacity=64m \\\n\n# capacity=2g\ncapacity=1g\n", StandardCharsets.ISO_8859_1);
        assertEquals(List.of("capacity"), asFileInstallReadsInOrder(once), "one key, '64m capacity=1g'");
        assertNull(DuplicateKeys.warning(once.toString(), DuplicateKeys.repeated(once)));
        Path twice = Files.writeString(dir.resolve("io.ferrum.memory.cpu.device-t1.config"),
                "cap\\\n\n  acity=I\"64\"\n! capacity=I\"3\"\ncapacity = I\"128\"\nindex=I\"1\"\nstray=\\\n",
                StandardCharsets.ISO_8859_1);
        assertEquals(List.of("capacity", "capacity", "index"), asFileInstallReadsInOrder(twice));
        assertEquals(Map.of("capacity", List.of("I\"64\"", "I\"128\"")), DuplicateKeys.repeated(twice));
        assertEquals(128, asFileInstallReads(twice).get("capacity"), "FileInstall keeps the last, typed");
    }

    /** @return the keys of a properties file as FileInstall's own reader finds them, in order, repeats included */
    private static List<String> asFileInstallReadsInOrder(Path file) throws Exception {
        List<String> keys = new java.util.ArrayList<>();
        try (Properties.PropertiesReader r = new Properties.PropertiesReader(
                new InputStreamReader(Files.newInputStream(file), StandardCharsets.ISO_8859_1), true)) {
            while (r.nextProperty()) {
                keys.add(r.getPropertyName());
            }
        }
        return keys;
    }

    /** @return the keys of an XML properties file as {@code loadFromXML} (FileInstall's reader of one) puts them, in order */
    private static List<String> asFileInstallReadsXml(Path file) throws Exception {
        List<String> keys = new java.util.ArrayList<>();
        java.util.Properties p = new java.util.Properties() {
            @Override
            public synchronized Object put(Object key, Object value) {
                keys.add((String) key);
                return super.put(key, value);
            }
        };
        try (java.io.InputStream in = Files.newInputStream(file)) {
            p.loadFromXML(in);
        }
        return keys;
    }

    private static Map<String, Object> asFileInstallReads(Path file) throws Exception {
        TypedProperties p = new TypedProperties();
        try (Reader r = new InputStreamReader(Files.newInputStream(file), StandardCharsets.ISO_8859_1)) {
            p.load(r);
        }
        return p;
    }

    /**
     * A configuration deleted between Config Admin's listing and the check (its file removed as the
     * check starts) answers getProperties with IllegalStateException, as Felix's Config Admin does for
     * a deleted one. That threw out of the constructor: SCR did not activate the check, and no file
     * given afterwards was looked at. The deleted one is skipped; the others are still checked.
     */
    @Test
    void aConfigurationDeletedWhileListedIsSkippedAndTheOthersAreChecked() throws Exception {
        Path file = Files.writeString(dir.resolve("io.ferrum.memory.cpu.cfg"), "capacity=64m\ncapacity=1g\n",
                StandardCharsets.ISO_8859_1);
        Configuration deleted = proxy(Configuration.class, (p, m, a) -> {
            throw new IllegalStateException("Configuration io.ferrum.memory.cuda deleted");
        });
        java.util.Hashtable<String, Object> props = new java.util.Hashtable<>();
        props.put(ConfigFiles.FILENAME, file.toUri().toString());
        Configuration present = proxy(Configuration.class, (p, m, a) -> switch (m.getName()) {
            case "getProperties" -> props;
            case "getPid" -> "io.ferrum.memory.cpu";
            default -> null;
        });
        ConfigurationAdmin admin = proxy(ConfigurationAdmin.class, (p, m, a) -> m.getName().equals("listConfigurations")
                ? new Configuration[] {deleted, present} : null);
        List<String> warnings = new java.util.concurrent.CopyOnWriteArrayList<>();
        Logger log = proxy(Logger.class, (p, m, a) -> {
            if (m.getName().equals("warn") && a.length == 1) {
                warnings.add((String) a[0]);
            }
            return null;
        });
        DuplicateKeys check = new DuplicateKeys(admin, log);
        assertEquals(List.of(DuplicateKeys.warning(file.toString(), DuplicateKeys.repeated(file))), warnings);
        check.configurationEvent(new ConfigurationEvent(proxy(ServiceReference.class, (p, m, a) -> null),
                ConfigurationEvent.CM_UPDATED, null, "io.ferrum.memory.cuda"));
    }

    /**
     * A file's name is the user's, and may hold an ESC sequence or a line break: the warning named the
     * file raw, so the name recoloured the terminal or forged a log line. It is shown escaped.
     */
    @Test
    void aFileNameWithControlCharactersIsNamedEscaped() throws Exception {
        Path file = Files.writeString(dir.resolve("org.example\u001b[2J\nplugin.cfg"), "size=3\nsize=4\n",
                StandardCharsets.ISO_8859_1);
        java.util.Hashtable<String, Object> props = new java.util.Hashtable<>();
        props.put(ConfigFiles.FILENAME, file.toUri().toString());
        Configuration present = proxy(Configuration.class, (p, m, a) -> switch (m.getName()) {
            case "getProperties" -> props;
            case "getPid" -> "org.example\u001b[2J\nplugin";
            default -> null;
        });
        ConfigurationAdmin admin = proxy(ConfigurationAdmin.class, (p, m, a) -> m.getName().equals("listConfigurations")
                ? new Configuration[] {present} : null);
        List<String> warnings = new java.util.concurrent.CopyOnWriteArrayList<>();
        Logger log = proxy(Logger.class, (p, m, a) -> {
            if (m.getName().equals("warn") && a.length == 1) {
                warnings.add((String) a[0]);
            }
            return null;
        });
        new DuplicateKeys(admin, log);
        assertEquals(1, warnings.size(), warnings.toString());
        assertEquals(dir + "/org.example\\u001b[2J\\u000aplugin.cfg gives size twice ('3', then '4'; '4' applies): FileInstall"
                + " keeps the last value of a key and drops the others without a word; give each key once", warnings.get(0));
    }

    @SuppressWarnings("unchecked")
    private static <T> T proxy(Class<T> type, java.lang.reflect.InvocationHandler h) {
        return (T) Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, h);
    }
}
