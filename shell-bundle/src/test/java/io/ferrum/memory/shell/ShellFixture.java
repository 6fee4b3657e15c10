package io.ferrum.memory.shell;

import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Hashtable;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.function.Consumer;
import java.util.stream.Stream;

import org.apache.felix.framework.FrameworkFactory;
import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;
import org.osgi.framework.launch.Framework;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.api.MemoryRouter;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * Real parts for the command tests: two pool managers ({@code cpu:0}, {@code cpu:1}) over
 * off-heap memory, a small {@link Directory} that plays the monitor and the router over them (the
 * monitor bundle is not a dependency of the shell), and, on demand, a real Felix framework whose
 * registry holds the managers as services.
 */
final class ShellFixture implements AutoCloseable {
    static final Device CPU0 = Device.cpu(0);
    static final Device CPU1 = Device.cpu(1);
    static final long MiB = 1L << 20;

    final PooledMemoryManager cpu0 = manager(CPU0);
    final PooledMemoryManager cpu1 = manager(CPU1);
    final Directory directory = new Directory(Map.of(CPU0, cpu0, CPU1, cpu1));
    private Framework framework;
    private Path storage;

    private static PooledMemoryManager manager(Device d) {
        return PooledMemoryManager.create(new ArenaUpstream(d, 64 * MiB, true), MemoryManagerConfig.defaults(),
                PoolSettings.defaults(), null);
    }

    /** @return the context of a started framework in which both managers are services, as a backend registers them */
    BundleContext framework() throws Exception {
        if (framework == null) {
            storage = Files.createTempDirectory("shell-test-framework");
            framework = new FrameworkFactory().newFramework(Map.of(Constants.FRAMEWORK_STORAGE, storage.toString(),
                    Constants.FRAMEWORK_STORAGE_CLEAN, Constants.FRAMEWORK_STORAGE_CLEAN_ONFIRSTINIT));
            framework.start();
            for (PooledMemoryManager m : List.of(cpu0, cpu1)) {
                framework.getBundleContext().registerService(new String[] {DeviceMemoryManager.class.getName(),
                    AdvancedMemoryManager.class.getName()}, m, managerProperties(m));
            }
        }
        return framework.getBundleContext();
    }

    static Hashtable<String, Object> managerProperties(DeviceMemoryManager m) {
        Hashtable<String, Object> p = new Hashtable<>();
        p.put(DeviceMemoryManager.DEVICE_PROPERTY, m.device().toString());
        p.put(DeviceMemoryManager.BACKEND_PROPERTY, "test-arena");
        return p;
    }

