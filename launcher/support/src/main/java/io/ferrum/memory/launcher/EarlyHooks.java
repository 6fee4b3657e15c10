package io.ferrum.memory.launcher;

import org.apache.felix.fileinstall.ArtifactInstaller;
import org.osgi.framework.BundleActivator;
import org.osgi.framework.BundleContext;
import org.osgi.framework.ServiceRegistration;
import org.osgi.framework.hooks.bundle.FindHook;

/**
 * Registers the hooks that must be in place before FileInstall's first scan of {@code plugins/} and
 * {@code config/}: this bundle starts at start level 5, FileInstall at 10, and SCR (after FileInstall
 * at that level) too late for a DS component to be there first. The listener that keeps a bundle's start level
 * across an update ({@link KeptStartLevels}) is there before FileInstall's first update too, and the JVM's shutdown stops
 * the framework in order from the start ({@link StopOnShutdown}).
 */
public final class EarlyHooks implements BundleActivator {
    private ServiceRegistration<FindHook> guard;
    private ConfigFileGate configFileGate;
    private ServiceRegistration<ArtifactInstaller> configFileGateRegistration;
    private SpecialFilesInPlugins specialFiles;
    private ServiceRegistration<ArtifactInstaller> specialFilesRegistration;
    private KeptStartLevels keptStartLevels;
    private StopOnShutdown stopOnShutdown;

    @Override
    public void start(BundleContext context) {
        guard = context.registerService(FindHook.class, new BuiltInBundlesGuard(context), null);
        configFileGate = new ConfigFileGate(context);
        configFileGateRegistration = configFileGate.register();
        specialFiles = new SpecialFilesInPlugins(context);
        specialFilesRegistration = specialFiles.register();
        stopOnShutdown = StopOnShutdown.register(context);
        // Last: it is added to the system bundle's context, which a failed start would not clean up.
        keptStartLevels = KeptStartLevels.register(context);
    }

    @Override
    public void stop(BundleContext context) {
        if (stopOnShutdown != null) {
            stopOnShutdown.close();
        }
        keptStartLevels.close();
        specialFilesRegistration.unregister();
        specialFiles.close();
        configFileGateRegistration.unregister();
        configFileGate.close();
        guard.unregister();
    }
}
