package io.ferrum.memory.monitor;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Optional;
import java.util.OptionalDouble;
import java.util.concurrent.CompletionStage;
import java.util.function.Consumer;

import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.HandleSpace;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryObserver;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.StreamHandle;

/**
 * A manager that allocates nothing: it has a device, a handle space, figures the test sets, and
 * whether it reports its own pressure. Everything else fails, so a test notices an unexpected call.
 */
class StubManager implements DeviceMemoryManager {
    final Device device;
    final HandleSpace space;
    final boolean reports;
    volatile MemoryInfo info;
    volatile MemoryObserver observer;

    StubManager(Device device, HandleSpace space, boolean reports, long total, long used) {
        this.device = device;
        this.space = space;
        this.reports = reports;
        figures(total, used);
    }

    /** A bounded space {@code prefix << 44} under the top 20 bits, as the pool lays out its ids. */
    static HandleSpace poolSpace(long number) {
        return new HandleSpace(number << 44, ~((1L << 44) - 1));
    }

    final void figures(long total, long used) {
        info = new MemoryInfo(total, used, total - used, total, 0, 0.0, OptionalDouble.empty());
    }

    @Override
    public Device device() {
        return device;
    }

    @Override
    public HandleSpace handleSpace() {
        return space;
    }

    @Override
    public MemoryInfo memoryInfo(Device d) {
        return info;
    }

    @Override
    public MemoryInfo quickInfo() {
        return info;
    }

    @Override
    public boolean addPressureObserver(MemoryObserver o) {
        if (reports) {
            observer = o;
        }
        return reports;
    }

    @Override
    public void removePressureObserver(MemoryObserver o) {
        if (observer == o) {
            observer = null;
        }
    }

    @Override
    public boolean owns(MemoryHandle handle) {
        return space.isBounded() && space.contains(handle.id());
    }

    @Override
    public MemoryHandle allocate(long size, MemoryType type, Device d) {
        throw new UnsupportedOperationException();
    }

    @Override
    public MemoryHandle allocateAligned(long size, long alignment, MemoryType type, Device d) {
        throw new UnsupportedOperationException();
    }

    @Override
    public void deallocate(MemoryHandle handle) {
        throw new UnsupportedOperationException();
    }

    @Override
    public void copy(MemoryHandle src, MemoryHandle dst, long size, long srcOffset, long dstOffset) {
        throw new UnsupportedOperationException();
    }

    @Override
    public CompletionStage<Void> copyAsync(MemoryTransfer transfer, StreamHandle stream) {
        throw new UnsupportedOperationException();
    }

    /** The last write or read routed here: "write h offset bytes" or "read h offset bytes". */
    volatile String lastData;

    @Override
    public void write(MemoryHandle dst, long dstOffset, MemorySegment src) {
        lastData = "write " + dst + " " + dstOffset + " " + src.byteSize();
    }

    @Override
    public void read(MemoryHandle src, long srcOffset, MemorySegment dst) {
        lastData = "read " + src + " " + srcOffset + " " + dst.byteSize();
    }

    @Override
    public CompletionStage<Void> writeAsync(MemoryHandle dst, long dstOffset, MemorySegment src, StreamHandle stream) {
        throw new UnsupportedOperationException();
    }

    @Override
    public CompletionStage<Void> readAsync(MemoryHandle src, long srcOffset, MemorySegment dst, StreamHandle stream) {
        throw new UnsupportedOperationException();
    }

    @Override
    public Optional<MemoryHandleInfo> handleInfo(MemoryHandle handle) {
        return Optional.empty();
    }

    @Override
    public List<MemoryHandleInfo> handles() {
        return List.of();
    }

    @Override
    public void configurePool(Device d, MemoryType type, MemoryPoolConfig config) {
        throw new UnsupportedOperationException();
    }

    @Override
    public MemoryPoolConfig poolConfig(MemoryType type) {
        throw new UnsupportedOperationException();
    }

    @Override
    public CompletionStage<DefragmentationStats> defragment(Device d) {
        throw new UnsupportedOperationException();
    }

    @Override
    public void setPressureCallback(Consumer<io.ferrum.memory.api.MemoryPressure> callback) {
        throw new UnsupportedOperationException();
    }

    @Override
    public void close() {
    }

    @Override
    public String toString() {
        return "stub of " + device + " " + space;
    }
}
