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

    @Test
    void atItsBeginningStartLevelTheFrameworkHasStarted() {
        assertTrue(ClaimingInstaller.restartedInARunningFramework(context(Bundle.ACTIVE, 100, "100")));
        assertTrue(ClaimingInstaller.restartedInARunningFramework(context(Bundle.ACTIVE, 1, null)), "beginning 1 by default");
        assertTrue(ClaimingInstaller.restartedInARunningFramework(context(Bundle.ACTIVE, 1, "x")), "a level that is no number");
    }
}
