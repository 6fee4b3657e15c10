package io.ferrum.memory.pool.internal;

import java.lang.foreign.MemorySegment;

import io.ferrum.memory.pool.DeviceChunk;

/** A chunk reserved from the upstream, with the pool's bookkeeping for it (guarded by the pool lock). */
public final class PoolChunk {
    final DeviceChunk device;
    /** The chunk as host memory when the CPU addresses it directly ({@link io.ferrum.memory.pool.DeviceUpstream#hostSegment}); else null. */
    final MemorySegment host;
    final long size;
    /** Bytes of live blocks in this chunk. */
    long usedBytes;
    /** First block in address order. */
    Block first;
    /**
     * Set by the growth that added this chunk until its allocation has looked for its block again,
     * under the pool's lock: a trim (or auto-GC) does not give the chunk back meanwhile, or the
     * allocation would reserve another.
     */
    boolean keptForCarve;

    PoolChunk(DeviceChunk device, MemorySegment host) {
        this.device = device;
        this.host = host;
        this.size = device.size();
    }

    /** @return the upstream's chunk */
    public DeviceChunk device() {
        return device;
    }
}
