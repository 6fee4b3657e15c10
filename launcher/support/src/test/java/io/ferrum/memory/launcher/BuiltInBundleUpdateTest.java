package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.Hashtable;
import java.util.List;
import java.util.Map;
import java.util.jar.Attributes;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;

import org.apache.felix.service.command.CommandSession;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;

/**
 * The distribution's {@code update}: what it reads is checked before the bundle is touched, and a refusal is one error
 * line (an exception the console shows so) naming the bad value, the bundle left as it was.
 */
class BuiltInBundleUpdateTest {
    /** What the bundle was asked: "update(stream)", "update()", "stop", "start". */
    private final List<String> calls = new ArrayList<>();

    private Bundle bundle(String location) {
        return bundle(27L, location);
    }

    private Bundle bundle(long id, String location) {
        return (Bundle) Proxy.newProxyInstance(getClass().getClassLoader(), new Class<?>[] {Bundle.class}, (p, m, a) -> {
            switch (m.getName()) {
                case "getLocation":
                    return location;
                case "getHeaders":
                    return new Hashtable<String, String>();
                case "getBundleId":
                    return id;
                case "getSymbolicName":
                    return "org.example.plugin";
                case "getState":
                    return Bundle.ACTIVE;
                case "update", "stop", "start":
                    calls.add(m.getName() + (a != null && a.length == 1 && a[0] instanceof InputStream ? "(stream)" : "()"));
                    return null;
                default:
                    return null;
            }
        });
    }

    /** A framework with {@code installed} only: ids and symbolic names as {@code BundleConverter} finds them. */
    private static BundleContext context(Bundle... installed) {
        return (BundleContext) Proxy.newProxyInstance(BuiltInBundleUpdateTest.class.getClassLoader(),
                new Class<?>[] {BundleContext.class}, (p, m, a) -> switch (m.getName()) {
                    case "getBundles" -> installed;
                    case "getBundle" -> a != null && a.length == 1 && a[0] instanceof Long id
                            ? java.util.Arrays.stream(installed).filter(b -> b.getBundleId() == id).findFirst().orElse(null) : null;
                    default -> null;
                });
    }

    private static CommandSession session() {
        return (CommandSession) Proxy.newProxyInstance(BuiltInBundleUpdateTest.class.getClassLoader(),
                new Class<?>[] {CommandSession.class}, (p, m, a) -> null);
    }

