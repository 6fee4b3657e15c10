package io.ferrum.memory.monitor;

import java.lang.foreign.MemorySegment;
import java.util.Collections;
import java.util.Hashtable;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;
import org.osgi.framework.ServiceRegistration;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Modified;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;
import org.osgi.service.log.Logger;
import org.osgi.service.log.LoggerFactory;
import org.osgi.service.metatype.annotations.Designate;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.AllocationStrategy;
import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryObserver;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.api.MemoryRouter;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.StreamHandle;

/**
 * The global monitor and the router, as one DS component whose registry is the OSGi whiteboard:
 * every {@link DeviceMemoryManager}, {@link AllocationStrategy} and {@link MemoryObserver} service is
 * picked up as it comes and dropped as it goes, within the service event.
 *
 * <p>This class is the front: it turns service events and configuration into calls on its rooms and
 * answers {@link GlobalMemoryMonitor} itself. The rooms, in the spirit of a whiteboard tracker, a
 * notifier and a repository:
 * <ul>
 * <li>repositories: {@link DeviceRegistry} (which manager serves which device, and which issued a
 * handle, through {@link PrefixTable}s) and {@link StrategyRegistry};</li>
 * <li>notifier: {@link ObserverNotifier}, one {@link ObserverLane} per observer;</li>
 * <li>trackers: {@link PressureLevels} (reported or derived levels) and {@link DeviceSampler};</li>
 * <li>the router: {@link Router}, over {@link RoutingSnapshots} and {@link CrossDeviceCopier};</li>
 * <li>shared: {@link RunState}, {@link MonitorLog}, {@link MonitorConfig} (checked by {@link MonitorSettings}).</li>
 * </ul>
 * Every room reads managers through the API alone: the monitor imports no backend and no pool.
 *
 * <p>Notifications (device added or removed, pressure changes, samples, the global callback) run on
 * the observers' lanes, in order per observer, outside every lock; a failing observer is logged and
 * keeps receiving calls. Managers that accept a pressure observer report their own changes
 * (edge-triggered); the levels of the others are derived from their figures.
 *
 * <p>Once deactivated, the monitor refuses every call of {@link GlobalMemoryMonitor} and {@link
 * MemoryRouter} with a {@link io.ferrum.memory.api.DeviceUnavailableException} (device {@code null})
 * saying that it is stopped, the queries that answer an {@code Optional} ({@code handleInfo}, {@code
 * owner}, {@code manager}, {@code activeStrategy}) included: an empty answer would claim that no
 * device knows a block that is live on its running manager. It frees nothing and forgets nothing: the
 * blocks routed through it stay live on their managers, and the running router (the next instance of
 * this component) serves them.
 *
 * <p>Configuration (PID {@value #PID}) is checked whole by {@link MonitorSettings} before any of it
 * applies. A refused one changes nothing: at activation the monitor runs with its defaults, on an
 * update it keeps its configuration as it was. Either way the refusal is one error line naming every
 * bad value, and a service with {@value #REJECTED_PROPERTY} (which {@code mem:strategy} shows) stands
 * until a configuration applies.
 *
 * <p>DS registers no service of this component: it registers {@link MonitorViews} itself, a
 * bundle-scoped factory of the {@link GlobalMemoryMonitor} and {@link MemoryRouter} services, so that
 * each bundle gets its own {@link MonitorView} of this one monitor. What a bundle registered through
 * its view (managers by hand, the global callback) is undone when the bundle releases the service,
 * as the framework does for it when it stops.
 *
 * <p>Tests and benchmarks build one without a framework through {@link MonitorBuilder}.
 */
@Component(service = {}, configurationPid = MemoryMonitor.PID, immediate = true)
@Designate(ocd = MonitorConfig.class)
public final class MemoryMonitor implements GlobalMemoryMonitor, MemoryRouter {
    static final String PID = "io.ferrum.memory.monitor";
    /**
     * Property of the service that stands for a refused configuration, as the backends register it
     * (the shell shows the reason: the refusal and what runs instead).
     */
    static final String REJECTED_PROPERTY = "ferrum.configuration.rejected";
    /** Property of that service: the PID of the refused configuration, by which the shell finds it. */
    static final String CONFIGURATION_PID_PROPERTY = "ferrum.configuration.pid";
    /** Notifications that may wait for one observer before further ones are dropped. */
    static final int LANE_CAPACITY = 1024;

