package io.ferrum.memory.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Optional;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.pool.DeviceChunk;
import io.ferrum.memory.pool.DeviceUpstream;

/**
 * Host memory for the GPU suite's host device (the cpu bundle is not on this module's class path):
 * each chunk a native segment of its own shared arena, addressable by the CPU.
 */
final class HostArena implements DeviceUpstream {
    private record Chunk(Arena arena, MemorySegment segment) implements DeviceChunk {
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

    HostArena(Device device) {
        this.device = device;
    }

    private static MemorySegment seg(DeviceChunk c) {
        return ((Chunk) c).segment();
    }

    @Override
    public Device device() {
        return device;
    }

    @Override
    public String backendName() {
        return "test-host";
    }

    @Override
    public long physicalCapacity() {
        return 1L << 30;
    }

    @Override
    public long chunkAlignment() {
        return 4096;
    }

    @Override
    public DeviceChunk reserve(long bytes) {
        Arena arena = Arena.ofShared();
        return new Chunk(arena, arena.allocate(bytes, 4096));
    }

    @Override
    public void release(DeviceChunk chunk) {
        ((Chunk) chunk).arena().close();
    }

    @Override
    public void copy(DeviceChunk src, long srcOffset, DeviceChunk dst, long dstOffset, long bytes) {
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
    public void close() {
    }
}
