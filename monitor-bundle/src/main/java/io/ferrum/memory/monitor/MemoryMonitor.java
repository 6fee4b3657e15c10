package io.ferrum.memory.monitor;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Consumer;

import org.osgi.framework.Constants;
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

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.AllocationStrategy;
import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryObserver;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.api.MemoryRouter;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.OutOfDeviceMemoryException;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * The global monitor and the router, as one DS component whose registry is the OSGi whiteboard:
 * every {@link DeviceMemoryManager}, {@link AllocationStrategy} and {@link MemoryObserver} service is
 * picked up as it comes and dropped as it goes, within the service event.
 *
 * <p>Notifications (device added or removed, pressure changes, samples, the global callback) run on
 * one monitor thread, in order, outside every lock; a failing observer is logged and keeps receiving
 * calls. Pressure changes of pooled managers come from the engine (edge-triggered); other managers
 * are checked at each sample.
 *
 * <p>Once deactivated, the monitor refuses every call of {@link GlobalMemoryMonitor} and {@link
 * MemoryRouter} with a {@link DeviceUnavailableException} (device {@code null}) saying that it is
 * stopped, the queries that answer an {@code Optional} ({@code handleInfo}, {@code owner}, {@code
 * manager}, {@code activeStrategy}) included: an empty answer would claim that no device knows a
 * block that is live on its running manager. It frees nothing and forgets nothing: the blocks routed
 * through it stay live on their managers, and the running router (the next instance of this
 * component) serves them.
 */
@Component(service = {GlobalMemoryMonitor.class, MemoryRouter.class}, configurationPid = MemoryMonitor.PID, immediate = true)
@Designate(ocd = MonitorConfig.class)
public final class MemoryMonitor implements GlobalMemoryMonitor, MemoryRouter {
    static final String PID = "io.ferrum.memory.monitor";

    private record ObserverEntry(MemoryObserver observer, Device only) {
        boolean wants(Device d) {
            return only == null || only.equals(d);
        }
    }

    private final DeviceRegistry registry = new DeviceRegistry();
    private final StrategyRegistry strategies = new StrategyRegistry();
    private final CopyOnWriteArrayList<ObserverEntry> observers = new CopyOnWriteArrayList<>();
    private final ConcurrentHashMap<Device, MemoryPressure> levels = new ConcurrentHashMap<>();
    private final ConcurrentHashMap<DeviceMemoryManager, MemoryObserver> engineListeners = new ConcurrentHashMap<>();
    private final ExecutorService notifier = Executors.newSingleThreadExecutor(daemon("ferrum-monitor-events"));
    private final ScheduledExecutorService sampler = Executors.newSingleThreadScheduledExecutor(daemon("ferrum-monitor-sampler"));
    private final ExecutorService workers = Executors.newCachedThreadPool(daemon("ferrum-monitor-worker"));
    private final Logger log;
    private volatile Consumer<Map<Device, MemoryPressure>> globalCallback;
    private volatile int maxAttempts = 4;
    /**
     * Set first thing on deactivation; from then on every public call is refused. Without it a
     * stopped router answered from the registry that DS empties after deactivation, and called a
     * block live on a running manager released (issue 13, defect 20).
     */
    private volatile boolean stopped;
    private ScheduledFuture<?> sampling;

    @Activate
    public MemoryMonitor(MonitorConfig config,
                         @Reference(service = LoggerFactory.class, cardinality = ReferenceCardinality.OPTIONAL) Logger log) {
        this.log = log;
        apply(config);
    }

    @Modified
    void modified(MonitorConfig config) {
        apply(config);
    }

    private synchronized void apply(MonitorConfig config) {
        String before = strategies.active() == null ? null : strategies.active().name();
        strategies.configure(config.strategy());
        maxAttempts = Math.max(1, config.maxAttempts());
        if (sampling != null) {
            sampling.cancel(false);
            sampling = null;
        }
        if (config.samplePeriodMs() > 0) {
            sampling = sampler.scheduleAtFixedRate(this::sample, config.samplePeriodMs(), config.samplePeriodMs(),
                    TimeUnit.MILLISECONDS);
        }
        String after = strategies.active() == null ? null : strategies.active().name();
        if (!config.strategy().isBlank() && !config.strategy().strip().equals(after)) {
            warn("Configured strategy '" + config.strategy() + "' is not present; using " + after, null);
        } else if (before != null && !before.equals(after)) {
            info("Active allocation strategy: " + after + " (was " + before + ")");
        }
    }

