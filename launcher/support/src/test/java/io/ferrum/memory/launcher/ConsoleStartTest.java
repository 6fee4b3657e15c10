package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Hashtable;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;
import org.osgi.framework.startlevel.BundleStartLevel;
import org.osgi.framework.startlevel.FrameworkStartLevel;

/**
 * When the console runs its first statement. The old check, "the system bundle is ACTIVE and no bundle is
 * STARTING", let it run at start level 10 of 100 (the distribution's system bundle is ACTIVE from the start, seen
 * at the console's activation) and before FileInstall had started the bundles of {@code plugins/}; and it waited
 * for good while a lazy bundle was STARTING, waiting for its first class.
 */
class ConsoleStartTest {
    private static final Path PLUGINS = Path.of("plugins").toAbsolutePath().normalize();

    /** The start options each bundle was started with, in order, by location. */
    private final Map<String, List<Integer>> started = new java.util.HashMap<>();

    /** A bundle in {@code state}, from {@code location}, with {@code headers}, persistently started or not. */
    private Bundle bundle(int state, String location, Map<String, String> headers, boolean persistentlyStarted) {
        BundleStartLevel level = (BundleStartLevel) Proxy.newProxyInstance(loader(), new Class<?>[] {BundleStartLevel.class},
                (p, m, a) -> switch (m.getName()) {
                    case "isPersistentlyStarted" -> persistentlyStarted;
                    case "getStartLevel" -> 20;
                    default -> null;
                });
        return (Bundle) Proxy.newProxyInstance(loader(), new Class<?>[] {Bundle.class}, (p, m, a) -> switch (m.getName()) {
            case "getState" -> state;
            case "getLocation" -> location;
            case "getHeaders" -> new Hashtable<>(headers);
            case "adapt" -> a[0] == BundleStartLevel.class ? level : null;
            case "getBundleId" -> 1L;
            case "start" -> {
                started.computeIfAbsent(location, k -> new java.util.ArrayList<>()).add((Integer) a[0]);
                yield null;
            }
            default -> null;
        });
    }

    /** A context whose system bundle is in {@code state} at start level {@code level} of 100, with {@code bundles}. */
    private static BundleContext context(int state, int level, Bundle... bundles) {
        return context(state, level, Map.of(), bundles);
    }

    private static BundleContext context(int state, int level, Map<String, String> fileInstall, Bundle... bundles) {
        FrameworkStartLevel startLevel = (FrameworkStartLevel) Proxy.newProxyInstance(loader(),
                new Class<?>[] {FrameworkStartLevel.class}, (p, m, a) -> m.getName().equals("getStartLevel") ? level : null);
        Bundle system = (Bundle) Proxy.newProxyInstance(loader(), new Class<?>[] {Bundle.class}, (p, m, a) -> switch (m.getName()) {
            case "getState" -> state;
            case "adapt" -> a[0] == FrameworkStartLevel.class ? startLevel : null;
            default -> null;
        });
        Map<String, String> properties = new java.util.HashMap<>(fileInstall);
        properties.put(Constants.FRAMEWORK_BEGINNING_STARTLEVEL, "100");
        properties.put("felix.fileinstall.dir", PLUGINS.toString());
        return (BundleContext) Proxy.newProxyInstance(loader(), new Class<?>[] {BundleContext.class}, (p, m, a) -> switch (m.getName()) {
            case "getBundle" -> a != null && a.length == 1 && (Long) a[0] == Constants.SYSTEM_BUNDLE_ID ? system : null;
            case "getBundles" -> bundles;
            case "getProperty" -> properties.get(a[0]);
            default -> null;
        });
    }

    private static ClassLoader loader() {
        return ConsoleStartTest.class.getClassLoader();
    }

    private static String plugin(String name) {
        return PLUGINS.resolve(name).toUri().toString();
    }

    @Test
    void atLaunchTheFrameworkIsStartingBelowItsBeginningStartLevelThoughNoBundleIs() {
        Bundle active = bundle(Bundle.ACTIVE, "jar/io.ferrum.memory.cpu.jar", Map.of(), true);
        assertTrue(ConsoleStart.starting(context(Bundle.ACTIVE, 10, active), true),
                "the system bundle is ACTIVE at start level 10 of 100 while the bnd launcher raises it");
        assertFalse(ConsoleStart.starting(context(Bundle.ACTIVE, 100, active), true));
        assertFalse(ConsoleStart.starting(context(Bundle.ACTIVE, 10, active), false),
                "a console started again does not wait for a level a user may have lowered");
        assertTrue(ConsoleStart.starting(context(Bundle.STARTING, 100, active), false));
    }

    @Test
    void aBundleActivatingCountsOneWaitingLazilyForItsFirstClassDoesNot() {
        Bundle activating = bundle(Bundle.STARTING, plugin("a.jar"), Map.of(), true);
        Bundle lazy = bundle(Bundle.STARTING, plugin("lazy.jar"), Map.of(Constants.BUNDLE_ACTIVATIONPOLICY, "lazy"), true);
        for (boolean atLaunch : List.of(true, false)) {
            assertTrue(ConsoleStart.starting(context(Bundle.ACTIVE, 100, activating), atLaunch));
            assertFalse(ConsoleStart.starting(context(Bundle.ACTIVE, 100, lazy), atLaunch),
                    "a lazy bundle stays STARTING until a class of it is loaded");
        }
    }