    private final RunState state = new RunState();
    private final DeviceRegistry registry = new DeviceRegistry();
    private final StrategyRegistry strategies = new StrategyRegistry();
    private final MonitorLog log;
    private final ObserverNotifier notifier;
    private final PressureLevels levels;
    /**
     * One lock per device: a change of the device's managers and its follow-ups (the pressure source,
     * the observers told) run under it, so that two changes of one device (a manager arriving while
     * it, or another, leaves) apply whole and in the registry's order. The follow-ups ask the arriving
     * manager for its figures and observer: one that blocks there holds up only its own device's
     * changes, never allocation (the router takes no such lock) nor another device.
     */
    private final ConcurrentHashMap<Device, Object> deviceLocks = new ConcurrentHashMap<>();
    /** Runs globalGc's defragmentations and the copies between managers. */
    private final ExecutorService workers = Executors.newCachedThreadPool(daemon("ferrum-monitor-worker"));
    private final DeviceSampler sampler;
    private final Router router;
    private final BundleContext context;
    /**
     * How long the configured strategy may be absent before a warning: its bundle may start after the
     * monitor (at every start of the distribution best-fit binds before most-free does) or be updated.
     */
    static final long ABSENT_STRATEGY_GRACE_MS = 10_000;

    /** Guarded by this: the refusal that stands, its service. */
    private String rejected;
    private ServiceRegistration<Object> rejection;
    /** The registration of {@link MonitorViews}, or null outside a framework and once deactivated. */
    private volatile ServiceRegistration<?> views;
    /** Guarded by this: the configured strategy while it is absent (null while present), the note given, the warning given. */
    private String absentName;
    private String absentNoted;
    private boolean absentWarned;
    /** Guarded by this: counts absences, so that a delayed check of an absence that ended does nothing. */
    private long absences;

    /** A monitor whose configuration's raw properties hold no list (builders and tests). */
    public MemoryMonitor(BundleContext context, MonitorConfig config, Logger logger) {
        this(context, config, Map.of(), logger);
    }

    /**
     * @param context    the bundle's context, where a refused configuration is shown as a service (for
     *                   the shell); null outside a framework
     * @param properties the configuration's raw properties (a value given as a list is refused)
     */
    @Activate
    public MemoryMonitor(BundleContext context, MonitorConfig config, Map<String, Object> properties,
                         @Reference(service = LoggerFactory.class, cardinality = ReferenceCardinality.OPTIONAL) Logger logger) {
        this.context = context;
        log = new MonitorLog(logger);
        notifier = new ObserverNotifier(LANE_CAPACITY, this::levels, log);
        notifier.onDevicesMissed(this::catchUpDevices);
        levels = new PressureLevels(notifier);
        sampler = new DeviceSampler(registry, levels, notifier, log);
        router = new Router(registry, strategies, new RoutingSnapshots(levels), new CrossDeviceCopier(workers), state);
        MonitorSettings settings;
        try {
            settings = MonitorSettings.of(config, properties);
        } catch (InvalidMemoryRequestException refused) {
            settings = MonitorSettings.DEFAULTS;
            reject(refused.getMessage() + "; the monitor starts with its defaults");
        }
        apply(settings);
    }

    /**
     * Registers {@link MonitorViews} once DS has bound the managers, strategies and observers present,
     * after this constructor: a bundle may get a view, and call this monitor, as soon as it is
     * registered (a DS component that allocates in its activate does), and must find it whole, as it
     * did when DS registered the services of the activated component itself.
     *
     * @param properties the component's properties, whose name and id the services carry as DS gave them
     */
    @Activate
    void registerViews(Map<String, Object> properties) {
        if (context == null) {
            return;
        }
        Hashtable<String, Object> props = new Hashtable<>();
        for (String key : List.of("component.name", "component.id")) {
            if (properties.get(key) != null) {
                props.put(key, properties.get(key));
            }
        }
        views = context.registerService(new String[] {GlobalMemoryMonitor.class.getName(), MemoryRouter.class.getName()},
                new MonitorViews(this), props);
    }

    /** A changed configuration applies whole, or (with a bad value) not at all. */
    @Modified
    synchronized void modified(MonitorConfig config, Map<String, Object> properties) {
        MonitorSettings settings;
        try {
            settings = MonitorSettings.of(config, properties);
        } catch (InvalidMemoryRequestException refused) {
            reject(refused.getMessage() + "; the monitor keeps its configuration as it was");
            return;
        }
        clearRejection();
        apply(settings);
    }

