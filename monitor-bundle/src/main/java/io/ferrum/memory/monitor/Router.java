package io.ferrum.memory.monitor;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.RejectedExecutionException;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryRouter;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.OutOfDeviceMemoryException;
import io.ferrum.memory.api.StagingConflictException;
import io.ferrum.memory.api.StreamHandle;

/**
 * The {@link MemoryRouter}: asks the active strategy which device gets an allocation, and sends every
 * call on a handle to the manager that issued it.
 *
 * <p>Allocation has two paths. The fast one decides on the calling thread's routing snapshot
 * ({@link RoutingSnapshots}) and tries the chosen device once. Anything unusual (the device ran out
 * of memory, went away or refused the request by its own limits, no snapshot device answers) goes to the full path: fresh figures of every
 * device, and up to {@code maxAttempts} choices, each failed device left out and the strategy asked
 * again. Calls on a handle find its manager through {@link DeviceRegistry#ownerOf}.
 *
 * <p>Invariants: the strategy, a plugin, is given unmodifiable views and whatever it does (throws,
 * answers null, picks a device it was not offered) fails that call with a {@link MemoryException}
 * naming it, never another error, and nothing is allocated; once the monitor is stopped every call is
 * refused ({@link RunState}). Failures are built outside the hot methods, so that those inline whole.
 */
final class Router implements MemoryRouter {
    /**
     * The classes a routed call needs only on a rare path (a refusal's message, a copy between two
     * managers, the level of a manager that does not report its own, a change of level an observer's
     * full lane drops), loaded when the first router is made: four of this bundle, and the API's that
     * those paths name. A router a caller kept serves it until the refresh, also while Equinox uninstalls
     * this bundle or the api, and Equinox then refuses to load a class of the bundle being uninstalled
     * ("Module has been uninstalled"), even one of the api it defined long before, the first time this
     * bundle's loader asks for it (its lazy-start check comes first). Every other class a call needs
     * is loaded by the activation; the monitor imports only the API, so the pool's
     * {@code BundleClasses} is not at hand. MonitorIT fails on a class left out.
     */
    static final List<Class<?>> LOADED_EARLY = List.of(Bytes.class, CrossDeviceCopier.Route.class,
            PressureLevels.Source.class, ObserverNotifier.Dropped.class, MemoryHandleInfo.class, AdvancedMemoryManager.class, MemoryAccess.class, MemoryType.class,
            StagingConflictException.class);

    private final DeviceRegistry registry;
    private final StrategyRegistry strategies;
    private final RoutingSnapshots snapshots;
    private final CrossDeviceCopier copier;
    private final RunState state;
    private volatile int maxAttempts = 4;

    Router(DeviceRegistry registry, StrategyRegistry strategies, RoutingSnapshots snapshots, CrossDeviceCopier copier,
           RunState state) {
        this.registry = registry;
        this.strategies = strategies;
        this.snapshots = snapshots;
        this.copier = copier;
        this.state = state;
    }

    /**
     * Drops every thread's snapshot: the devices changed (see {@link RoutingSnapshots#clear(Map)}).
     * Serialised, and the map read inside: two changes of two devices at once then leave the snapshots
     * keyed to the registry's last map, never to an earlier one (which would make every routed call
     * read fresh figures, and keep a departed manager reachable, until the next change).
     */
    synchronized void devicesChanged() {
        snapshots.clear(registry.active());
    }

    /** @param attempts devices a routed allocation may try; at least one */
    void maxAttempts(int attempts) {
        maxAttempts = Math.max(1, attempts);
    }

    /** @return the devices a routed allocation may try, as last configured */
    int maxAttempts() {
        return maxAttempts;
    }

    @Override
    public Optional<String> activeStrategy() {
        if (state.isStopped()) {
            throw RunState.refusal("activeStrategy()");
        }
        StrategyRegistry.Entry e = strategies.active();
        return e == null ? Optional.empty() : Optional.of(e.name());
    }

