package io.ferrum.memory.shell;

import java.util.List;
import java.util.stream.Stream;

import org.apache.felix.service.command.CommandSession;
import org.apache.felix.service.command.Job;
import org.osgi.annotation.bundle.Header;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleActivator;
import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;
import org.osgi.framework.FrameworkUtil;
import org.osgi.framework.ServiceReference;
import org.osgi.service.cm.Configuration;
import org.osgi.service.cm.ConfigurationAdmin;
import org.osgi.service.log.Logger;
import org.osgi.service.log.LoggerFactory;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.AllocationStrategy;
import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.api.MemoryRouter;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.api.StreamManager;

/**
 * Has the shell's class loader load, when the bundle starts and before any command is offered, every
 * class a command could need. A command runs on Gogo's thread and goes on after the shell is
 * uninstalled; no bundle imports from the shell, so both frameworks discard its wiring at the
 * uninstall, and its loader defines no class of it after that (a command then ended with {@code
 * NoClassDefFoundError: io/ferrum/memory/shell/Reply$Text} instead of its line). What it imports it
 * still gets, except on Equinox while the exporter (the api, Gogo) is being uninstalled: there a
 * loader's first ask for a class is refused, though the exporter defined it long before, so the
 * imported classes the shell names are loaded here too. The commands are delayed components, made
 * on their first use, too late for this. The shell imports only the API (and Gogo, and Config Admin
 * optionally): the pool's {@code BundleClasses} is not at hand, and an import of the pool's package
 * would tie the shell to the pool (every refresh of the pool would restart it). {@code ShellIT} fails
 * on a class left out.
 */
@Header(name = Constants.BUNDLE_ACTIVATOR, value = "${@class}")
public final class ShellActivator implements BundleActivator {
    /** Every class of the shell, and every class of its mandatory imports that a class of it names. */
    static final List<Class<?>> LOADED_EARLY = List.of(
            AllocationCommands.class, Arguments.class, BackendCommands.class, BlockAccess.class, BytesCommands.class,
            DeviceCommands.class, FileCommands.class, FilePaths.class, FileTransfer.class, FileTransfer.Interrupted.class,
            MaintenanceCommands.class,
            MemCommand.class, Reply.class, Reply.Body.class, Reply.Failure.class, Reply.Text.class, Services.class,
            ShellLog.class, ShellWording.class, ShellWording.Rule.class, Sizes.class, StrategyCommands.class, Syntax.class,
            Syntax.Option.class, Syntax.Words.class, Table.class, TransferProgress.class,
            AdvancedMemoryManager.class, AllocationRequirements.class, AllocationStrategy.class,
            DefragmentationStats.class, Device.class, DeviceMemoryManager.class, DeviceUnavailableException.class,
            GlobalMemoryMonitor.class, InvalidMemoryRequestException.class, MemoryAccess.class, MemoryHandle.class,
            MemoryHandleInfo.class, MemoryInfo.class, MemoryPoolConfig.class, MemoryPoolConfig.Builder.class,
            MemoryPressure.class, MemoryRouter.class, MemoryTransfer.class, MemoryType.class, StreamHandle.class,
            StreamManager.class,
            CommandSession.class, Job.class, Job.Utils.class,
            Bundle.class, BundleContext.class, FrameworkUtil.class, ServiceReference.class);

    /**
     * The classes the shell names of its optional imports that are wired: Config Admin's (only
     * mem:strategy needs them) and the Log Service's (only an internal error's entry needs it).
     */
    static final List<Class<?>> LOADED_EARLY_IF_WIRED = Stream.concat(configAdmin().stream(), logService().stream()).toList();

    private static List<Class<?>> configAdmin() {
        try {
            return List.of(ConfigurationAdmin.class, Configuration.class);
        } catch (NoClassDefFoundError unwired) {
            return List.of(); // no Config Admin when the shell resolved: nothing of it to load
        }
    }

    private static List<Class<?>> logService() {
        try {
            return List.of(LoggerFactory.class, Logger.class);
        } catch (NoClassDefFoundError unwired) {
            return List.of(); // no Log Service when the shell resolved: nothing of it to load
        }
    }

    /** Nothing more to do: the framework made this object, so the lists above are loaded. */
    @Override
    public void start(BundleContext context) {
    }

    @Override
    public void stop(BundleContext context) {
    }
}
