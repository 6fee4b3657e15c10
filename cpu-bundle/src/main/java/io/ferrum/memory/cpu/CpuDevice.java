package io.ferrum.memory.cpu;

import java.util.Hashtable;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.OptionalLong;

import org.osgi.framework.BundleContext;
import org.osgi.framework.ServiceRegistration;
import org.osgi.service.log.Logger;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryException;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.ConfigurationCheck;
import io.ferrum.memory.pool.DeviceRegistration;
import io.ferrum.memory.pool.HostStreamManager;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.ProvidesDeviceServices;
import io.ferrum.memory.pool.PooledMemoryManager;
import io.ferrum.memory.pool.ZeroingPolicy;

/**
 * One running host device: an FFM upstream, its pooled manager and its stream manager, registered
 * as services through {@link DeviceRegistration} for as long as the component is active. Stopping
 * the component (bundle stop or update, deletion of a factory configuration) unregisters the
 * services first, then closes the manager, which gives every chunk back to the C library; the log
 * says how many live blocks (and bytes) went with it.
 *
 * <p><b>Configuration changes</b> arrive at {@link #reconfigure}. One that is not valid (see
 * {@link #refusal}) changes nothing. One that changes only pool attributes (initialSize, maxSize,
 * growthIncrement, autoExpansion, alignment, preAllocate, stats) applies to the running pools,
 * keeping every block (a maxSize below what is used is refused by the engine). Any other change
 * restarts the device, but only when it holds no live block: otherwise it is refused, since a
 * restart would drop them. The check and the manager's close are one step ({@link
 * PooledMemoryManager#closeIfUnused}), so no block allocated meanwhile is dropped. Every refusal
 * is one error line in the log, and stays visible in {@code mem:backends} (a {@link Rejection} service) until a configuration applies.
 */
@ProvidesDeviceServices
abstract class CpuDevice {
    /** The property FileInstall sets on a configuration it made from a file: the file's URI. */
    static final String FILEINSTALL_FILENAME = "felix.fileinstall.filename";

    private Device device;
    private FfmUpstream upstream;
    private HostStreamManager streams;
    private PooledMemoryManager manager;
    private DeviceRegistration registration;
    private BundleContext context;
    private Logger log;
    /** The configuration running now, or null when no device runs. */
    private CpuDeviceConfig running;
    private ServiceRegistration<?> rejection;
    /** The configuration's PID, for a refusal that names it; {@code ?} where none was given (tests). */
    private String pid = "?";
    /** The file the configuration came from (FileInstall), for a refusal that names it; null: none. */
    private String file;

    /**
     * @param properties the configuration's raw properties, whose {@code service.pid} names it and
     *                   whose {@code felix.fileinstall.filename}, when FileInstall made it, its file
     */
    final void pid(Map<String, ?> properties) {
        Object p = properties.get("service.pid");
        pid = p == null ? "?" : p.toString();
        file = fileOf(properties);
    }

    /**
     * @return the file a configuration came from, as a path ({@code felix.fileinstall.filename} is a
     *         {@code file:} URI), or null when it came from elsewhere (Config Admin, a test)
     */
    static String fileOf(Map<String, ?> properties) {
        Object name = properties.get(FILEINSTALL_FILENAME);
        if (name == null) {
            return null;
        }
        try {
            return java.nio.file.Path.of(java.net.URI.create(name.toString())).toString();
        } catch (RuntimeException notAFileUri) {
            return name.toString();
        }
    }

    /**
     * @return why {@code index} may not be this component's (another configuration runs that
     *         device), or null
     */
    final String claimRefusal(int index) {
        CpuDevice holder = CpuBackend.CLAIMS.get(Device.cpu(index));
        if (holder == null || holder == this) {
            return null;
        }
        return "Configuration " + pid + " refused: cpu:" + index + " is already configured by " + holder.pid
                + "; give this one another index, or remove one of the two";
    }