    @Override
    public void close() throws Exception {
        if (framework != null) {
            framework.stop();
            framework.waitForStop(10_000);
            try (Stream<Path> files = Files.walk(storage)) {
                for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
                    Files.delete(p);
                }
            }
        }
        cpu0.close();
        cpu1.close();
    }

    /**
     * The monitor's and the router's view of a fixed set of managers: allocation goes to the first
     * device with room, every handle to the manager that owns it. Just enough for the commands;
     * the real router is the monitor bundle's and has its own tests.
     */
    static final class Directory implements GlobalMemoryMonitor, MemoryRouter {
        private final Map<Device, DeviceMemoryManager> managers;
        /** The handles live on a device when it went away ({@link #remove}), and that device. */
        private final Map<MemoryHandle, Device> departed = new HashMap<>();

        Directory(Map<Device, ? extends DeviceMemoryManager> managers) {
            this.managers = new LinkedHashMap<>(new TreeMap<>(managers));
        }

        /**
         * Forgets a device as the monitor does when its backend stops: its handles are no longer
         * routed, and the router's calls on them say that the device went away, in the real
         * router's words.
         */
        void remove(Device device) {
            managers.remove(device).handles().forEach(i -> departed.put(i.handle(), device));
        }

        private DeviceMemoryManager ownerOf(MemoryHandle h) {
            return managers.values().stream().filter(m -> m.owns(h)).findFirst().orElseThrow(() -> {
                Device gone = departed.get(h);
                if (gone != null) {
                    return new DeviceUnavailableException(gone, "Handle " + h + " belongs to " + gone + ", which went"
                            + " away (its backend stopped or its configuration was deleted); its memory was released");
                }
                return new InvalidHandleException(h, "Handle " + h
                        + " is not known to any device: it was freed, or it was never allocated");
            });
        }

        @Override
        public Map<Device, MemoryInfo> globalMemoryInfo() {
            Map<Device, MemoryInfo> out = new LinkedHashMap<>();
            managers.forEach((d, m) -> out.put(d, m.memoryInfo()));
            return out;
        }

        @Override
        public MemoryPressure globalMemoryPressure() {
            return globalMemoryInfo().values().stream().map(MemoryInfo::pressureLevel).max(Comparator.naturalOrder())
                    .orElse(MemoryPressure.LOW);
        }

        @Override
        public Set<Device> devices() {
            return managers.keySet();
        }

        @Override
        public Optional<DeviceMemoryManager> manager(Device device) {
            return Optional.ofNullable(managers.get(device));
        }

        @Override
        public void registerManager(Device device, DeviceMemoryManager manager) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void unregisterManager(Device device) {
            throw new UnsupportedOperationException();
        }

        @Override
        public void setGlobalPressureCallback(Consumer<Map<Device, MemoryPressure>> callback) {
            throw new UnsupportedOperationException();
        }

        @Override
        public CompletionStage<Map<Device, DefragmentationStats>> globalGc() {
            // As the monitor does (and the API says): a device that fails is left out; the others go on.
            Map<Device, DefragmentationStats> out = new LinkedHashMap<>();
            managers.forEach((d, m) -> {
                try {
                    out.put(d, m.defragment(d).toCompletableFuture().join());
                } catch (RuntimeException failed) {
                    // left out
                }
            });
            return CompletableFuture.completedFuture(out);
        }

        @Override
        public MemoryHandle allocate(long size, AllocationRequirements requirements) {
            Device d = managers.keySet().iterator().next();
            DeviceMemoryManager m = managers.get(d);
            return requirements.alignment().isPresent()
                    ? m.allocateAligned(size, requirements.alignment().getAsLong(), requirements.memoryType(), d)
                    : m.allocate(size, requirements.memoryType(), d);
        }

        @Override
        public void deallocate(MemoryHandle handle) {
            ownerOf(handle).deallocate(handle);
        }

        @Override
        public void write(MemoryHandle dst, long dstOffset, MemorySegment src) {
            ownerOf(dst).write(dst, dstOffset, src);
        }

        @Override
        public void read(MemoryHandle src, long srcOffset, MemorySegment dst) {
            ownerOf(src).read(src, srcOffset, dst);
        }

        @Override
        public void copy(MemoryTransfer t) {
            DeviceMemoryManager src = ownerOf(t.src());
            DeviceMemoryManager dst = ownerOf(t.dst());
            if (src == dst) {
                src.copy(t.src(), t.dst(), t.size(), t.srcOffset(), t.dstOffset());
                return;
            }
            AdvancedMemoryManager from = (AdvancedMemoryManager) src;
            AdvancedMemoryManager to = (AdvancedMemoryManager) dst;
            MemorySegment in = from.mapMemory(t.src(), MemoryAccess.READ_ONLY);
            try {
                MemorySegment out = to.mapMemory(t.dst(), MemoryAccess.WRITE_ONLY);
                try {
                    MemorySegment.copy(in, t.srcOffset(), out, t.dstOffset(), t.size());
                } finally {
                    to.unmapMemory(t.dst());
                }
            } finally {
                from.unmapMemory(t.src());
            }
        }

        @Override
        public CompletionStage<Void> copyAsync(MemoryTransfer transfer, StreamHandle stream) {
            throw new UnsupportedOperationException();
        }

        @Override
        public Optional<MemoryHandleInfo> handleInfo(MemoryHandle handle) {
            return managers.values().stream().map(m -> m.handleInfo(handle)).flatMap(Optional::stream).findFirst();
        }

        @Override
        public Optional<Device> owner(MemoryHandle handle) {
            return managers.entrySet().stream().filter(e -> e.getValue().owns(handle)).map(Map.Entry::getKey).findFirst();
        }

        @Override
        public Optional<String> activeStrategy() {
            return Optional.of("first-device");
        }
    }

    /**
     * @return the directory as a monitor that loses {@code device} just after it answers {@code
     *         globalMemoryInfo()}, as when the device's backend stops (or its configuration is deleted)
     *         between a command's listing of the devices and its look at one of them
     */
    GlobalMemoryMonitor losingAfterListing(Device device) {
        return (GlobalMemoryMonitor) java.lang.reflect.Proxy.newProxyInstance(GlobalMemoryMonitor.class.getClassLoader(),
                new Class<?>[] {GlobalMemoryMonitor.class}, (proxy, m, args) -> {
                    Object answer;
                    try {
                        answer = m.invoke(directory, args);
                    } catch (java.lang.reflect.InvocationTargetException e) {
                        throw e.getCause();
                    }
                    if (m.getName().equals("globalMemoryInfo") && directory.devices().contains(device)) {
                        directory.remove(device);
                    }
                    return answer;
                });
    }

    /**
     * @return the directory as a monitor that closes {@code device}'s manager just after it answers
     *         {@code manager(device)}, as when the device's backend stops between a command's lookup
     *         of the manager and its use
     */
    GlobalMemoryMonitor closingAfterLookup(Device device) {
        return (GlobalMemoryMonitor) java.lang.reflect.Proxy.newProxyInstance(GlobalMemoryMonitor.class.getClassLoader(),
                new Class<?>[] {GlobalMemoryMonitor.class}, (proxy, m, args) -> {
                    Object answer;
                    try {
                        answer = m.invoke(directory, args);
                    } catch (java.lang.reflect.InvocationTargetException e) {
                        throw e.getCause();
                    }
                    if (m.getName().equals("manager") && device.equals(args[0]) && answer instanceof Optional<?> o
                            && o.orElse(null) instanceof PooledMemoryManager pm) {
                        pm.close();
                    }
                    return answer;
                });
    }

    /** @return the lines of a reply */
    static List<String> lines(Reply r) {
        return new ArrayList<>(r.toString().lines().toList());
    }
}