    /** Tests: {@link #modified} with raw properties that hold no list (not named modified: DS would see two). */
    void modify(MonitorConfig config) {
        modified(config, Map.of());
    }

    private synchronized void apply(MonitorSettings settings) {
        String before = activeName();
        strategies.configure(settings.strategy());
        router.maxAttempts(settings.maxAttempts());
        sampler.schedule(settings.samplePeriodMs());
        String after = activeName();
        if (!noteConfiguredAbsent() && before != null && !before.equals(after)) {
            log.info("Active allocation strategy: " + after + " (was " + before + ")");
        }
    }

    private String activeName() {
        StrategyRegistry.Entry e = strategies.active();
        return e == null ? null : e.name();
    }

    /**
     * Says, without alarm, that the configured strategy is absent and which one is used until it
     * arrives (an info line, again when the one used changes), and says so again when it arrives.
     * Called on every configuration and every strategy arriving or leaving: in OSGi a strategy may
     * arrive at any time, and strategies bind after activation. Only an absence that lasts {@value
     * #ABSENT_STRATEGY_GRACE_MS} ms is a warning (see {@link #warnIfConfiguredStillAbsent}), so a
     * typo is reported and a late bundle is not.
     *
     * @return whether the configured strategy is absent while another is used
     */
    private synchronized boolean noteConfiguredAbsent() {
        String configured = strategies.configured();
        String used = activeName();
        if (configured.isEmpty() || used == null || configured.equals(used)) {
            if (absentName != null && absentName.equals(used)) {
                log.info("Configured strategy '" + MonitorSettings.printable(used) + "' arrived: it is the active strategy now");
            }
            absentName = null;
            absentNoted = null;
            absentWarned = false;
            absences++;
            return false;
        }
        if (!configured.equals(absentName)) {
            absentName = configured;
            absentWarned = false;
            long absence = ++absences;
            sampler.later(() -> {
                synchronized (this) {
                    if (absence == absences) {
                        warnIfConfiguredStillAbsent();
                    }
                }
            }, ABSENT_STRATEGY_GRACE_MS);
        }
        String note = "Configured strategy '" + MonitorSettings.printable(configured) + "' is not present yet; using " + used + " until it arrives";
        if (!note.equals(absentNoted)) {
            absentNoted = note;
            log.info(note);
        }
        return true;
    }

    /**
     * The delayed check of {@link #noteConfiguredAbsent}: one warning for an absence that lasts (a
     * misspelt name, a bundle not installed), naming the strategy used and those present.
     */
    synchronized void warnIfConfiguredStillAbsent() {
        String used = activeName();
        if (absentName == null || absentWarned || used == null) {
            return;
        }
        absentWarned = true;
        List<String> present = strategies.all().stream().map(StrategyRegistry.Entry::name).distinct().sorted().toList();
        log.warn("Configured strategy '" + MonitorSettings.printable(absentName) + "' is still not present " + ABSENT_STRATEGY_GRACE_MS / 1000
                + " s later; using " + used + " (present: " + String.join(", ", present) + "): check the name in "
                + PID + " or install its bundle", null);
    }

    /** Logs the refusal as one error line and shows it to the shell's mem:strategy until a configuration applies. */
    private synchronized void reject(String reason) {
        log.error(reason);
        rejected = reason;
        clearRejectionService();
        if (context != null) {
            try {
                Hashtable<String, Object> props = new Hashtable<>();
                props.put(REJECTED_PROPERTY, reason);
                props.put(CONFIGURATION_PID_PROPERTY, PID);
                rejection = context.registerService(Object.class, new Object(), props);
            } catch (IllegalStateException stopping) {
                // the bundle stops meanwhile: nothing left to show it to
            }
        }
    }

    private synchronized void clearRejection() {
        rejected = null;
        clearRejectionService();
    }

    private void clearRejectionService() {
        if (rejection != null) {
            try {
                rejection.unregister();
            } catch (IllegalStateException alreadyGone) {
                // the bundle stopped meanwhile
            }
            rejection = null;
        }
    }

    /** @return the settings running now, for tests: the strategy configured, the period, the attempts */
    synchronized MonitorSettings settings() {
        return new MonitorSettings(strategies.configured(), sampler.periodMs(), router.maxAttempts());
    }

