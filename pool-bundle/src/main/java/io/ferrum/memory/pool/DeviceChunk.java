package io.ferrum.memory.pool;

import org.osgi.annotation.versioning.ConsumerType;

/**
 * One contiguous range of device memory reserved from a {@link DeviceUpstream}. The engine carves
 * blocks out of it and hands it back to the same upstream's methods; only that upstream looks
 * inside it.
 */
@ConsumerType
public interface DeviceChunk {

    /** @return bytes in the chunk, more than zero */
    long size();

    /**
     * @return the chunk's start address in the device's address space; the engine uses it only to
     *         align blocks, so it must be at least {@link DeviceUpstream#chunkAlignment()}-aligned
     */
    long address();
}
