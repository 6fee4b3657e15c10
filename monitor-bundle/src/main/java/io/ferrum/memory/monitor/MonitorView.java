package io.ferrum.memory.monitor;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletionStage;
import java.util.function.Consumer;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.api.MemoryRouter;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.StreamHandle;

/**
 * One bundle's view of the {@link MemoryMonitor}, made by {@link MonitorViews}: every call goes to
 * the one monitor, and the view remembers what its bundle registered there (managers by hand, the
 * global callback) so that {@link #release} undoes it when the bundle lets the service go.
 *
 * <p>Invariant: a registration is made and remembered under this view's lock, and the view refuses new
 * ones once released, so none outlives the release (a thread of the stopping bundle that still holds
 * the view cannot leave one behind). Release removes only what is still this bundle's: a manager that
 * {@code unregisterManager} removed meanwhile, and anything registered by another bundle since, stay.
 */
final class MonitorView implements GlobalMemoryMonitor, MemoryRouter {
    private final MemoryMonitor monitor;
    private final String user;
    /** Guarded by this: the managers this bundle registered by hand, some perhaps removed since. */
    private final List<DeviceRegistry.Entry> byHand = new ArrayList<>();
    /** Guarded by this. */
    private boolean released;

    /** @param user the bundle whose view it is, as refusals name it */
    MonitorView(MemoryMonitor monitor, String user) {
        this.monitor = monitor;
        this.user = user;
    }

    /** Undoes what this bundle registered that is still its own; later registrations through this view are refused. */
    void release() {
        List<DeviceRegistry.Entry> mine;
        synchronized (this) {
            released = true;
            mine = List.copyOf(byHand);
            byHand.clear();
            monitor.releaseGlobalPressureCallback(this);
        }
        for (DeviceRegistry.Entry e : mine) {
            monitor.releaseByHand(e);
        }
    }

    private DeviceUnavailableException releasedRefusal(String call) {
        return new DeviceUnavailableException(null, call + " was not carried out: " + user + " released its "
                + "GlobalMemoryMonitor service, and what it registered there was undone; get the service again");
    }

    // GlobalMemoryMonitor: the registrations are remembered

    @Override
    public void registerManager(Device device, DeviceMemoryManager manager) {
        synchronized (this) {
            if (released) {
                throw releasedRefusal("registerManager(" + device + ", " + manager + ")");
            }
            byHand.removeIf(e -> !monitor.holdsByHand(e));
            byHand.add(monitor.registerByHand(device, manager));
        }
    }

    @Override
    public void unregisterManager(Device device) {
        monitor.unregisterManager(device);
    }

    @Override
    public synchronized void setGlobalPressureCallback(Consumer<Map<Device, MemoryPressure>> callback) {
        if (released) {
            throw releasedRefusal("setGlobalPressureCallback(" + callback + ")");
        }
        monitor.setGlobalPressureCallback(this, callback);
    }

    // GlobalMemoryMonitor: the rest as the monitor answers

    @Override
    public Map<Device, MemoryInfo> globalMemoryInfo() {
        return monitor.globalMemoryInfo();
    }

    @Override
    public MemoryPressure globalMemoryPressure() {
        return monitor.globalMemoryPressure();
    }

    @Override
    public Set<Device> devices() {
        return monitor.devices();
    }

    @Override
    public Optional<DeviceMemoryManager> manager(Device device) {
        return monitor.manager(device);
    }

    @Override
    public CompletionStage<Map<Device, DefragmentationStats>> globalGc() {
        return monitor.globalGc();
    }

    // MemoryRouter

    @Override
    public MemoryHandle allocate(long size, AllocationRequirements requirements) {
        return monitor.allocate(size, requirements);
    }

    @Override
    public void deallocate(MemoryHandle handle) {
        monitor.deallocate(handle);
    }

    @Override
    public void copy(MemoryTransfer transfer) {
        monitor.copy(transfer);
    }

    @Override
    public CompletionStage<Void> copyAsync(MemoryTransfer transfer, StreamHandle stream) {
        return monitor.copyAsync(transfer, stream);
    }

    @Override
    public void write(MemoryHandle dst, long dstOffset, MemorySegment src) {
        monitor.write(dst, dstOffset, src);
    }

    @Override
    public void read(MemoryHandle src, long srcOffset, MemorySegment dst) {
        monitor.read(src, srcOffset, dst);
    }

    @Override
    public Optional<MemoryHandleInfo> handleInfo(MemoryHandle handle) {
        return monitor.handleInfo(handle);
    }

    @Override
    public Optional<Device> owner(MemoryHandle handle) {
        return monitor.owner(handle);
    }

    @Override
    public Optional<String> activeStrategy() {
        return monitor.activeStrategy();
    }

    @Override
    public String toString() {
        return "the view of " + user + " of the memory monitor";
    }
}
