package io.ferrum.memory.cpu;

import java.lang.foreign.MemorySegment;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryUsageHint;
import io.ferrum.memory.api.OutOfDeviceMemoryException;
import io.ferrum.memory.pool.DeviceChunk;
import io.ferrum.memory.pool.DeviceUpstream;

/**
 * Host memory for the pool engine: chunks from {@code posix_memalign} (not zeroed: zeroing is the
 * engine's {@link io.ferrum.memory.pool.ZeroingPolicy}), copies and fills through {@link
 * MemorySegment}, hints and prefetch through {@code madvise} on Linux (no-ops elsewhere).
 *
 * <p>It counts the bytes it holds ({@link #heldBytes()}) so that a stopped backend can prove it gave
 * every byte back.
 */
final class FfmUpstream implements DeviceUpstream {
    /** Chunks are page-aligned: madvise works on whole pages and huge pages can back them. */
    static final long CHUNK_ALIGNMENT = 4096;

    private final Device device;
    private final long capacity;
    private final AtomicLong held;

    record Chunk(MemorySegment segment) implements DeviceChunk {
        @Override
        public long size() {
            return segment.byteSize();
        }

        @Override
        public long address() {
            return segment.address();
        }
    }

    /**
     * @param device   the logical host device
     * @param capacity bytes this device may use; 0 for all physical memory
     * @param held     where to count bytes held (shared by every upstream of the bundle)
     */
    FfmUpstream(Device device, long capacity, AtomicLong held) {
        this.device = device;
        long physical = NativeMemory.physicalMemory();
        if (physical <= 0) {
            physical = Runtime.getRuntime().maxMemory();
        }
        this.capacity = capacity > 0 ? capacity : physical;
        this.held = held;
    }

    long heldBytes() {
        return held.get();
    }

    @Override
    public Device device() {
        return device;
    }

    @Override
    public String backendName() {
        return "ffm";
    }

    @Override
    public long physicalCapacity() {
        return capacity;
    }

    @Override
    public long chunkAlignment() {
        return CHUNK_ALIGNMENT;
    }

    @Override
    public DeviceChunk reserve(long bytes) {
        MemorySegment s = NativeMemory.allocate(bytes, CHUNK_ALIGNMENT).orElseThrow(() ->
                new OutOfDeviceMemoryException(device, bytes, 0, "posix_memalign could not provide "
                        + bytes + " bytes for " + device));
        held.addAndGet(bytes);
        return new Chunk(s);
    }

    @Override
    public void release(DeviceChunk chunk) {
        MemorySegment s = ((Chunk) chunk).segment;
        NativeMemory.free(s);
        held.addAndGet(-s.byteSize());
    }

    private static MemorySegment seg(DeviceChunk c) {
        return ((Chunk) c).segment;
    }

    @Override
    public void copy(DeviceChunk src, long srcOffset, DeviceChunk dst, long dstOffset, long bytes) {
        // MemorySegment.copy copies overlapping ranges as if through a temporary: memmove semantics.
        MemorySegment.copy(seg(src), srcOffset, seg(dst), dstOffset, bytes);
    }

    @Override
    public void copyToHost(DeviceChunk src, long srcOffset, MemorySegment dst, long bytes) {
        MemorySegment.copy(seg(src), srcOffset, dst, 0, bytes);
    }

    @Override
    public void copyFromHost(MemorySegment src, DeviceChunk dst, long dstOffset, long bytes) {
        MemorySegment.copy(src, 0, seg(dst), dstOffset, bytes);
    }

    @Override
    public void fill(DeviceChunk chunk, long offset, long bytes, byte value) {
        seg(chunk).asSlice(offset, bytes).fill(value);
    }

    @Override
    public Optional<MemorySegment> hostSegment(DeviceChunk chunk) {
        return Optional.of(seg(chunk));
    }

    @Override
    public void prefetch(DeviceChunk chunk, long offset, long bytes, Device target) {
        // Host memory is already where the CPU is; WILLNEED asks the kernel to fault it in ahead of use.
        NativeMemory.advise(seg(chunk), offset, bytes, NativeMemory.MADV_WILLNEED);
    }

    @Override
    public void advise(DeviceChunk chunk, long offset, long bytes, MemoryUsageHint hint) {
        int advice = switch (hint) {
            case SEQUENTIAL -> NativeMemory.MADV_SEQUENTIAL;
            case RANDOM -> NativeMemory.MADV_RANDOM;
            case READ_MOSTLY, RESIDENT -> NativeMemory.MADV_WILLNEED;
            // TEMPORARY and WRITE_MOSTLY have no safe madvise: DONTNEED/FREE would drop contents.
            case TEMPORARY, WRITE_MOSTLY -> -1;
        };
        if (advice >= 0) {
            NativeMemory.advise(seg(chunk), offset, bytes, advice);
        }
    }
}
