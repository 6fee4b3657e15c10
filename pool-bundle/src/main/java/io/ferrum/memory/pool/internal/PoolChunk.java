package io.ferrum.memory.pool.internal;

import io.ferrum.memory.pool.DeviceChunk;

/** A chunk reserved from the upstream, with the pool's bookkeeping for it (guarded by the pool lock). */
public final class PoolChunk {
    final DeviceChunk device;
    final long size;
    /** Bytes of live blocks in this chunk. */
    long usedBytes;
    /** First block in address order. */
    Block first;

    PoolChunk(DeviceChunk device) {
        this.device = device;
        this.size = device.size();
    }

    /** @return the upstream's chunk */
    public DeviceChunk device() {
        return device;
    }
}
