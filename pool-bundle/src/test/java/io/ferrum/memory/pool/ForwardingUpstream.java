package io.ferrum.memory.pool;

import java.lang.foreign.MemorySegment;
import java.util.Optional;

import io.ferrum.memory.api.Device;

/**
 * An upstream that hands every call to {@code real}: a test overrides the one call it makes fail or
 * wait. It forwards the calls every upstream implements, {@code hostSegment} and {@code close}; the
 * rest (a typed reserve, hints) keep the SPI's defaults.
 */
public abstract class ForwardingUpstream implements DeviceUpstream {
    protected final DeviceUpstream real;

    protected ForwardingUpstream(DeviceUpstream real) {
        this.real = real;
    }

    @Override
    public Device device() {
        return real.device();
    }

    @Override
    public String backendName() {
        return real.backendName();
    }

    @Override
    public long physicalCapacity() {
        return real.physicalCapacity();
    }

    @Override
    public long chunkAlignment() {
        return real.chunkAlignment();
    }

    @Override
    public DeviceChunk reserve(long bytes) {
        return real.reserve(bytes);
    }

    @Override
    public void release(DeviceChunk chunk) {
        real.release(chunk);
    }

    @Override
    public void copy(DeviceChunk src, long srcOffset, DeviceChunk dst, long dstOffset, long bytes) {
        real.copy(src, srcOffset, dst, dstOffset, bytes);
    }

    @Override
    public void copyToHost(DeviceChunk src, long srcOffset, MemorySegment dst, long bytes) {
        real.copyToHost(src, srcOffset, dst, bytes);
    }

    @Override
    public void copyFromHost(MemorySegment src, DeviceChunk dst, long dstOffset, long bytes) {
        real.copyFromHost(src, dst, dstOffset, bytes);
    }

    @Override
    public void fill(DeviceChunk chunk, long offset, long bytes, byte value) {
        real.fill(chunk, offset, bytes, value);
    }

    @Override
    public Optional<MemorySegment> hostSegment(DeviceChunk chunk) {
        return real.hostSegment(chunk);
    }

    @Override
    public void close() {
        real.close();
    }
}
