package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Test;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.BundleEvent;
import org.osgi.framework.BundleListener;
import org.osgi.framework.startlevel.BundleStartLevel;

/**
 * {@link KeptStartLevels} against the events Felix fires for an update, with the bnd launcher's listener (which sets
 * every updated bundle to 11) called first, as Felix calls the system bundle context's listeners in the order added.
 */
class KeptStartLevelsTest {

    @Test
    void anUpdateKeepsTheLevelTheBundleHadAndOnlyTheSystemContextIsListenedOn() {
        AtomicInteger level = new AtomicInteger(20);
        List<Integer> set = new ArrayList<>();
        Bundle plugin = bundle(27, level, set);
        List<BundleListener> listeners = new ArrayList<>();
        BundleContext system = context(null, listeners);
        BundleContext own = context(system, new ArrayList<>());
        BundleListener launcher = e -> {
            if (e.getType() == BundleEvent.UPDATED) {
                level.set(11); // the bnd launcher's StartLevelRuntimeHandler
            }
        };
        listeners.add(launcher);
        KeptStartLevels kept = KeptStartLevels.register(own);
        assertEquals(List.of(launcher, kept), listeners, "added after the launcher's, to the system bundle's context");

        fire(listeners, BundleEvent.UNRESOLVED, plugin);
        fire(listeners, BundleEvent.UPDATED, plugin);
        assertEquals(List.of(20), set, "set back to the level it had before the update");

        level.set(30); // bundlelevel -s 30: no event
        fire(listeners, BundleEvent.UNRESOLVED, plugin);
        fire(listeners, BundleEvent.UPDATED, plugin);
        assertEquals(List.of(20, 30), set, "the level a user set");

        fire(listeners, BundleEvent.UNRESOLVED, plugin); // a refresh: no update follows, nothing is set
        assertEquals(List.of(20, 30), set);

        kept.close();
        assertEquals(List.of(launcher), listeners, "removed with this bundle's stop");
        assertSame(launcher, listeners.get(0));
    }

    private static void fire(List<BundleListener> listeners, int type, Bundle bundle) {
        for (BundleListener l : List.copyOf(listeners)) {
            l.bundleChanged(new BundleEvent(type, bundle));
        }
    }

    private static Bundle bundle(long id, AtomicInteger level, List<Integer> set) {
        BundleStartLevel startLevel = (BundleStartLevel) Proxy.newProxyInstance(BundleStartLevel.class.getClassLoader(),
                new Class<?>[] {BundleStartLevel.class}, (proxy, method, args) -> switch (method.getName()) {
                    case "getStartLevel" -> level.get();
                    case "setStartLevel" -> {
                        level.set((Integer) args[0]);
                        set.add((Integer) args[0]);
                        yield null;
                    }
                    default -> null;
                });
        return (Bundle) Proxy.newProxyInstance(Bundle.class.getClassLoader(), new Class<?>[] {Bundle.class},
                (proxy, method, args) -> switch (method.getName()) {
                    case "getBundleId" -> id;
                    case "adapt" -> args[0] == BundleStartLevel.class ? startLevel : null;
                    default -> null;
                });
    }

    /** A bundle context whose bundle 0's context is {@code system} (itself when null), listeners kept in order. */
    private static BundleContext context(BundleContext system, List<BundleListener> listeners) {
        BundleContext[] self = new BundleContext[1];
        Bundle systemBundle = (Bundle) Proxy.newProxyInstance(Bundle.class.getClassLoader(), new Class<?>[] {Bundle.class},
                (proxy, method, args) -> method.getName().equals("getBundleContext") ? (system == null ? self[0] : system)
                        : method.getName().equals("getBundleId") ? 0L : null);
        self[0] = (BundleContext) Proxy.newProxyInstance(BundleContext.class.getClassLoader(),
                new Class<?>[] {BundleContext.class}, (proxy, method, args) -> switch (method.getName()) {
                    case "getBundle" -> systemBundle;
                    case "addBundleListener" -> listeners.add((BundleListener) args[0]);
                    case "removeBundleListener" -> listeners.remove(args[0]);
                    default -> null;
                });
        return self[0];
    }
}