    @Override
    public MemoryHandle allocate(long size, AllocationRequirements requirements) {
        StrategyRegistry.Entry strategy = strategies.active();
        if (size <= 0 || requirements == null || strategy == null || state.isStopped()) {
            throw cannotRoute(size, requirements, strategy);
        }
        // Fast path: decide on the recent figures; anything unusual goes to the full path below.
        Map<Device, DeviceMemoryManager> active = registry.active();
        RoutingSnapshots.Routing r = snapshots.current(active);
        Device first = null;
        String firstFailure = null;
        RuntimeException firstError = null;
        if (!r.devices().isEmpty()) {
            Optional<Device> choice = select(strategy, size, requirements, r.devices(), r.infos());
            if (choice.isPresent()) {
                Device d = choice.get();
                DeviceMemoryManager m = r.managerOf(d);
                if (m == null) {
                    throw notOffered(strategy, d, r.devices());
                }
                try {
                    return allocateOn(m, d, size, requirements);
                } catch (OutOfDeviceMemoryException | DeviceUnavailableException e) {
                    snapshots.invalidate();
                    first = d;
                    firstFailure = d + " (" + e.getMessage() + ")";
                    firstError = e;
                } catch (InvalidMemoryRequestException refused) {
                    // Beyond this device's own limits (a pool's maxSize, its largest chunk for an
                    // alignment): another device may take it. The figures did not mislead: no invalidation.
                    first = d;
                    firstFailure = d + " (" + refused.getMessage() + ")";
                    firstError = refused;
                }
            }
        }
        if (active.isEmpty()) {
            throw noDevice(size, requirements);
        }
        return allocateFresh(size, requirements, strategy, active, first, firstFailure, firstError);
    }

