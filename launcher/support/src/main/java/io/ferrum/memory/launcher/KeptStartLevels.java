package io.ferrum.memory.launcher;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.BundleEvent;
import org.osgi.framework.Constants;
import org.osgi.framework.SynchronousBundleListener;
import org.osgi.framework.startlevel.BundleStartLevel;

/**
 * Keeps a bundle's start level across an update. The bnd launcher sets a bundle's start level at each {@code
 * INSTALLED} and {@code UPDATED} event for as long as the framework runs (its {@code StartLevelRuntimeHandler}, there
 * to give the bundles of {@code -runbundles} their levels): to the level {@code -runbundles} gives that symbolic name
 * and version, else to its default, 11. So any update ({@code update ID}, a bare {@code update}, FileInstall's of a
 * changed jar in {@code plugins/}, {@code Bundle.update()} itself) moved a plugin from FileInstall's 20, or a level a
 * user had set, to 11, and a built-in bundle updated to another build from 10 to 11.
 *
 * <p>Felix fires {@code UNRESOLVED} then {@code UPDATED}, on the updating thread, before it starts the bundle again:
 * the level at {@code UNRESOLVED} is the one before the update (the bnd launcher does not react to it), and at {@code
 * UPDATED} it is set back. This listener must run after the bnd launcher's at {@code UPDATED}: it is added to the
 * system bundle's context, as the launcher's is, and Felix calls one context's synchronous listeners in the order they
 * were added (the launcher's before the framework started, this one at start level 5).
 */
final class KeptStartLevels implements SynchronousBundleListener {
    /** A bundle's start level at its last {@code UNRESOLVED}, by bundle id. */
    private final Map<Long, Integer> before = new ConcurrentHashMap<>();
    private final BundleContext system;

    private KeptStartLevels(BundleContext system) {
        this.system = system;
    }

    /** @return the listener, added to the system bundle's context of {@code context}'s framework */
    static KeptStartLevels register(BundleContext context) {
        KeptStartLevels kept = new KeptStartLevels(context.getBundle(Constants.SYSTEM_BUNDLE_ID).getBundleContext());
        kept.system.addBundleListener(kept);
        return kept;
    }

    /** Removes this listener: the system bundle's context outlives this bundle. */
    void close() {
        try {
            system.removeBundleListener(this);
        } catch (IllegalStateException stopped) {
            // the framework has stopped: its listeners went with it
        }
    }

    @Override
    public void bundleChanged(BundleEvent event) {
        Bundle bundle = event.getBundle();
        if (bundle.getBundleId() == Constants.SYSTEM_BUNDLE_ID) {
            return;
        }
        switch (event.getType()) {
            case BundleEvent.UNRESOLVED -> {
                BundleStartLevel level = bundle.adapt(BundleStartLevel.class);
                if (level != null) {
                    before.put(bundle.getBundleId(), level.getStartLevel());
                }
            }
            case BundleEvent.UPDATED -> {
                Integer was = before.remove(bundle.getBundleId());
                BundleStartLevel level = bundle.adapt(BundleStartLevel.class);
                if (was != null && level != null && level.getStartLevel() != was) {
                    level.setStartLevel(was);
                }
            }
            case BundleEvent.UNINSTALLED -> before.remove(bundle.getBundleId());
            default -> {
                // no change of level comes with other events
            }
        }
    }
}