    /**
     * Starts {@code cpu:index}, or refuses when another configuration claimed that index since
     * {@link #claimRefusal} said it was free (the claim itself is atomic).
     */
    final void start(BundleContext bundleContext, CpuDeviceConfig cfg, int index, Logger logger) {
        this.context = bundleContext;
        this.log = logger;
        CpuDevice holder = CpuBackend.CLAIMS.putIfAbsent(Device.cpu(index), this);
        if (holder != null && holder != this) {
            reject(claimRefusal(index), "no device was created");
            return;
        }
        this.device = Device.cpu(index);
        try {
            this.upstream = new FfmUpstream(device, capacity(cfg), CpuBackend.HELD_BYTES);
            this.streams = new HostStreamManager(device);
            this.manager = newManager(upstream, cfg, logger, streams);
            CpuBackend.DEVICES.put(device, manager);
            registration = DeviceRegistration.of(manager).streams(streams)
                    .property("service.description", "Ferrum Memory host memory " + device + " (FFM)").register(bundleContext);
        } catch (RuntimeException | Error e) {
            // DS does not deactivate a component whose activation failed: give back the memory and the
            // claim of the index here, or no later configuration could run this device.
            stop();
            throw e;
        }
        running = cfg;
        if (log != null) {
            log.info("{} started: capacity {} bytes, pool {}", device, upstream.physicalCapacity(),
                    manager.poolConfig(MemoryType.GENERAL));
        }
    }

    final void stop() {
        if (device != null) {
            CpuBackend.DEVICES.remove(device, manager);
            CpuBackend.CLAIMS.remove(device, this);
        }
        if (registration != null) {
            registration.unregister();
            registration = null;
        }
        long live = 0;
        long bytes = 0;
        if (manager != null && !manager.isClosed()) {
            MemoryInfo info = manager.memoryInfo();
            live = info.activeAllocations();
            bytes = info.usedBytes();
            manager.close();
        }
        if (streams != null) {
            streams.close();
        }
        if (log != null && device != null && running != null) {
            log.info("{} stopped: {} ({}) {} released with it; its memory went back to the C library"
                    + " ({} still held by the cpu backend)", device, count(live, "live block"), count(bytes, "byte"),
                    live == 1 ? "was" : "were", count(CpuBackend.HELD_BYTES.get(), "byte"));
        }
        running = null;
    }

    /** Deactivation: the device goes, and so does any record of a refused configuration. */
    final void dispose() {
        stop();
        clearRejection();
    }

    /**
     * Applies a changed configuration (a DS modification): to the running pools, by a restart, or
     * not at all (see the class comment).
     *
     * @param cfg          the new configuration
     * @param properties   its raw properties (for what DS's conversion would hide: a list)
     * @param index        the device index it asks for
     * @param indexRefusal why the component refuses that index, or null when it accepts it
     */
    final void reconfigure(CpuDeviceConfig cfg, Map<String, ?> properties, int index, String indexRefusal) {
        reconfigure(cfg, properties, index, indexRefusal, false);
    }

    /**
     * @param removed the configuration was deleted (DS passes the defaults): a refusal for live
     *                blocks cannot say "save the file again", there is none
     */
    final void reconfigure(CpuDeviceConfig cfg, Map<String, ?> properties, int index, String indexRefusal, boolean removed) {
        String refusal = refusal(cfg, properties, index, indexRefusal);
        if (refusal == null) {
            refusal = claimRefusal(index);
        }
        if (refusal == null && running != null && device.index() == index && onlyPoolsDiffer(running, cfg)) {
            try {
                manager.configurePools(managerConfig(cfg));
                running = cfg;
                clearRejection();
                if (log != null) {
                    log.info("{}: pool configuration applied without a restart: {}", device, manager.poolConfig(MemoryType.GENERAL));
                }
                return;
            } catch (MemoryException e) {
                // A check refused it, or a pool's pre-allocation failed: every pool is back as it was.
                refusal = "Configuration of " + device + " refused: " + e.getMessage();
            }
        }
        // The check for live blocks and the close are one step: a block allocated after a separate
        // check was dropped by the restart behind its owner's back.
        if (refusal == null && manager != null && !manager.isClosed() && !manager.closeIfUnused()) {
            MemoryInfo info = manager.memoryInfo();
            // Its own figures count no name it holds for another device's block (an alias createMapping
            // issued), which also keeps it from closing: say so rather than "holds 0 live blocks".
            // A block of its own named only by a peer's alias (a mapping whose source handle was freed)
            // counts here but is the peer's to list: the user looks for it there.
            String elsewhere = manager.handles().size() < info.activeAllocations()
                    ? " (mem:handles lists a block named only by another device's handle, the target of a mapping,"
                            + " under that device: free it there)"
                    : "";
            String blocks = info.activeAllocations() > 0
                    ? "holds " + count(info.activeAllocations(), "live block") + " (" + count(info.usedBytes(), "byte")
                            + ") that a restart would drop" + elsewhere
                    : "names blocks of another device through mappings (createMapping), or held a block a moment ago;"
                            + " a restart would drop those names";
            if (removed) {
                refusal = "Configuration " + CpuBackend.DEFAULT_PID + " was removed: going back to the defaults restarts "
                        + device + ", which " + blocks + "; free them, then give "
                        + CpuBackend.DEFAULT_PID + " an empty configuration (in the distribution an empty file config/"
                        + CpuBackend.DEFAULT_PID + ".cfg)";
            } else {
                refusal = "Configuration of " + device + " refused: it changes what needs a restart of the device, which "
                        + blocks + "; free them and save the file again (pool sizes"
                        + " apply without a restart)";
            }
        }
        if (refusal != null) {
            reject(refusal, device == null ? "no device runs" : device + " keeps running as it was");
            return;
        }
        stop();
        clearRejection();
        start(context, cfg, index, log);
    }