    /**
     * An empty location (or blanks) was taken from the session's folder: the update read that folder, so Felix stopped
     * the bundle, failed ("zip END header not found", an ERROR line and the stack trace on standard error) and started
     * it again. Felix's own command answers "Unable to parse URL" and changes nothing.
     */
    @Test
    void anEmptyLocationIsNoURLAndTheBundleIsLeftAlone() {
        for (String location : List.of("", "   ")) {
            IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
                    () -> new BuiltInBundleUpdate(context()).update(session(), bundle("file:/plugins/a.jar"), location));
            assertEquals("Cannot update org.example.plugin [27] from '': an empty location names no jar; give a jar's path"
                    + " or a URL; the bundle is as it was", refused.getMessage(), "'" + location + "'");
        }
        assertEquals(List.of(), calls, "the bundle was not touched");
    }

    /**
     * {@code update 0} restarts the framework inside the process, which the distribution cannot do: the bnd launcher
     * deletes the framework's storage as the framework stops, the restarted framework lost bundles ("Error reloading
     * cached bundle, removing it", stack traces on standard error), and the process ended with exit code 0, the
     * statements after it never run. Felix's command does that too; here it is refused, and nothing is done.
     */
    @Test
    void anUpdateOfTheSystemBundleIsRefusedAndDoesNothing() {
        Bundle system = bundle(0L, "System Bundle");
        IllegalArgumentException bare = assertThrows(IllegalArgumentException.class, () -> new BuiltInBundleUpdate(context()).update(system));
        assertEquals("update 0 would restart the framework inside this process, which the distribution cannot do (the"
                + " restarted framework loses bundles); nothing was done: to restart, stop 0 (or exit) and start the"
                + " distribution again", bare.getMessage());
        IllegalArgumentException from = assertThrows(IllegalArgumentException.class,
                () -> new BuiltInBundleUpdate(context()).update(session(), system, "file:/tmp/felix.jar"));
        assertEquals(bare.getMessage(), from.getMessage());
        assertEquals(List.of(), calls, "the framework was not touched");
    }

    /**
     * A bare update of a bundle whose jar is gone (installed from a file since deleted) was Felix's: it stopped the
     * bundle, failed to read the file (an ERROR line, the stack trace on standard error), started the bundle again and
     * answered the exception: told three times, while the bundle had been restarted. It now answers as an update from
     * that location does, in one error line, and leaves the bundle alone.
     */
    @Test
    void aBareUpdateFromAFileThatIsGoneTouchesNoBundleAndSaysWhy(@TempDir Path dir) {
        String gone = dir.resolve("gone.jar").toUri().toString();
        IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
                () -> new BuiltInBundleUpdate(context()).update(bundle(gone)));
        assertEquals("Cannot update org.example.plugin [27] from its location " + dir.resolve("gone.jar")
                + ": there is no such file; the bundle is as it was", refused.getMessage());
        assertEquals(List.of(), calls, "the bundle was not touched");
    }

    /**
     * An update from a file that is no bundle jar (empty, text, a jar whose manifest has no Bundle-SymbolicName): Felix
     * stopped the bundle, failed inside the framework (an ERROR line and a stack trace) and started it again, or, for
     * the jar without a symbolic name, updated the bundle into one without a name, on which the Log Service then failed
     * at every event. Each is refused now, naming the file and why, and the bundle is not touched.
     */
    @Test
    void anUpdateFromAFileThatIsNoBundleJarIsRefusedNamingItAndWhy(@TempDir Path dir) throws Exception {
        Path empty = Files.createFile(dir.resolve("empty.jar"));
        Path text = Files.writeString(dir.resolve("text.jar"), "hello");
        Path plain = dir.resolve("plain.jar");
        Manifest m = new Manifest();
        m.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
        new JarOutputStream(Files.newOutputStream(plain), m).close();
        Map<Path, String> why = Map.of(empty, "it is empty (0 bytes)",
                text, "it is no readable jar (ZipException: zip END header not found)",
                plain, "it is no OSGi bundle: its manifest has no Bundle-SymbolicName");
        for (Map.Entry<Path, String> e : why.entrySet()) {
            IllegalArgumentException refused = assertThrows(IllegalArgumentException.class,
                    () -> new BuiltInBundleUpdate(context()).update(session(), bundle("file:/plugins/a.jar"), e.getKey().toString()));
            assertEquals("Cannot update org.example.plugin [27] from " + e.getKey() + ": " + e.getValue()
                    + "; the bundle is as it was", refused.getMessage());
        }
        assertEquals(List.of(), calls, "the bundle was not touched");
    }

    /** {@code update 99} of no bundle: Gogo said "update cannot take '99'", as if the id were a wrong kind of argument. */
    @Test
    void aBundleNotInstalledIsNamedAsSuch() {
        BuiltInBundleUpdate update = new BuiltInBundleUpdate(context(bundle("file:/plugins/a.jar")));
        assertEquals("No bundle has the id 99 (lb lists the installed bundles); nothing was updated",
                assertThrows(IllegalArgumentException.class, () -> update.update(99L)).getMessage());
        assertEquals("No bundle is named 'org.example.none' (lb -s lists the installed bundles' names); nothing was updated",
                assertThrows(IllegalArgumentException.class, () -> update.update(session(), "org.example.none", "x.jar")).getMessage());
        assertEquals(List.of(), calls, "no bundle was touched");
    }
}
