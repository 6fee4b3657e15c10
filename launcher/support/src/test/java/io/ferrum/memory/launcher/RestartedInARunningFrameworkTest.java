package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Proxy;

import org.junit.jupiter.api.Test;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;
import org.osgi.framework.startlevel.FrameworkStartLevel;

/**
 * When the installers claim again what a restart of this bundle left unclaimed: only in a framework that has
 * started. Felix marks the system bundle ACTIVE before it raises the start level, so ACTIVE alone also held
 * while the framework itself started, and a folder of a killed run's {@code tmp/} was brought to FileInstall's
 * notice (its file's time moved) at every start.
 */
class RestartedInARunningFrameworkTest {

    /** A context whose system bundle is in {@code state} at framework start level {@code level}. */
    private static BundleContext context(int state, int level, String beginning) {
        FrameworkStartLevel startLevel = (FrameworkStartLevel) Proxy.newProxyInstance(loader(),
                new Class<?>[] {FrameworkStartLevel.class}, (p, m, a) -> m.getName().equals("getStartLevel") ? level : null);
        Bundle system = (Bundle) Proxy.newProxyInstance(loader(), new Class<?>[] {Bundle.class}, (p, m, a) -> switch (m.getName()) {
            case "getState" -> state;
            case "adapt" -> a[0] == FrameworkStartLevel.class ? startLevel : null;
            default -> null;
        });
        return (BundleContext) Proxy.newProxyInstance(loader(), new Class<?>[] {BundleContext.class}, (p, m, a) -> switch (m.getName()) {
            case "getBundle" -> a != null && a.length == 1 && (Long) a[0] == Constants.SYSTEM_BUNDLE_ID ? system : null;
            case "getProperty" -> Constants.FRAMEWORK_BEGINNING_STARTLEVEL.equals(a[0]) ? beginning : null;
            default -> null;
        });
    }

    private static ClassLoader loader() {
        return RestartedInARunningFrameworkTest.class.getClassLoader();
    }

    @Test
    void whileTheFrameworkRaisesItsStartLevelItHasNotStartedThoughItsSystemBundleIsActive() {
        assertFalse(ClaimingInstaller.restartedInARunningFramework(context(Bundle.ACTIVE, 20, "100")),
                "Felix's system bundle is ACTIVE at start level 20 of 100 while it starts");
        assertFalse(ClaimingInstaller.restartedInARunningFramework(context(Bundle.STARTING, 1, "100")));
    }

    /**
     * The bnd launcher raises the start level itself once the framework has started: it hands the framework 1 for
     * {@code org.osgi.framework.startlevel.beginning} and keeps the bndrun's 100 only in the JVM's system properties,
     * which it set before. Taken from the framework, the launch had "started" at level 1: every installer claimed its
     * entries again at each launch (a user's file in {@code plugins/} touched), and the console ran its first statement
     * at level 10, before the plugins had started ("Command not found").
     */
    @Test
    void underTheBndLauncherTheBeginningStartLevelIsTheOneItKeptInTheJvm() {
        String key = Constants.FRAMEWORK_BEGINNING_STARTLEVEL;
        String was = System.setProperty(key, "100");
        try {
            assertFalse(ClaimingInstaller.restartedInARunningFramework(context(Bundle.ACTIVE, 10, "1")),
                    "level 10 of the bnd launcher's raise to 100");
            assertTrue(ClaimingInstaller.restartedInARunningFramework(context(Bundle.ACTIVE, 100, "1")));
            System.setProperty(key, "x");
            assertTrue(ClaimingInstaller.restartedInARunningFramework(context(Bundle.ACTIVE, 1, "1")), "no level in the JVM");
        } finally {
            if (was == null) {
                System.clearProperty(key);
            } else {
                System.setProperty(key, was);
            }
        }
    }

    @Test
    void atItsBeginningStartLevelTheFrameworkHasStarted() {
        assertTrue(ClaimingInstaller.restartedInARunningFramework(context(Bundle.ACTIVE, 100, "100")));
        assertTrue(ClaimingInstaller.restartedInARunningFramework(context(Bundle.ACTIVE, 1, null)), "beginning 1 by default");
        assertTrue(ClaimingInstaller.restartedInARunningFramework(context(Bundle.ACTIVE, 1, "x")), "a level that is no number");
    }
}
