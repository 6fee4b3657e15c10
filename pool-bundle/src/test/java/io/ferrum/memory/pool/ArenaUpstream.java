package io.ferrum.memory.pool;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryUsageHint;
import io.ferrum.memory.api.OutOfDeviceMemoryException;

/**
 * A real upstream for the engine's tests: each chunk is real off-heap memory from its own shared
 * arena. With {@code hostAddressable=false} it hides its memory from the engine, as a GPU would,
 * so mapping must stage through host copies. It counts what it holds so tests can prove that
 * nothing leaks.
 */
public final class ArenaUpstream implements DeviceUpstream {
    record Chunk(Arena arena, MemorySegment segment) implements DeviceChunk {
        @Override
        public long size() {
            return segment.byteSize();
        }

        @Override
        public long address() {
            return segment.address();
        }
    }

    private final Device device;
    private final long capacity;
    private final boolean hostAddressable;
    final ConcurrentHashMap<Chunk, Boolean> live = new ConcurrentHashMap<>();
    final AtomicInteger reserves = new AtomicInteger();
    final AtomicInteger releases = new AtomicInteger();
    /** Calls of {@link #copy} (chunk to chunk, a peer's chunk included) and of the two host copies. */
    public final AtomicInteger deviceCopies = new AtomicInteger();
    public final AtomicInteger hostCopies = new AtomicInteger();
    volatile MemoryUsageHint lastHint;
    /** The range of the last {@link #advise}, as "chunkAddress+offset/bytes". */
    volatile String lastAdvisedRange;
    /** Every {@link #unadvise} range, in order, as "chunkAddress+offset/bytes". */
    final List<String> unadvised = new CopyOnWriteArrayList<>();
    volatile Device lastPrefetchTarget;
    volatile boolean closed;

    public ArenaUpstream(Device device, long capacity, boolean hostAddressable) {
        this.device = device;
        this.capacity = capacity;
        this.hostAddressable = hostAddressable;
    }

    public ArenaUpstream(long capacity) {
        this(Device.cpu(), capacity, true);
    }

    public long liveBytes() {
        return live.keySet().stream().mapToLong(Chunk::size).sum();
    }

    @Override
    public Device device() {
        return device;
    }

    @Override
    public String backendName() {
        return "test-arena";
    }

    @Override
    public long physicalCapacity() {
        return capacity;
    }

    @Override
    public long chunkAlignment() {
        return 4096;
    }

    @Override
    public DeviceChunk reserve(long bytes) {
        if (liveBytes() + bytes > capacity) {
            throw new OutOfDeviceMemoryException(device, bytes, capacity - liveBytes(), "test upstream full");
        }
        Arena arena = Arena.ofShared();
        Chunk c = new Chunk(arena, arena.allocate(bytes, 4096));
        live.put(c, Boolean.TRUE);
        reserves.incrementAndGet();
        return c;
    }

    @Override
    public void release(DeviceChunk chunk) {
        Chunk c = (Chunk) chunk;
        if (live.remove(c) == null) {
            throw new IllegalStateException("chunk released twice");
        }
        releases.incrementAndGet();
        c.arena.close();
    }

    private static MemorySegment seg(DeviceChunk c) {
        return ((Chunk) c).segment;
    }

    @Override
    public void copy(DeviceChunk src, long srcOffset, DeviceChunk dst, long dstOffset, long bytes) {
        deviceCopies.incrementAndGet();
        MemorySegment.copy(seg(src), srcOffset, seg(dst), dstOffset, bytes);
    }

    @Override
    public void copyToHost(DeviceChunk src, long srcOffset, MemorySegment dst, long bytes) {
        hostCopies.incrementAndGet();
        MemorySegment.copy(seg(src), srcOffset, dst, 0, bytes);
    }

    @Override
    public void copyFromHost(MemorySegment src, DeviceChunk dst, long dstOffset, long bytes) {
        hostCopies.incrementAndGet();
        MemorySegment.copy(src, 0, seg(dst), dstOffset, bytes);
    }

    @Override
    public void fill(DeviceChunk chunk, long offset, long bytes, byte value) {
        seg(chunk).asSlice(offset, bytes).fill(value);
    }

    @Override
    public Optional<MemorySegment> hostSegment(DeviceChunk chunk) {
        return hostAddressable ? Optional.of(seg(chunk)) : Optional.empty();
    }

    @Override
    public void prefetch(DeviceChunk chunk, long offset, long bytes, Device target) {
        lastPrefetchTarget = target;
    }

    @Override
    public void advise(DeviceChunk chunk, long offset, long bytes, MemoryUsageHint hint) {
        lastHint = hint;
        lastAdvisedRange = chunk.address() + "+" + offset + "/" + bytes;
    }

    @Override
    public void unadvise(DeviceChunk chunk, long offset, long bytes) {
        unadvised.add(chunk.address() + "+" + offset + "/" + bytes);
    }

    @Override
    public void close() {
        closed = true;
    }
}
