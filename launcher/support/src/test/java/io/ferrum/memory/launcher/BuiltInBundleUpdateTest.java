package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.InputStream;
import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.Hashtable;
import java.util.List;

import org.apache.felix.service.command.CommandSession;
import org.junit.jupiter.api.Test;
import org.osgi.framework.Bundle;

/** The distribution's {@code update} answers as Felix's own command does, but for a bare update of a built-in bundle. */
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
            assertEquals("Unable to parse URL", new BuiltInBundleUpdate().update(session(), bundle("file:/plugins/a.jar"), location),
                    "'" + location + "'");
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
        IllegalArgumentException bare = assertThrows(IllegalArgumentException.class, () -> new BuiltInBundleUpdate().update(system));
        assertEquals("update 0 would restart the framework inside this process, which the distribution cannot do (the"
                + " restarted framework loses bundles); nothing was done: to restart, stop 0 (or exit) and start the"
                + " distribution again", bare.getMessage());
        IllegalArgumentException from = assertThrows(IllegalArgumentException.class,
                () -> new BuiltInBundleUpdate().update(session(), system, "file:/tmp/felix.jar"));
        assertEquals(bare.getMessage(), from.getMessage());
        assertEquals(List.of(), calls, "the framework was not touched");
    }

    /**
     * A bare update of a bundle whose jar is gone (installed from a file since deleted) was Felix's: it stopped the
     * bundle, failed to read the file (an ERROR line, the stack trace on standard error), started the bundle again and
     * answered the exception: told three times, while the bundle had been restarted. It now answers as an update from
     * that location does ("Unable to open input stream: ...") and leaves the bundle alone.
     */
    @Test
    void aBareUpdateFromAFileThatIsGoneTouchesNoBundleAndSaysWhy(@org.junit.jupiter.api.io.TempDir java.nio.file.Path dir) {
        String gone = dir.resolve("gone.jar").toUri().toString();
        assertEquals("Unable to open input stream: java.io.FileNotFoundException: " + dir.resolve("gone.jar")
                + " (No such file or directory)", new BuiltInBundleUpdate().update(bundle(gone)));
        assertEquals(List.of(), calls, "the bundle was not touched");
    }
}