    /** The checks of {@link #allocate}, in order, once one of them failed. */
    private RuntimeException cannotRoute(long size, AllocationRequirements requirements, StrategyRegistry.Entry strategy) {
        if (state.isStopped()) {
            return RunState.refusal("allocate(" + size + ", " + requirements + ")");
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

    /** @return why {@link #allocate} found no device */
    private RuntimeException noDevice(long size, AllocationRequirements requirements) {
        if (state.isStopped()) { // stopped meanwhile: DS unbinds every device after deactivation
            return RunState.refusal("allocate(" + size + ", " + requirements + ")");
        }
        return new DeviceUnavailableException(null, "No memory device is available: install and start a backend"
                + " bundle (for example io.ferrum.memory.cpu)");
    }

    private static MemoryException notOffered(StrategyRegistry.Entry strategy, Device d, List<Device> offered) {
        return new MemoryException("Allocation strategy " + strategy.name() + " chose " + d
                + ", which was not among the devices offered " + offered + "; nothing was allocated. A strategy"
                + " returns one of the devices it is given: fix the strategy, or make another one active");
    }

    /**
     * Asks the strategy, a plugin: whatever it throws (a bug, or a {@link LinkageError} once its bundle
     * was refreshed under it) fails this call with a {@link MemoryException} naming it; only a {@link
     * VirtualMachineError} passes as it is.
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
            throw new MemoryException("Allocation strategy " + strategy.name() + " answered null for "
                    + Bytes.count(size) + " instead of an Optional; nothing was allocated. A strategy returns"
                    + " Optional.empty() when no device suits: fix the strategy, or make another one active");
        }
        return choice;
    }

    private static MemoryException strategyFailed(StrategyRegistry.Entry strategy, long size, Throwable e) {
        return new MemoryException("Allocation strategy " + strategy.name() + " failed choosing a device for "
                + Bytes.count(size) + " (" + e + "); nothing was allocated. Fix or restart the strategy's bundle,"
                + " or make another strategy active (configuration 'strategy' of " + MemoryMonitor.PID + ")", e);
    }

    private static MemoryHandle allocateOn(DeviceMemoryManager m, Device d, long size, AllocationRequirements requirements) {
        return requirements.alignment().isPresent()
                ? m.allocateAligned(size, requirements.alignment().getAsLong(), requirements.memoryType(), d)
                : m.allocate(size, requirements.memoryType(), d);
    }

    /**
     * The full path: fresh figures of every device, and up to maxAttempts choices, skipping {@code
     * triedFirst}. A device that runs out of memory, goes away or refuses the request by its own limits
     * ({@link InvalidMemoryRequestException}: a pool's maxSize, its largest chunk for an alignment) is
     * left out and the strategy asked again. The failure says the worst that happened: out of memory
     * on some device, else refused by every device that answered, else no device answered.
     */
    private MemoryHandle allocateFresh(long size, AllocationRequirements requirements, StrategyRegistry.Entry strategy,
                                       Map<Device, DeviceMemoryManager> active, Device triedFirst, String firstFailure,
                                       RuntimeException firstError) {
        Map<Device, MemoryInfo> infos = Collections.unmodifiableMap(snapshots.figures(active));
        snapshots.install(active, infos);
        List<Device> candidates = new ArrayList<>(infos.keySet());
        List<String> tried = new ArrayList<>();
        int attempt = 0;
        boolean outOfMemory = firstError instanceof OutOfDeviceMemoryException;
        boolean refused = firstError instanceof InvalidMemoryRequestException;
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
            try {
                return allocateOn(active.get(d), d, size, requirements);
            } catch (OutOfDeviceMemoryException | DeviceUnavailableException | InvalidMemoryRequestException e) {
                tried.add(d + " (" + e.getMessage() + ")");
                outOfMemory |= e instanceof OutOfDeviceMemoryException;
                refused |= e instanceof InvalidMemoryRequestException;
            }
        }
        if (!outOfMemory && refused) {
            throw new InvalidMemoryRequestException("No device accepts an allocation of " + Bytes.count(size) + " ("
                    + inWords(requirements) + "): tried " + tried + (candidates.isEmpty() ? "" : "; not tried " + candidates)
                    + ". Ask for less, or raise the limits named (configurePool)");
        }
        if (!outOfMemory && (!tried.isEmpty() || infos.isEmpty())) {
            if (state.isStopped()) { // stopped meanwhile: DS unbinds every device after deactivation
                throw RunState.refusal("allocate(" + size + ", " + requirements + ")");
            }
            // Nothing ran out of memory: every device tried had gone away, or none answers.
            throw new DeviceUnavailableException(null, "No device is available to allocate " + Bytes.count(size) + ": "
                    + (tried.isEmpty() ? "none of " + active.keySet() + " answers" : "tried " + tried
                    + (candidates.isEmpty() ? "" : "; not tried " + candidates)));
        }
        long maxFree = infos.values().stream().mapToLong(MemoryInfo::freeBytes).max().orElse(0);
        throw new OutOfDeviceMemoryException(null, size, maxFree, "No device could allocate " + Bytes.count(size)
                + " with strategy " + strategy.name() + (tried.isEmpty() ? ": it chose none of " + infos.keySet()
                : "; tried " + tried + (candidates.isEmpty() ? "" : "; not tried " + candidates))
                + ". Free memory or add a device");
    }

    /**
     * @return what a request asks for, as a person reads it: {@code TENSOR, alignment 4096 bytes,
     *         preferring [cpu:1], critical}; the record's {@code toString()} would print every field
     *         with Java's spelling of an absent one ({@code OptionalLong.empty})
     */
    static String inWords(AllocationRequirements requirements) {
        StringBuilder sb = new StringBuilder(requirements.memoryType().name());
        requirements.alignment().ifPresent(a -> sb.append(", alignment ").append(Bytes.count(a)));
        if (!requirements.preferredDevices().isEmpty()) {
            sb.append(", preferring ").append(requirements.preferredDevices());
        }
        if (requirements.critical()) {
            sb.append(", critical");
        }
        return sb.toString();
    }

    private DeviceMemoryManager route(MemoryHandle handle) {
        if (handle != null && handle.isValid()) {
            DeviceMemoryManager m = registry.ownerOf(handle);
            if (m != null) {
                return m;
            }
        }
        throw unroutable(handle);
    }

    /** @return why {@code handle} has no manager (kept out of {@link #route}, so that it inlines) */
    private RuntimeException unroutable(MemoryHandle handle) {
        if (state.isStopped()) {
            // Checked first: DS unbinds the managers after deactivation, and a handle of a manager that
            // is still running would look like one of a manager that went away.
            return RunState.refusal("a call on handle " + handle);
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
        if (state.isStopped()) {
            throw RunState.refusal("deallocate(" + handle + ")");
        }
        route(handle).deallocate(handle);
    }

    @Override
    public void write(MemoryHandle dst, long dstOffset, MemorySegment src) {
        if (state.isStopped()) {
            throw RunState.refusal("write(" + dst + ")");
        }
        route(dst).write(dst, dstOffset, src);
    }

    @Override
    public void read(MemoryHandle src, long srcOffset, MemorySegment dst) {
        if (state.isStopped()) {
            throw RunState.refusal("read(" + src + ")");
        }
        route(src).read(src, srcOffset, dst);
    }

    @Override
    public Optional<MemoryHandleInfo> handleInfo(MemoryHandle handle) {
        if (state.isStopped()) {
            throw RunState.refusal("handleInfo(" + handle + ")");
        }
        if (handle == null || !handle.isValid()) {
            return Optional.empty();
        }
        DeviceMemoryManager m = registry.ownerOf(handle);
        return m == null ? Optional.empty() : m.handleInfo(handle);
    }

    @Override
    public Optional<Device> owner(MemoryHandle handle) {
        if (state.isStopped()) {
            throw RunState.refusal("owner(" + handle + ")");
        }
        return handleInfo(handle).map(MemoryHandleInfo::device);
    }

    @Override
    public void copy(MemoryTransfer transfer) {
        CrossDeviceCopier.Route r = plan(transfer);
        if (r.sameManager()) {
            try {
                r.src().copy(transfer.src(), transfer.dst(), transfer.size(), transfer.srcOffset(), transfer.dstOffset());
            } catch (StagingConflictException refused) {
                copyStaged(r.src(), transfer);
            }
        } else {
            copier.copy(r, transfer);
        }
    }

    /**
     * A copy within one manager that refused it as held through a host staging copy. When a {@code
     * withMapped} action of the calling thread holds either block so (memory the CPU cannot address),
     * the action's copy is the block for this thread: the manager's device copy would neither read it
     * nor survive its write-back, where its {@code read} and {@code write} share it. Its {@code
     * copyToPeer} with itself as target says so (false, having changed nothing), and the bytes then go
     * through host memory as between two devices ({@link CrossDeviceCopier}), as a copy nested so between
     * two GPUs already did. Otherwise it copies, or refuses again (another call holds a block: a mapping,
     * another thread's action), and that answer stands. The fast path pays nothing for it: only a refusal
     * comes here.
     */
    private void copyStaged(DeviceMemoryManager m, MemoryTransfer transfer) {
        if (!m.copyToPeer(transfer, m)) {
            copier.copy(copier.plan(transfer, m, m), transfer);
        }
    }

    @Override
    public CompletionStage<Void> copyAsync(MemoryTransfer transfer, StreamHandle stream) {
        CrossDeviceCopier.Route r = plan(transfer);
        if (r.sameManager()) {
            return r.src().copyAsync(transfer, stream);
        }
        try {
            return copier.copyAsync(r, transfer, stream);
        } catch (RejectedExecutionException stoppedMeanwhile) {
            throw RunState.refusal("copyAsync(" + transfer + ", " + stream + ")");
        }
    }

    private CrossDeviceCopier.Route plan(MemoryTransfer transfer) {
        if (state.isStopped()) {
            throw RunState.refusal("a copy of " + transfer);
        }
        if (transfer == null) {
            throw new InvalidMemoryRequestException("Transfer is null");
        }
        DeviceMemoryManager src = route(transfer.src());
        DeviceMemoryManager dst = route(transfer.dst());
        return src == dst ? new CrossDeviceCopier.Route(src, dst, null, null) : copier.plan(transfer, src, dst);
    }
}