    /** @return the refused configuration that stands (the reason and what runs instead), or null */
    synchronized String rejected() {
        return rejected;
    }

    /** Stops first (every later call is refused), then lets go of the managers and the threads. */
    @Deactivate
    void deactivate() {
        unregisterViews();
        state.stop();
        synchronized (this) {
            clearRejection();
        }
        levels.clear();
        sampler.stop();
        workers.shutdown();
        notifier.stop();
    }

    /**
     * Withdraws the services first, as DS did when it registered them: their users let go (and what
     * they registered by hand with them) while the monitor still answers.
     */
    private void unregisterViews() {
        ServiceRegistration<?> r = views;
        views = null;
        if (r != null) {
            try {
                r.unregister();
            } catch (IllegalStateException alreadyGone) {
                // the bundle stopped meanwhile: the framework withdrew them
            }
        }
    }

    private Map<Device, MemoryPressure> levels() {
        return levels.snapshot();
    }

    static ThreadFactory daemon(String name) {
        AtomicInteger n = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, name + "-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }

    // Whiteboard: managers

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY)
    void addManager(DeviceMemoryManager manager, Map<String, Object> props) {
        Device device = deviceOf(manager, props);
        if (device != null) {
            DeviceRegistry.Entry entry = new DeviceRegistry.Entry(device, manager, DeviceRegistry.spaceOf(manager),
                    ranking(props), serviceId(props), false);
            synchronized (lockOf(device)) {
                try {
                    onChange(registry.add(entry));
                } catch (InvalidMemoryRequestException refused) {
                    // A handle space that overlaps another manager's: the service is ignored, said once.
                    log.error(refused.getMessage());
                }
            }
        }
    }

    void removeManager(DeviceMemoryManager manager, Map<String, Object> props) {
        Device device = deviceOf(manager, props);
        if (device != null) {
            synchronized (lockOf(device)) {
                onChange(registry.remove(device, manager, false));
            }
        }
    }

    /** @return the lock under which {@code device}'s changes apply (see {@link #deviceLocks}) */
    private Object lockOf(Device device) {
        return deviceLocks.computeIfAbsent(device, d -> new Object());
    }

    private Device deviceOf(DeviceMemoryManager manager, Map<String, Object> props) {
        Object value = props.get(DeviceMemoryManager.DEVICE_PROPERTY);
        try {
            return value != null ? Device.parse(value.toString()) : manager.device();
        } catch (MemoryException e) {
            log.warn("Ignoring a DeviceMemoryManager service with an unusable " + DeviceMemoryManager.DEVICE_PROPERTY
                    + "=" + value + ": " + e.getMessage(), null);
            return null;
        }
    }

    private static int ranking(Map<String, Object> props) {
        return props.get(Constants.SERVICE_RANKING) instanceof Integer i ? i : 0;
    }

    private static long serviceId(Map<String, Object> props) {
        return props.get(Constants.SERVICE_ID) instanceof Long l ? l : Long.MAX_VALUE;
    }

    /**
     * Follows a change of a device's serving manager: snapshots, pressure source, observers. Called
     * under the device's lock, right after the registry took the change.
     */
    private void onChange(DeviceRegistry.Change change) {
        router.devicesChanged();
        Device d = change.device();
        if (change.before() != null && change.before() != change.after()) {
            levels.unsubscribe(d, change.before());
        }
        if (change.after() != null && change.before() != change.after()) {
            MemoryInfo info = DeviceSampler.safeInfo(change.after());
            levels.subscribe(d, change.after(), info);
            if (change.added()) {
                log.info("Device " + d + " added" + (info == null ? "" : ": " + info.totalBytes() + " bytes"));
                notifier.deviceAdded(d, info);
            }
        }
        if (change.removed()) {
            levels.forget(d);
            log.info("Device " + d + " removed");
            notifier.deviceRemoved(d);
        }
    }