    /** DS deactivation; public so that the benchmarks can stop a monitor they made. */
    @Deactivate
    public void deactivate() {
        stopped = true;
        for (Map.Entry<DeviceMemoryManager, MemoryObserver> e : engineListeners.entrySet()) {
            e.getKey().removePressureObserver(e.getValue());
        }
        engineListeners.clear();
        sampler.shutdownNow();
        notifier.shutdown();
        workers.shutdown();
        try {
            notifier.awaitTermination(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * @param call the call refused, with the values it was given
     * @return the refusal of a stopped monitor
     */
    private static DeviceUnavailableException stopped(String call) {
        return new DeviceUnavailableException(null, "The memory router and global monitor (" + PID + ") is stopped: "
                + call + " was not carried out. Blocks allocated through it are untouched and stay live on their"
                + " managers; get the running MemoryRouter or GlobalMemoryMonitor service and call it there");
    }

    /** Hands a notification to the monitor thread; once stopped, nobody is told anything. */
    private void post(Runnable notification) {
        if (stopped) {
            return;
        }
        try {
            notifier.execute(notification);
        } catch (RejectedExecutionException e) {
            // Stopped meanwhile: the notification is dropped with every later one.
        }
    }

    private static ThreadFactory daemon(String name) {
        AtomicInteger n = new AtomicInteger();
        return r -> {
            Thread t = new Thread(r, name + "-" + n.incrementAndGet());
            t.setDaemon(true);
            return t;
        };
    }

    // ================================================================ whiteboard: managers

    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY)
    void addManager(DeviceMemoryManager manager, Map<String, Object> props) {
        Device device = deviceOf(manager, props);
        if (device == null) {
            return;
        }
        onChange(registry.add(new DeviceRegistry.Entry(device, manager, ranking(props), serviceId(props), false)));
    }

    void removeManager(DeviceMemoryManager manager, Map<String, Object> props) {
        Device device = deviceOf(manager, props);
        if (device != null) {
            onChange(registry.remove(device, manager, false));
        }
    }

    private Device deviceOf(DeviceMemoryManager manager, Map<String, Object> props) {
        Object value = props.get(DeviceMemoryManager.DEVICE_PROPERTY);
        try {
            return value != null ? Device.parse(value.toString()) : manager.device();
        } catch (MemoryException e) {
            warn("Ignoring a DeviceMemoryManager service with an unusable " + DeviceMemoryManager.DEVICE_PROPERTY
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

    private void onChange(DeviceRegistry.Change change) {
        Device d = change.device();
        if (change.before() != null && change.before() != change.after()) {
            unsubscribe(change.before());
        }
        if (change.after() != null && change.before() != change.after()) {
            subscribe(d, change.after());
            MemoryInfo info = safeInfo(change.after());
            if (info != null) {
                levels.put(d, info.pressureLevel());
            }
            if (change.added()) {
                info("Device " + d + " added" + (info == null ? "" : ": " + info.totalBytes() + " bytes"));
                dispatch(d, o -> o.deviceAdded(d, info));
            }
        }
        if (change.removed()) {
            levels.remove(d);
            info("Device " + d + " removed");
            dispatch(d, o -> o.deviceRemoved(d));
        }
    }

    private void subscribe(Device device, DeviceMemoryManager manager) {
        if (manager instanceof PooledMemoryManager pooled) {
            MemoryObserver listener = new MemoryObserver() {
                @Override
                public void pressureChanged(Device d, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
                    // Runs in the allocating thread, under the engine's notification lock: record and hand off.
                    levels.put(device, current);
                    post(() -> firePressure(device, previous, current, info));
                }
            };
            engineListeners.put(manager, listener);
            pooled.addPressureObserver(listener);
        }
    }

    private void unsubscribe(DeviceMemoryManager manager) {
        MemoryObserver listener = engineListeners.remove(manager);
        if (listener != null) {
            manager.removePressureObserver(listener);
        }
    }

    /** For per-allocation decisions: a pooled manager's lock-free snapshot, else the full information. */
    private static MemoryInfo quickInfo(DeviceMemoryManager m) {
        if (m instanceof PooledMemoryManager pooled) {
            try {
                return pooled.quickInfo();
            } catch (MemoryException e) {
                return null;
            }
        }
        return safeInfo(m);
    }

    private static MemoryInfo safeInfo(DeviceMemoryManager m) {
        try {
            return m.memoryInfo();
        } catch (MemoryException e) {
            return null;
        }
    }

    // ================================================================ whiteboard: strategies, observers

    /** DS bind method; public so that the benchmarks can drive the monitor without a framework. */
    @Reference(cardinality = ReferenceCardinality.MULTIPLE, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY)
    public void addStrategy(AllocationStrategy strategy, Map<String, Object> props) {
        Object name = props.get(AllocationStrategy.NAME_PROPERTY);
        strategies.add(new StrategyRegistry.Entry(strategy, name != null ? name.toString() : strategy.name(),
                ranking(props), serviceId(props)));
    }

    void removeStrategy(AllocationStrategy strategy) {
        strategies.remove(strategy);
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
                warn("Observer " + observer + " has an unusable " + DeviceMemoryManager.DEVICE_PROPERTY + "=" + only
                        + "; it hears about every device", null);
            }
        }
        ObserverEntry entry = new ObserverEntry(observer, device);
        observers.add(entry);
        // A late observer learns which devices exist.
        for (Map.Entry<Device, DeviceMemoryManager> e : registry.active().entrySet()) {
            if (entry.wants(e.getKey())) {
                MemoryInfo info = safeInfo(e.getValue());
                post(() -> call(entry, o -> o.deviceAdded(e.getKey(), info)));
            }
        }
    }

    void removeObserver(MemoryObserver observer) {
        observers.removeIf(e -> e.observer == observer);
    }

    // ================================================================ notifications

    private void dispatch(Device device, Consumer<MemoryObserver> call) {
        for (ObserverEntry e : observers) {
            if (e.wants(device)) {
                post(() -> call(e, call));
            }
        }
    }

    private void call(ObserverEntry e, Consumer<MemoryObserver> call) {
        if (!observers.contains(e)) {
            return; // unregistered meanwhile
        }
        try {
            call.accept(e.observer);
        } catch (VirtualMachineError fatal) {
            throw fatal;
        } catch (Throwable ex) {
            // Errors too (the NoClassDefFoundError of an observer whose bundle was refreshed): one
            // escaping here would end the notification in hand, and the observers after this one and
            // the global callback would never hear of it.
            warn("Memory observer " + e.observer + " failed; it keeps receiving calls", ex);
        }
    }

    private void firePressure(Device device, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
        for (ObserverEntry e : observers) {
            if (e.wants(device)) {
                call(e, o -> o.pressureChanged(device, previous, current, info));
            }
        }
        Consumer<Map<Device, MemoryPressure>> cb = globalCallback;
        if (cb != null) {
            try {
                cb.accept(Map.copyOf(levels));
            } catch (VirtualMachineError fatal) {
                throw fatal;
            } catch (Throwable ex) {
                warn("Global pressure callback " + cb + " failed; it keeps receiving calls", ex);
            }
        }
    }

    private void sample() {
        try {
            Map<Device, MemoryInfo> all = infos();
            for (Map.Entry<Device, MemoryInfo> e : all.entrySet()) {
                DeviceMemoryManager m = registry.active().get(e.getKey());
                if (m != null && !(m instanceof PooledMemoryManager)) {
                    MemoryPressure now = e.getValue().pressureLevel();
                    MemoryPressure before = levels.put(e.getKey(), now);
                    if (before != null && before != now) {
                        post(() -> firePressure(e.getKey(), before, now, e.getValue()));
                    }
                }
            }
            for (ObserverEntry o : observers) {
                Map<Device, MemoryInfo> mine = o.only == null ? all
                        : all.containsKey(o.only) ? Map.of(o.only, all.get(o.only)) : Map.of();
                post(() -> call(o, x -> x.sample(mine)));
            }
        } catch (RuntimeException e) {
            warn("Sampling device memory failed", e);
        }
    }

    // ================================================================ GlobalMemoryMonitor

    @Override
    public Map<Device, MemoryInfo> globalMemoryInfo() {
        if (stopped) {
            throw stopped("globalMemoryInfo()");
        }
        return infos();
    }

    /** @return every serving device's full information (the sampler's view, whether stopped or not) */
    private Map<Device, MemoryInfo> infos() {
        Map<Device, MemoryInfo> out = new TreeMap<>();
        for (Map.Entry<Device, DeviceMemoryManager> e : registry.active().entrySet()) {
            MemoryInfo info = safeInfo(e.getValue());
            if (info != null) {
                out.put(e.getKey(), info);
            }
        }
        return java.util.Collections.unmodifiableMap(out);
    }

    @Override
    public MemoryPressure globalMemoryPressure() {
        if (stopped) {
            throw stopped("globalMemoryPressure()");
        }
        MemoryPressure max = MemoryPressure.LOW;
        for (MemoryInfo info : infos().values()) {
            if (info.pressureLevel().compareTo(max) > 0) {
                max = info.pressureLevel();
            }
        }
        return max;
    }

    @Override
    public Set<Device> devices() {
        if (stopped) {
            throw stopped("devices()");
        }
        return Set.copyOf(registry.active().keySet());
    }

    @Override
    public Optional<DeviceMemoryManager> manager(Device device) {
        if (stopped) {
            throw stopped("manager(" + device + ")");
        }
        return device == null ? Optional.empty() : Optional.ofNullable(registry.active().get(device));
    }

    @Override
    public void registerManager(Device device, DeviceMemoryManager manager) {
        if (stopped) {
            throw stopped("registerManager(" + device + ", " + manager + ")");
        }
        if (device == null || manager == null) {
            throw new InvalidMemoryRequestException("registerManager needs a device and a manager (device " + device
                    + ", manager " + manager + ")");
        }
        if (!device.equals(manager.device())) {
            throw new InvalidMemoryRequestException("Manager " + manager + " serves " + manager.device()
                    + ", not " + device);
        }
        onChange(registry.add(new DeviceRegistry.Entry(device, manager, Integer.MAX_VALUE, -1, true)));
    }

    @Override
    public void unregisterManager(Device device) {
        if (stopped) {
            throw stopped("unregisterManager(" + device + ")");
        }
        if (device != null) {
            onChange(registry.remove(device, null, true));
        }
    }

    @Override
    public void setGlobalPressureCallback(Consumer<Map<Device, MemoryPressure>> callback) {
        if (stopped) {
            throw stopped("setGlobalPressureCallback(" + callback + ")");
        }
        this.globalCallback = callback;
    }

    @Override
    public CompletionStage<Map<Device, DefragmentationStats>> globalGc() {
        if (stopped) {
            throw stopped("globalGc()");
        }
        Map<Device, CompletableFuture<DefragmentationStats>> runs = new LinkedHashMap<>();
        for (Map.Entry<Device, DeviceMemoryManager> e : registry.active().entrySet()) {
            Device d = e.getKey();
            DeviceMemoryManager m = e.getValue();
            try {
                runs.put(d, CompletableFuture.supplyAsync(() -> m.defragment(d).toCompletableFuture().join(), workers));
            } catch (RejectedExecutionException stoppedMeanwhile) {
                throw stopped("globalGc()");
            }
        }
        return CompletableFuture.allOf(runs.values().stream().map(f -> f.handle((r, x) -> r))
                .toArray(CompletableFuture[]::new)).thenApply(ignored -> {
                    Map<Device, DefragmentationStats> out = new TreeMap<>();
                    runs.forEach((d, f) -> {
                        try {
                            out.put(d, f.join());
                        } catch (RuntimeException ex) {
                            warn("Defragmenting " + d + " failed; the other devices went on", ex);
                        }
                    });
                    return java.util.Collections.unmodifiableMap(out);
                });
    }

    // ================================================================ MemoryRouter

    @Override
    public Optional<String> activeStrategy() {
        if (stopped) {
            throw stopped("activeStrategy()");
        }
        StrategyRegistry.Entry e = strategies.active();
        return e == null ? Optional.empty() : Optional.of(e.name());
    }

    /** @return every strategy present, in precedence order, for tools that list them */
    List<String> strategyNames() {
        return strategies.all().stream().map(StrategyRegistry.Entry::name).toList();
    }

    @Override
    public MemoryHandle allocate(long size, AllocationRequirements requirements) {
        StrategyRegistry.Entry strategy = strategies.active();
        if (size <= 0 || requirements == null || strategy == null || stopped) {
            throw cannotRoute(size, requirements, strategy);
        }
        // Fast path: decide on the recent figures; anything unusual goes to the full path below.
        Map<Device, DeviceMemoryManager> active = registry.active();
        Routing r = routing(active);
        Device first = null;
        String firstFailure = null;
        boolean firstOutOfMemory = false;
        if (!r.devices.isEmpty()) {
            Optional<Device> choice = select(strategy, size, requirements, r.devices, r.infos);
            if (choice.isPresent()) {
                Device d = choice.get();
                DeviceMemoryManager m = r.managerOf(d);
                if (m == null) {
                    throw notOffered(strategy, d, r.devices);
                }
                try {
                    return allocateOn(m, d, size, requirements);
                } catch (OutOfDeviceMemoryException | DeviceUnavailableException e) {
                    routingEpoch++;
                    first = d;
                    firstFailure = d + " (" + e.getMessage() + ")";
                    firstOutOfMemory = e instanceof OutOfDeviceMemoryException;
                }
            }
        }
        if (active.isEmpty()) {
            throw noDevice(size, requirements);
        }
        return allocateFresh(size, requirements, strategy, active, first, firstFailure, firstOutOfMemory);
    }

    /**
     * The checks of {@link #allocate}, in order, once one of them failed (kept out of the hot
     * method, so that the compiler inlines it whole).
     */
    private RuntimeException cannotRoute(long size, AllocationRequirements requirements,
                                         StrategyRegistry.Entry strategy) {
        if (stopped) {
            return stopped("allocate(" + size + ", " + requirements + ")");
        }
        if (size <= 0) {
            return new InvalidMemoryRequestException("Invalid allocation size " + size + " bytes: the size must be more than zero");
        }
        if (requirements == null) {
            return new InvalidMemoryRequestException("Allocation requirements are null; use AllocationRequirements.defaults()");
        }
        return new DeviceUnavailableException(null, "No allocation strategy is available: install and start a"
                + " strategy bundle (for example io.ferrum.memory.strategy.bestfit)");
    }

    /** @return why {@link #allocate} found no device (kept out of the hot method) */
    private RuntimeException noDevice(long size, AllocationRequirements requirements) {
        if (stopped) { // stopped meanwhile: DS unbinds every device after deactivation
            return stopped("allocate(" + size + ", " + requirements + ")");
        }
        return new DeviceUnavailableException(null, "No memory device is available: install and start a backend"
                + " bundle (for example io.ferrum.memory.cpu)");
    }

    private static MemoryException notOffered(StrategyRegistry.Entry strategy, Device d, List<Device> offered) {
        return new MemoryException("Allocation strategy " + strategy.name() + " chose " + d
                + ", which was not among the devices offered " + offered + "; nothing was allocated. A strategy"
                + " returns one of the devices it is given: fix the strategy, or make another one active");
    }

    /** @return the calling thread's routing snapshot, made anew when stale and every {@value #REFRESH} calls */
    private Routing routing(Map<Device, DeviceMemoryManager> active) {
        int slot = routingSlot();
        Routing r = routing[slot];
        int left = routingCalls[slot] - 1;
        if (r == null || r.active != active || r.epoch != routingEpoch || left < 0) {
            return freshRouting(slot, active);
        }
        routingCalls[slot] = left;
        return r;
    }

    /**
     * Makes the snapshot of {@code slot} anew (a method of its own, so that {@link #routing} inlines):
     * when only its count ran out, with the same devices and new figures of each.
     */
    private Routing freshRouting(int slot, Map<Device, DeviceMemoryManager> active) {
        Routing old = routing[slot];
        int epoch = routingEpoch;
        Routing r = old != null && old.active == active && old.epoch == epoch ? old.withNewFigures() : null;
        if (r == null) {
            r = new Routing(active, figures(active), epoch);
        }
        routing[slot] = r;
        routingCalls[slot] = REFRESH - 1;
        return r;
    }

    /** Routed allocations decide on device figures at most {@value} allocations of their thread old (and fresh after a failure). */
    private static final int REFRESH = 64;

    /** The devices and figures routed allocations decide on; replaced when the devices change. */
    private record Routing(Map<Device, DeviceMemoryManager> active, List<Device> devices, Map<Device, MemoryInfo> infos,
                           DeviceMemoryManager[] managers, int epoch) {
        Routing(Map<Device, DeviceMemoryManager> active, Map<Device, MemoryInfo> infos, int epoch) {
            this(active, List.copyOf(infos.keySet()), Map.copyOf(infos),
                    infos.keySet().stream().map(active::get).toArray(DeviceMemoryManager[]::new), epoch);
        }

        /**
         * @return the same devices with their figures read again; null if a device no longer answers
         * (then the device list is made anew)
         */
        Routing withNewFigures() {
            // One device: Map.of, whose get is an equals on one key; the strategy looks its figures up
            // on every call, and a hashed map hashes the Device record each time (measured: routed
            // best-fit 4 KiB 93 ns with Map.of, 105-114 ns with the loop below for one device too).
            if (managers.length == 1) {
                MemoryInfo info = quickInfo(managers[0]);
                return info == null ? null : new Routing(active, devices, Map.of(devices.get(0), info), managers, epoch);
            }
            Map<Device, MemoryInfo> fresh = new HashMap<>(managers.length * 2);
            for (int i = 0; i < managers.length; i++) {
                MemoryInfo info = quickInfo(managers[i]);
                if (info == null) {
                    return null;
                }
                fresh.put(devices.get(i), info);
            }
            return new Routing(active, devices, Collections.unmodifiableMap(fresh), managers, epoch);
        }

        /** @return the manager of {@code d} if it is one of the devices offered, else null */
        DeviceMemoryManager managerOf(Device d) {
            for (int i = 0; i < managers.length; i++) {
                if (devices.get(i) == d) {
                    return managers[i];
                }
            }
            int i = devices.indexOf(d);
            return i < 0 ? null : managers[i];
        }
    }

    /**
     * Snapshots by thread, {@value #ROUTING_STRIDE} entries (64 bytes or more) apart: one shared
     * snapshot, made by one thread, sits in that thread's allocation buffer next to the objects it
     * allocates next, and every other thread reading it then misses its cache (2 threads: 129 ns per
     * routed 4 KiB allocate + free against 68 direct). Threads whose ids collide share a slot, which
     * is only slower. An array rather than a ThreadLocal, so that no thread keeps this bundle's
     * classes after it is stopped.
     */
    private final Routing[] routing = new Routing[ROUTING_SLOTS * ROUTING_STRIDE];
    /** Per slot of {@link #routing}: routed calls left before its snapshot is made anew (a count, so that figures are never more than {@value #REFRESH} calls old). */
    private final int[] routingCalls = new int[ROUTING_SLOTS * ROUTING_STRIDE];
    private static final int ROUTING_SLOTS = 64;
    private static final int ROUTING_STRIDE = 16;
    /** Bumped to make every thread's snapshot stale (after a failed allocation). */
    private volatile int routingEpoch;

    private static int routingSlot() {
        return (int) (Thread.currentThread().threadId() & (ROUTING_SLOTS - 1)) * ROUTING_STRIDE;
    }

    /** @return the lock-free figures of every device that answers, in device order */
    private static Map<Device, MemoryInfo> figures(Map<Device, DeviceMemoryManager> active) {
        Map<Device, MemoryInfo> infos = new LinkedHashMap<>();
        for (Map.Entry<Device, DeviceMemoryManager> e : active.entrySet()) {
            MemoryInfo info = quickInfo(e.getValue());
            if (info != null) {
                infos.put(e.getKey(), info);
            }
        }
        return infos;
    }

    /**
     * Asks the strategy, a plugin: whatever it throws (a bug, or a {@link LinkageError} once its bundle
     * was refreshed under it) fails this call with a {@link MemoryException} naming it, never with an
     * Error the caller does not expect; only a {@link VirtualMachineError} passes as it is. It is
     * given unmodifiable views, so it cannot change what the router decides or reports.
     *
     * @return the strategy's choice, never null
     */
    private static Optional<Device> select(StrategyRegistry.Entry strategy, long size, AllocationRequirements requirements,
                                           List<Device> devices, Map<Device, MemoryInfo> infos) {
        Optional<Device> choice;
        try {
            choice = strategy.strategy().selectDevice(size, requirements, devices, infos);
        } catch (VirtualMachineError fatal) {
            throw fatal;
        } catch (Throwable e) {
            throw strategyFailed(strategy, size, e);
        }
        if (choice == null) {
            throw new MemoryException("Allocation strategy " + strategy.name() + " answered null for " + size
                    + " bytes instead of an Optional; nothing was allocated. A strategy returns Optional.empty() when no"
                    + " device suits: fix the strategy, or make another one active");
        }
        return choice;
    }

    private static MemoryException strategyFailed(StrategyRegistry.Entry strategy, long size, Throwable e) {
        return new MemoryException("Allocation strategy " + strategy.name() + " failed choosing a device for " + size
                + " bytes (" + e + "); nothing was allocated. Fix or restart the strategy's bundle, or make another"
                + " strategy active (configuration 'strategy' of " + PID + ")", e);
    }

    private static MemoryHandle allocateOn(DeviceMemoryManager m, Device d, long size, AllocationRequirements requirements) {
        return requirements.alignment().isPresent()
                ? m.allocateAligned(size, requirements.alignment().getAsLong(), requirements.memoryType(), d)
                : m.allocate(size, requirements.memoryType(), d);
    }

    /** The full path: fresh figures of every device, and up to maxAttempts choices, skipping {@code tried}. */
    private MemoryHandle allocateFresh(long size, AllocationRequirements requirements, StrategyRegistry.Entry strategy,
                                       Map<Device, DeviceMemoryManager> active, Device triedFirst, String firstFailure,
                                       boolean firstOutOfMemory) {
        Map<Device, MemoryInfo> infos = Collections.unmodifiableMap(figures(active));
        int slot = routingSlot();
        routing[slot] = new Routing(active, new LinkedHashMap<>(infos), routingEpoch);
        routingCalls[slot] = REFRESH;
        List<Device> candidates = new ArrayList<>(infos.keySet());
        List<String> tried = new ArrayList<>();
        int attempt = 0;
        boolean outOfMemory = firstOutOfMemory;
        if (triedFirst != null) {
            candidates.remove(triedFirst);
            tried.add(firstFailure);
            attempt = 1;
        }
        for (; attempt < maxAttempts && !candidates.isEmpty(); attempt++) {
            Optional<Device> choice = select(strategy, size, requirements, List.copyOf(candidates), infos);
            if (choice.isEmpty()) {
                break;
            }
            Device d = choice.get();
            if (!candidates.contains(d)) {
                throw notOffered(strategy, d, candidates);
            }
            candidates.remove(d);
            DeviceMemoryManager m = active.get(d);
            try {
                return allocateOn(m, d, size, requirements);
            } catch (OutOfDeviceMemoryException | DeviceUnavailableException e) {
                tried.add(d + " (" + e.getMessage() + ")");
                outOfMemory |= e instanceof OutOfDeviceMemoryException;
            }
        }
        if (!outOfMemory && (!tried.isEmpty() || infos.isEmpty())) {
            if (stopped) { // stopped meanwhile: DS unbinds every device after deactivation
                throw stopped("allocate(" + size + ", " + requirements + ")");
            }
            // Nothing ran out of memory: every device tried had gone away, or none answers.
            throw new DeviceUnavailableException(null, "No device is available to allocate " + size + " bytes: "
                    + (tried.isEmpty() ? "none of " + active.keySet() + " answers" : "tried " + tried
                    + (candidates.isEmpty() ? "" : "; not tried " + candidates)));
        }
        long maxFree = infos.values().stream().mapToLong(MemoryInfo::freeBytes).max().orElse(0);
        throw new OutOfDeviceMemoryException(null, size, maxFree, "No device could allocate " + size + " bytes with strategy "
                + strategy.name() + (tried.isEmpty() ? ": it chose none of " + infos.keySet() : "; tried " + tried
                + (candidates.isEmpty() ? "" : "; not tried " + candidates)) + ". Free memory or add a device");
    }

    private DeviceMemoryManager route(MemoryHandle handle) {
        if (handle != null && handle.isValid()) {
            DeviceMemoryManager m = registry.ownerOf(handle.id(), handle);
            if (m != null) {
                return m;
            }
        }
        throw unroutable(handle);
    }

    /** @return why {@code handle} has no manager (kept out of {@link #route}, so that it inlines) */
    private RuntimeException unroutable(MemoryHandle handle) {
        if (stopped) {
            // Checked first: DS unbinds the managers after deactivation, and a handle of a manager that
            // is still running would look like one of a manager that went away.
            return stopped("a call on handle " + handle);
        }
        if (handle == null) {
            return new InvalidHandleException(null, "Handle is null");
        }
        if (!handle.isValid()) {
            return new InvalidHandleException(handle, "The zero handle names no allocation");
        }
        Device gone = registry.departedDevice(handle.id());
        if (gone != null) {
            return new DeviceUnavailableException(gone, "Handle " + handle + " belongs to " + gone
                    + ", which went away (its backend stopped or its configuration was deleted); its memory was released");
        }
        return new InvalidHandleException(handle, "Handle " + handle
                + " is not known to any device: it was freed, or it was never allocated");
    }

    @Override
    public void deallocate(MemoryHandle handle) {
        if (stopped) {
            throw stopped("deallocate(" + handle + ")");
        }
        route(handle).deallocate(handle);
    }

    @Override
    public Optional<MemoryHandleInfo> handleInfo(MemoryHandle handle) {
        if (stopped) {
            throw stopped("handleInfo(" + handle + ")");
        }
        if (handle == null || !handle.isValid()) {
            return Optional.empty();
        }
        DeviceMemoryManager m = registry.ownerOf(handle.id(), handle);
        return m == null ? Optional.empty() : m.handleInfo(handle);
    }

    @Override
    public Optional<Device> owner(MemoryHandle handle) {
        if (stopped) {
            throw stopped("owner(" + handle + ")");
        }
        return handleInfo(handle).map(MemoryHandleInfo::device);
    }

    @Override
    public void copy(MemoryTransfer transfer) {
        Route r = plan(transfer);
        if (r.sameManager()) {
            r.src.copy(transfer.src(), transfer.dst(), transfer.size(), transfer.srcOffset(), transfer.dstOffset());
        } else {
            hostCopy(r, transfer);
        }
    }

    @Override
    public CompletionStage<Void> copyAsync(MemoryTransfer transfer, StreamHandle stream) {
        Route r = plan(transfer);
        if (r.sameManager()) {
            return r.src.copyAsync(transfer, stream);
        }
        if (stream != null && !stream.isDefault()) {
            // The stream must be the destination device's, as the contract says: a zero-byte copy on the
            // destination's manager has it checked there (an unknown or foreign stream is refused).
            r.dst.copyAsync(MemoryTransfer.of(transfer.dst(), transfer.dst(), 0), stream);
        }
        // Between managers the copy runs on a monitor thread; stream ordering applies within one device only.
        try {
            return CompletableFuture.runAsync(() -> hostCopy(r, transfer), workers);
        } catch (RejectedExecutionException stoppedMeanwhile) {
            throw stopped("copyAsync(" + transfer + ", " + stream + ")");
        }
    }

    private record Route(DeviceMemoryManager src, DeviceMemoryManager dst, MemoryHandleInfo srcInfo,
                         MemoryHandleInfo dstInfo) {
        boolean sameManager() {
            return src == dst;
        }
    }

    private Route plan(MemoryTransfer transfer) {
        if (stopped) {
            throw stopped("a copy of " + transfer);
        }
        if (transfer == null) {
            throw new InvalidMemoryRequestException("Transfer is null");
        }
        DeviceMemoryManager src = route(transfer.src());
        DeviceMemoryManager dst = route(transfer.dst());
        if (src == dst) {
            return new Route(src, dst, null, null);
        }
        MemoryHandleInfo si = src.handleInfo(transfer.src()).orElseThrow(() ->
                new InvalidHandleException(transfer.src(), "Handle " + transfer.src() + " is no longer live on " + src.device()));
        MemoryHandleInfo di = dst.handleInfo(transfer.dst()).orElseThrow(() ->
                new InvalidHandleException(transfer.dst(), "Handle " + transfer.dst() + " is no longer live on " + dst.device()));
        checkRange(si, transfer.srcOffset(), transfer.size(), "source");
        checkRange(di, transfer.dstOffset(), transfer.size(), "destination");
        if (!(src instanceof AdvancedMemoryManager) || !(dst instanceof AdvancedMemoryManager)) {
            throw new InvalidMemoryRequestException("A copy from " + si.device() + " to " + di.device()
                    + " needs both managers to map memory (AdvancedMemoryManager)");
        }
        return new Route(src, dst, si, di);
    }

    private static void checkRange(MemoryHandleInfo info, long offset, long size, String what) {
        if (size > info.size() || offset > info.size() - size) {
            throw new InvalidMemoryRequestException("Copy of " + size + " bytes at " + what + " offset " + offset
                    + " falls outside " + what + " block " + info.handle() + " of " + info.size() + " bytes on " + info.device());
        }
    }

    /**
     * Copies between two managers through host-mapped views of both blocks, and closes only the views
     * it opened: a block the caller had mapped stays mapped.
     */
    private void hostCopy(Route r, MemoryTransfer t) {
        if (t.size() == 0) {
            return;
        }
        AdvancedMemoryManager src = (AdvancedMemoryManager) r.src;
        AdvancedMemoryManager dst = (AdvancedMemoryManager) r.dst;
        boolean srcWasMapped = r.srcInfo.mapped();
        MemorySegment from = src.mapMemory(t.src(), MemoryAccess.READ_ONLY);
        try {
            // Read after mapping the source, not before: the two handles of one MemoryMapping (two
            // managers, one block) share one mapping, so mapping the source mapped the destination
            // too, and unmapping both would close the shared views twice ("not mapped").
            boolean dstWasMapped = dst.handleInfo(t.dst()).map(MemoryHandleInfo::mapped).orElse(false);
            MemorySegment to = dst.mapMemory(t.dst(), MemoryAccess.WRITE_ONLY);
            try {
                MemorySegment.copy(from, t.srcOffset(), to, t.dstOffset(), t.size());
            } finally {
                if (!dstWasMapped) {
                    dst.unmapMemory(t.dst());
                }
            }
        } finally {
            if (!srcWasMapped) {
                src.unmapMemory(t.src());
            }
        }
    }

    // ================================================================ logging

    private void info(String message) {
        if (log != null) {
            log.info(message);
        }
    }

    private void warn(String message, Throwable cause) {
        if (log != null) {
            if (cause != null) {
                log.warn(message, cause);
            } else {
                log.warn(message);
            }
        }
    }
}
