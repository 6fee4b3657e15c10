package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;

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
        return (Bundle) Proxy.newProxyInstance(getClass().getClassLoader(), new Class<?>[] {Bundle.class}, (p, m, a) -> {
            switch (m.getName()) {
                case "getLocation":
                    return location;
                case "getHeaders":
                    return new Hashtable<String, String>();
                case "getBundleId":
                    return 27L;
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
}