    /**
     * Logs the refusal as one error line and shows it in mem:backends until a configuration applies;
     * both name the configuration's file when it came from one, since a refusal such as "needs a
     * whole number index" says nothing of which of the files in {@code config/} to fix.
     */
    final void reject(String refusal, String consequence) {
        String reason = refusal + "; " + consequence + (file == null ? "" : " (file " + file + ")");
        if (log != null) {
            log.error("{}", reason);
        }
        clearRejection();
        Hashtable<String, Object> props = new Hashtable<>();
        props.put(Rejection.REASON_PROPERTY, reason);
        rejection = context.registerService(new String[] {Rejection.class.getName()}, new Rejection(), props);
    }

    /** Remembers the context a refused first configuration arrived with, for a later one that applies. */
    final void context(BundleContext bundleContext, Logger logger) {
        this.context = bundleContext;
        this.log = logger;
    }

    private void clearRejection() {
        if (rejection != null) {
            try {
                rejection.unregister();
            } catch (IllegalStateException alreadyGone) {
                // the bundle stopped meanwhile
            }
            rejection = null;
        }
    }

    /**
     * @return whether {@code a} and {@code b} differ only in attributes of the pools (or not at all);
     *         both must be valid (see {@link #refusal})
     */
    static boolean onlyPoolsDiffer(CpuDeviceConfig a, CpuDeviceConfig b) {
        // index() is boxed: == would compare Integer objects, equal only in the cache (-128 to 127).
        return Objects.equals(index(a), index(b)) && capacity(a) == capacity(b)
                && ConfigurationCheck.toFlag("autoGc", a.autoGc()) == ConfigurationCheck.toFlag("autoGc", b.autoGc())
                && gcThreshold(a) == gcThreshold(b)
                && ConfigurationCheck.toFlag("debug", a.debug()) == ConfigurationCheck.toFlag("debug", b.debug())
                && transfers(a) == transfers(b)
                && zeroing(a.zeroing()) == zeroing(b.zeroing())
                && ConfigSizes.parse("threadCacheBytes", a.threadCacheBytes()) == ConfigSizes.parse("threadCacheBytes", b.threadCacheBytes());
    }

    /**
     * Checks every attribute before any applies: each on its own first, then the rules across
     * attributes whose attributes are good, so that every bad value is named at once.
     *
     * @param cfg          a configuration
     * @param index        the device index it asks for
     * @param indexRefusal why the component refuses that index, or null when it accepts it
     * @return why the configuration cannot apply, naming every bad value and what to do, or null if it can
     */
    static String refusal(CpuDeviceConfig cfg, int index, String indexRefusal) {
        return refusal(cfg, Map.of(), index, indexRefusal);
    }

    /** @param properties the raw properties of {@code cfg} (a list is refused: DS would keep its first element) */
    static String refusal(CpuDeviceConfig cfg, Map<String, ?> properties, int index, String indexRefusal) {
        ConfigurationCheck check = new ConfigurationCheck();
        check.singleValues(properties);
        check.knownAttributes(properties, CpuDeviceConfig.class);
        Long capacity = check.read(() -> ConfigSizes.parse("capacity", cfg.capacity()));
        Long initial = check.read(() -> ConfigSizes.parse("initialSize", cfg.initialSize()));
        Long maxSize = check.read(() -> ConfigSizes.parse("maxSize", cfg.maxSize()));
        Long growth = check.read(() -> ConfigSizes.parse("growthIncrement", cfg.growthIncrement()));
        Long alignment = check.read(() -> ConfigSizes.parse("alignment", cfg.alignment()));
        Long threadCache = check.read(() -> ConfigSizes.parse("threadCacheBytes", cfg.threadCacheBytes()));
        check.read(() -> zeroing(cfg.zeroing()));
        Boolean autoExpansion = check.flag("autoExpansion", cfg.autoExpansion());
        check.flag("preAllocate", cfg.preAllocate());
        check.flag("stats", cfg.stats());
        check.flag("autoGc", cfg.autoGc());
        check.flag("debug", cfg.debug());
        Double gcThreshold = check.decimal("gcThreshold", cfg.gcThreshold());
        Integer transfers = check.integer("maxConcurrentTransfers", cfg.maxConcurrentTransfers(), 1);

        check.poolRules(initial, maxSize, growth, autoExpansion, alignment);
        check.managerRules(gcThreshold, transfers);
        if (threadCache != null) {
            check.read(() -> PoolSettings.defaults().withThreadCache(threadCache));
        }
        if (capacity != null && initial != null && capacity > 0 && initial > capacity) {
            check.problem("initialSize " + count(initial, "byte") + " is larger than capacity " + count(capacity, "byte"));
        }
        List<String> bad = check.problems();
        if (indexRefusal != null) {
            return bad.isEmpty() ? indexRefusal : indexRefusal + "; " + String.join("; ", bad);
        }
        return bad.isEmpty() ? null : "Configuration of cpu:" + index + " refused: " + String.join("; ", bad);
    }