    // Whiteboard: strategies and observers

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY)
    void addStrategy(AllocationStrategy strategy, Map<String, Object> props) {
        Object name = props.get(AllocationStrategy.NAME_PROPERTY);
        strategies.add(new StrategyRegistry.Entry(strategy, name != null ? name.toString() : strategy.name(),
                ranking(props), serviceId(props)));
        noteConfiguredAbsent();
    }

    void removeStrategy(AllocationStrategy strategy) {
        strategies.remove(strategy);
        noteConfiguredAbsent();
    }

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY)
    void addObserver(MemoryObserver observer, Map<String, Object> props) {
        Object only = props.get(DeviceMemoryManager.DEVICE_PROPERTY);
        Device device = null;
        if (only != null) {
            try {
                device = Device.parse(only.toString());
            } catch (MemoryException e) {
                log.warn("Observer " + observer + " has an unusable " + DeviceMemoryManager.DEVICE_PROPERTY + "=" + only
                        + "; it hears about every device", null);
            }
        }
        Object entry = notifier.add(observer, device);
        // A late observer learns which devices exist: each under its lock, if it is still served (it
        // may leave meanwhile) and the observer was not told by the device's own arrival meanwhile.
        for (Device d : registry.active().keySet()) {
            synchronized (lockOf(d)) {
                DeviceMemoryManager m = registry.active().get(d);
                if (m != null) {
                    notifier.deviceAdded(entry, d, DeviceSampler.safeInfo(m));
                }
            }
        }
    }

    /**
     * An observer's lane dropped an arrival or a departure (it was full): in that lane, the observer
     * (a token of the notifier) hears, under each device's lock as a new observer's catch-up, the
     * devices served now that it was not told of, and the departure of those it was told of that are
     * no longer served.
     */
    private void catchUpDevices(Object entry) {
        Set<Device> devices = new java.util.TreeSet<>(registry.active().keySet());
        devices.addAll(notifier.toldOf(entry));
        for (Device d : devices) {
            synchronized (lockOf(d)) {
                DeviceMemoryManager m = registry.active().get(d);
                if (m != null) {
                    notifier.deviceAdded(entry, d, DeviceSampler.safeInfo(m));
                } else {
                    notifier.deviceRemoved(entry, d);
                }
            }
        }
    }

    void removeObserver(MemoryObserver observer) {
        notifier.remove(observer);
    }

    // GlobalMemoryMonitor

    @Override
    public Map<Device, MemoryInfo> globalMemoryInfo() {
        if (state.isStopped()) {
            throw RunState.refusal("globalMemoryInfo()");
        }
        return sampler.figures();
    }

    @Override
    public MemoryPressure globalMemoryPressure() {
        if (state.isStopped()) {
            throw RunState.refusal("globalMemoryPressure()");
        }
        MemoryPressure max = MemoryPressure.LOW;
        for (MemoryInfo info : sampler.figures().values()) {
            if (info.pressureLevel().compareTo(max) > 0) {
                max = info.pressureLevel();
            }
        }
        return max;
    }

    @Override
    public Set<Device> devices() {
        if (state.isStopped()) {
            throw RunState.refusal("devices()");
        }
        return Set.copyOf(registry.active().keySet());
    }

    @Override
    public Optional<DeviceMemoryManager> manager(Device device) {
        if (state.isStopped()) {
            throw RunState.refusal("manager(" + device + ")");
        }
        return device == null ? Optional.empty() : Optional.ofNullable(registry.active().get(device));
    }

    @Override
    public void registerManager(Device device, DeviceMemoryManager manager) {
        registerByHand(device, manager);
    }

    /**
     * {@link #registerManager}, for a bundle's view that must undo it when the bundle lets go.
     *
     * @return the entry added, which {@link #releaseByHand} removes if it is still present
     */
    DeviceRegistry.Entry registerByHand(Device device, DeviceMemoryManager manager) {
        if (state.isStopped()) {
            throw RunState.refusal("registerManager(" + device + ", " + manager + ")");
        }
        if (device == null || manager == null) {
            throw new InvalidMemoryRequestException("registerManager needs a device and a manager (device " + device
                    + ", manager " + manager + ")");
        }
        if (!device.equals(manager.device())) {
            throw new InvalidMemoryRequestException("Manager " + manager + " serves " + manager.device()
                    + ", not " + device);
        }
        DeviceRegistry.Entry entry = new DeviceRegistry.Entry(device, manager, DeviceRegistry.spaceOf(manager),
                Integer.MAX_VALUE, -1, true);
        synchronized (lockOf(device)) {
            try {
                onChange(registry.add(entry));
            } catch (InvalidMemoryRequestException refused) {
                log.error(refused.getMessage());
                throw refused;
            }
        }
        return entry;
    }

    /** @return whether {@code entry}, added by {@link #registerByHand}, is still present */
    boolean holdsByHand(DeviceRegistry.Entry entry) {
        return registry.contains(entry);
    }

    /**
     * Removes {@code entry}, added by {@link #registerByHand}, if it is still present (not removed by
     * {@link #unregisterManager} meanwhile): a manager registered by hand since for its device stays.
     */
    void releaseByHand(DeviceRegistry.Entry entry) {
        synchronized (lockOf(entry.device())) {
            if (registry.contains(entry)) {
                onChange(registry.remove(entry));
            }
        }
    }

    @Override
    public void unregisterManager(Device device) {
        if (state.isStopped()) {
            throw RunState.refusal("unregisterManager(" + device + ")");
        }
        if (device != null) {
            synchronized (lockOf(device)) {
                onChange(registry.remove(device, null, true));
            }
        }
    }

    @Override
    public void setGlobalPressureCallback(Consumer<Map<Device, MemoryPressure>> callback) {
        setGlobalPressureCallback(null, callback);
    }

    /** {@link #setGlobalPressureCallback} by {@code owner}, a bundle's view, which {@link #releaseGlobalPressureCallback} undoes. */
    void setGlobalPressureCallback(Object owner, Consumer<Map<Device, MemoryPressure>> callback) {
        if (state.isStopped()) {
            throw RunState.refusal("setGlobalPressureCallback(" + callback + ")");
        }
        notifier.setGlobalCallback(owner, callback);
    }

    /** @return the global callback that stands, or null (tests) */
    Consumer<Map<Device, MemoryPressure>> globalPressureCallback() {
        return notifier.globalCallback();
    }

    /** Removes the global callback if {@code owner} set the one that stands. */
    void releaseGlobalPressureCallback(Object owner) {
        notifier.releaseGlobalCallback(owner);
    }

    @Override
    public CompletionStage<Map<Device, DefragmentationStats>> globalGc() {
        if (state.isStopped()) {
            throw RunState.refusal("globalGc()");
        }
        Map<Device, CompletableFuture<DefragmentationStats>> runs = new LinkedHashMap<>();
        for (Map.Entry<Device, DeviceMemoryManager> e : registry.active().entrySet()) {
            Device d = e.getKey();
            DeviceMemoryManager m = e.getValue();
            try {
                runs.put(d, CompletableFuture.supplyAsync(() -> m.defragment(d).toCompletableFuture().join(), workers));
            } catch (RejectedExecutionException stoppedMeanwhile) {
                throw RunState.refusal("globalGc()");
            }
        }
        // One device failing does not fail the others: its entry is left out and logged.
        return CompletableFuture.allOf(runs.values().stream().map(f -> f.handle((r, x) -> r))
                .toArray(CompletableFuture[]::new)).thenApply(ignored -> {
                    Map<Device, DefragmentationStats> out = new TreeMap<>();
                    runs.forEach((d, f) -> {
                        try {
                            out.put(d, f.join());
                        } catch (RuntimeException ex) {
                            log.warn("Defragmenting " + d + " failed; the other devices went on", ex);
                        }
                    });
                    return Collections.unmodifiableMap(out);
                });
    }

    // MemoryRouter: the router answers

    @Override
    public Optional<String> activeStrategy() {
        return router.activeStrategy();
    }

    /** @return every strategy present, in precedence order, for tools that list them */
    List<String> strategyNames() {
        return strategies.all().stream().map(StrategyRegistry.Entry::name).toList();
    }

    @Override
    public MemoryHandle allocate(long size, AllocationRequirements requirements) {
        return router.allocate(size, requirements);
    }

    @Override
    public void deallocate(MemoryHandle handle) {
        router.deallocate(handle);
    }

    @Override
    public Optional<MemoryHandleInfo> handleInfo(MemoryHandle handle) {
        return router.handleInfo(handle);
    }

    @Override
    public Optional<Device> owner(MemoryHandle handle) {
        return router.owner(handle);
    }

    @Override
    public void write(MemoryHandle dst, long dstOffset, MemorySegment src) {
        router.write(dst, dstOffset, src);
    }

    @Override
    public void read(MemoryHandle src, long srcOffset, MemorySegment dst) {
        router.read(src, srcOffset, dst);
    }

    @Override
    public void copy(MemoryTransfer transfer) {
        router.copy(transfer);
    }

    @Override
    public CompletionStage<Void> copyAsync(MemoryTransfer transfer, StreamHandle stream) {
        return router.copyAsync(transfer, stream);
    }
}