    /**
     * FileInstall starts the bundles of {@code plugins/} at its first poll, on its own thread, and nothing tells when:
     * the console starts them itself first, as FileInstall would, and so finds them started or failed.
     */
    @Test
    void theBundlesFileInstallIsToStartAreStartedAsItWould() {
        Bundle[] bundles = {bundle(Bundle.INSTALLED, plugin("a.jar"), Map.of(), false),
                bundle(Bundle.RESOLVED, "jardir:" + PLUGINS.resolve("exploded"), Map.of(), false),
                bundle(Bundle.INSTALLED, plugin("broken.jar"), Map.of(), true),
                bundle(Bundle.RESOLVED, plugin("f.jar"), Map.of(Constants.FRAGMENT_HOST, "org.example.host"), false),
                bundle(Bundle.RESOLVED, "jar/io.ferrum.memory.cuda.jar", Map.of(), false),
                bundle(Bundle.ACTIVE, plugin("active.jar"), Map.of(), true),
                bundle(Bundle.STARTING, plugin("lazy.jar"), Map.of(Constants.BUNDLE_ACTIVATIONPOLICY, "lazy"), true)};
        ConsoleStart.startFileInstallsBundles(context(Bundle.ACTIVE, 10, bundles));
        assertEquals(Map.of(), started, "level 20 is not reached");

        ConsoleStart.startFileInstallsBundles(context(Bundle.ACTIVE, 100, bundles));
        List<Integer> transientThenMarked = List.of(Bundle.START_ACTIVATION_POLICY | Bundle.START_TRANSIENT,
                Bundle.START_ACTIVATION_POLICY);
        assertEquals(Map.of(plugin("a.jar"), transientThenMarked, "jardir:" + PLUGINS.resolve("exploded"), transientThenMarked,
                plugin("broken.jar"), transientThenMarked), started,
                "the bundles of plugins/ not started, fragments and built-in bundles left out");

        started.clear();
        ConsoleStart.startFileInstallsBundles(context(Bundle.ACTIVE, 100, Map.of("felix.fileinstall.bundles.startTransient",
                "true", "felix.fileinstall.bundles.startActivationPolicy", "false"), bundles[0]));
        assertEquals(Map.of(plugin("a.jar"), List.of(Bundle.START_TRANSIENT)), started);

        started.clear();
        ConsoleStart.startFileInstallsBundles(context(Bundle.ACTIVE, 100, Map.of("felix.fileinstall.bundles.new.start", "false"),
                bundles[0]));
        assertEquals(Map.of(), started, "FileInstall starts no bundle it installs");
    }

    /**
     * A plugin whose activator never returns stays STARTING, and the console waited for it for good: no prompt, no
     * statement. The start runs apart from the waiting thread now, and the wait ends at its bound with a line naming
     * the bundle.
     */
    @Test
    void aStartThatDoesNotReturnEndsTheWaitAtItsBoundAndIsNamed() throws Exception {
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        AtomicInteger state = new AtomicInteger(Bundle.INSTALLED);
        BundleStartLevel level = (BundleStartLevel) Proxy.newProxyInstance(loader(), new Class<?>[] {BundleStartLevel.class},
                (p, m, a) -> m.getName().equals("getStartLevel") ? 20 : null);
        Bundle blocking = (Bundle) Proxy.newProxyInstance(loader(), new Class<?>[] {Bundle.class}, (p, m, a) -> switch (m.getName()) {
            case "getState" -> state.get();
            case "getLocation" -> plugin("blocking.jar");
            case "getSymbolicName" -> "org.example.blocking";
            case "getBundleId" -> 7L;
            case "getHeaders" -> new Hashtable<>();
            case "adapt" -> a[0] == BundleStartLevel.class ? level : null;
            case "start" -> {
                state.set(Bundle.STARTING);
                entered.countDown();
                release.await(); // the activator that does not return
                state.set(Bundle.ACTIVE);
                yield null;
            }
            default -> null;
        });
        BundleContext context = context(Bundle.ACTIVE, 100, blocking);
        try {
            assertTrue(ConsoleStart.await(context, true, () -> false, 0).isPresent(),
                    "the wait ends at its bound while the start has not returned");
            entered.await(); // on a thread of its own
            assertEquals(Optional.of("ferrum: still starting after 0 s: org.example.blocking [7]; the console starts without"
                    + " waiting for it (-Dferrum.console.startWait=SECONDS waits longer)"), ConsoleStart.await(context, false,
                    () -> false, 0));
        } finally {
            release.countDown();
        }
        assertEquals(Optional.empty(), ConsoleStart.await(context(Bundle.ACTIVE, 100), true, () -> false,
                ConsoleStart.DEFAULT_WAIT_SECONDS), "nothing to wait for: no line");
    }

    @Test
    void theBoundIsWholeSecondsAndOneNotSoIsNamedOnceWithTheDefaultApplied() {
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        PrintStream e = new PrintStream(err, true, StandardCharsets.UTF_8);
        assertEquals(ConsoleStart.DEFAULT_WAIT_SECONDS, ConsoleStart.waitSeconds(context(Bundle.ACTIVE, 100), e));
        assertEquals(5, ConsoleStart.waitSeconds(context(Bundle.ACTIVE, 100, Map.of(ConsoleStart.WAIT_PROPERTY, " 5 ")), e));
        assertEquals("", err.toString(StandardCharsets.UTF_8));
        for (String bad : List.of("-1", "ten", "1.5")) {
            err.reset();
            assertEquals(ConsoleStart.DEFAULT_WAIT_SECONDS,
                    ConsoleStart.waitSeconds(context(Bundle.ACTIVE, 100, Map.of(ConsoleStart.WAIT_PROPERTY, bad)), e));
            assertEquals("error: ferrum.console.startWait=" + bad + " is no whole number of seconds (0 or more); the console"
                    + " waits 30 s for the bundles to start" + System.lineSeparator(), err.toString(StandardCharsets.UTF_8));
        }
    }
}