    /** @return the configuration's index, or null when it is no whole number (a bad value its component names) */
    static Integer index(CpuDeviceConfig cfg) {
        try {
            return ConfigurationCheck.toInteger("index", cfg.index());
        } catch (InvalidMemoryRequestException notANumber) {
            return null;
        }
    }

    private static double gcThreshold(CpuDeviceConfig cfg) {
        return ConfigurationCheck.toDecimal("gcThreshold", cfg.gcThreshold());
    }

    private static int transfers(CpuDeviceConfig cfg) {
        return ConfigurationCheck.toInteger("maxConcurrentTransfers", cfg.maxConcurrentTransfers());
    }

    static long capacity(CpuDeviceConfig cfg) {
        return ConfigSizes.parse("capacity", cfg.capacity());
    }

    /**
     * The pooled manager of one configured device, exactly as a running device builds it (the
     * contract tests build theirs here too).
     *
     * @param streams the device's streams, on which its asynchronous copies run; null for private
     *                streams that close with the manager
     */
    static PooledMemoryManager newManager(FfmUpstream upstream, CpuDeviceConfig cfg, Logger logger, HostStreamManager streams) {
        PoolSettings settings = PoolSettings.defaults().withZeroing(zeroing(cfg.zeroing())).withLog(new OsgiPoolLog(logger))
                .withPeers(CpuBackend.DEVICES::get).withThreadCache(ConfigSizes.parse("threadCacheBytes", cfg.threadCacheBytes()));
        return PooledMemoryManager.create(upstream, managerConfig(cfg), settings, streams);
    }

    /** @param cfg a valid configuration (see {@link #refusal}) @return the manager's configuration */
    static MemoryManagerConfig managerConfig(CpuDeviceConfig cfg) {
        long maxSize = ConfigSizes.parse("maxSize", cfg.maxSize());
        MemoryPoolConfig pool = new MemoryPoolConfig(ConfigSizes.parse("initialSize", cfg.initialSize()),
                maxSize > 0 ? OptionalLong.of(maxSize) : OptionalLong.empty(),
                ConfigSizes.parse("growthIncrement", cfg.growthIncrement()),
                ConfigurationCheck.toFlag("autoExpansion", cfg.autoExpansion()),
                ConfigSizes.parse("alignment", cfg.alignment()), ConfigurationCheck.toFlag("preAllocate", cfg.preAllocate()),
                ConfigurationCheck.toFlag("stats", cfg.stats()));
        return new MemoryManagerConfig(Map.of(MemoryType.GENERAL, pool), true, ConfigurationCheck.toFlag("autoGc", cfg.autoGc()),
                gcThreshold(cfg), ConfigurationCheck.toFlag("debug", cfg.debug()), transfers(cfg));
    }

    static ZeroingPolicy zeroing(String value) {
        String v = value == null ? "none" : value.strip().toLowerCase(Locale.ROOT).replace('_', '-');
        return switch (v) {
            case "none" -> ZeroingPolicy.NONE;
            case "on-allocate" -> ZeroingPolicy.ON_ALLOCATE;
            case "on-free" -> ZeroingPolicy.ON_FREE;
            default -> throw new InvalidMemoryRequestException("Invalid zeroing " + ConfigurationCheck.quoted(value)
                    + ": use none, on-allocate or on-free");
        };
    }

    /** @return e.g. {@code 1 live block}, {@code 3 live blocks}: a count as a sentence says it */
    static String count(long n, String noun) {
        return n + " " + noun + (n == 1 ? "" : "s");
    }

    @Override
    public String toString() {
        return "CpuDevice " + Objects.toString(device, "(none)");
    }
}
