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

    /**
     * {@inheritDoc}
     *
     * <p>Once {@code posix_memalign} has returned, the chunk is either handed out, counted, or
     * given back and not counted, whatever fails after it: any {@link Throwable}, not only a
     * runtime exception. A refresh of the cpu bundle can replace its wiring while an allocation
     * runs, and the first load of {@link Chunk} then fails with {@link NoClassDefFoundError}; the
     * chunk would reach no one (issue 13, defect 21). The throwable goes to the caller as it is.
     */
    @Override
    public DeviceChunk reserve(long bytes) {
        MemorySegment s = NativeMemory.allocate(bytes, CHUNK_ALIGNMENT).orElseThrow(() ->
                new OutOfDeviceMemoryException(device, bytes, 0, "posix_memalign could not provide "
                        + bytes + " bytes for " + device));
        held.addAndGet(bytes);
        try {
            return new Chunk(s);
        } catch (Throwable t) {
            try {
                NativeMemory.free(s);
                held.addAndGet(-bytes);
            } catch (Throwable notFreed) {
                // Still held, so still counted.
                t.addSuppressed(notFreed);
            }
            throw t;
        }
    }

    /**
     * {@inheritDoc}
     *
     * <p>The chunk's pages go back to MADV_NORMAL before {@code free}: advice a live block left on them
     * (a manager closed with hinted blocks; unadvise runs only at a block's free) would otherwise
     * stay with bytes that the C heap hands to its next caller. The bytes are counted off exactly
     * when {@code free} has run: nothing that can throw comes between the two. A release that fails before it frees (a chunk this class cannot read)
     * leaves them counted, because they are still held: the count is how a stopped backend proves
     * that it gave every byte back.
     */
    @Override
    public void release(DeviceChunk chunk) {
        MemorySegment s = ((Chunk) chunk).segment;
        long bytes = s.byteSize();
        try {
            // A live block's SEQUENTIAL or RANDOM (a manager closed with hinted blocks) would stay on
            // pages that the C heap keeps and hands to its next caller: back to MADV_NORMAL first.
            NativeMemory.advise(s, 0, bytes, NativeMemory.MADV_NORMAL);
        } finally {
            NativeMemory.free(s);
        }
        held.addAndGet(-bytes);
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

    /**
     * A hinted block was freed: SEQUENTIAL and RANDOM stay on the pages (the kernel's read-ahead
     * of the range) for whoever gets them next, so the range goes back to MADV_NORMAL. WILLNEED
     * leaves nothing behind.
     */
    @Override
    public void unadvise(DeviceChunk chunk, long offset, long bytes) {
        NativeMemory.advise(seg(chunk), offset, bytes, NativeMemory.MADV_NORMAL);
    }
}
