package io.ferrum.memory.pool;

import java.lang.foreign.MemorySegment;
import java.util.Optional;

import org.osgi.annotation.versioning.ConsumerType;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.MemoryUsageHint;
import io.ferrum.memory.api.OutOfDeviceMemoryException;

/**
 * What a device must provide so that the pool engine can manage its memory: raw primitives only.
 * Everything else (handles, sub-allocation, alignment, growth, limits, statistics, compaction,
 * mapping, pressure) is the engine's.
 *
 * <p>The engine calls these methods without holding its allocation locks, except for the copies of
 * a defragmentation run, and never on a chunk it has released. Offsets and lengths it passes are
 * always within the chunk. Implementations must be thread-safe.
 */
@ConsumerType
public interface DeviceUpstream extends AutoCloseable {

    /** @return the device this upstream reserves memory on */
    Device device();

    /** @return a short backend name for service properties and messages, for example {@code ffm} */
    String backendName();

    /** @return bytes of memory the device has in all (the capacity before any limit is configured) */
    long physicalCapacity();

    /** @return the alignment every chunk's {@link DeviceChunk#address()} honours, a power of two */
    long chunkAlignment();

    /**
     * Reserves a chunk. Its contents need not be zeroed.
     *
     * @param bytes more than zero, a multiple of {@link #chunkAlignment()}
     * @return the chunk
     * @throws OutOfDeviceMemoryException if the device cannot provide it
     */
    DeviceChunk reserve(long bytes);

    /**
     * Reserves a chunk for the pool of one memory type: the engine always calls this form, so that a
     * device whose memory types are different kinds of memory (a GPU: device memory, page-locked
     * host memory for PINNED, managed memory for MAPPED) can give each pool its kind. Its contents
     * need not be zeroed. Default: {@link #reserve(long)}, the same memory for every type.
     *
     * @param bytes more than zero, a multiple of {@link #chunkAlignment()}
     * @param type  the memory type of the pool the chunk is for
     * @return the chunk
     * @throws OutOfDeviceMemoryException if the device cannot provide it
     * @since 2.1
     */
    default DeviceChunk reserve(long bytes, MemoryType type) {
        return reserve(bytes);
    }

    /**
     * Gives a chunk back. Called once per chunk; the engine holds no view of it any more.
     *
     * @param chunk a chunk from {@link #reserve}
     */
    void release(DeviceChunk chunk);

    /**
     * Copies bytes between two chunk ranges (possibly the same chunk); overlapping ranges must
     * behave like {@code memmove}. Either chunk may be a peer's (another device's upstream of the
     * same backend, found through {@link PoolSettings#peers()}): a copy of a mapping's alias, or
     * {@link io.ferrum.memory.api.DeviceMemoryManager#copyToPeer}; the engine calls the upstream of
     * the source's manager then, and the peer's chunk stays reserved until the call returns.
     */
    void copy(DeviceChunk src, long srcOffset, DeviceChunk dst, long dstOffset, long bytes);

    /** Copies bytes from a chunk range into host memory. */
    void copyToHost(DeviceChunk src, long srcOffset, MemorySegment dst, long bytes);

    /** Copies bytes from host memory into a chunk range. */
    void copyFromHost(MemorySegment src, DeviceChunk dst, long dstOffset, long bytes);

    /** Sets every byte of a chunk range to {@code value}. */
    void fill(DeviceChunk chunk, long offset, long bytes, byte value);

    /**
     * @param chunk a chunk from {@link #reserve}
     * @return the chunk as host memory, when the CPU can address it directly (host RAM, unified
     *         memory); empty when mapping must stage through a host copy. The segment's own scope is
     *         not used: the engine makes bounded views of it for each mapping.
     */
    default Optional<MemorySegment> hostSegment(DeviceChunk chunk) {
        return Optional.empty();
    }

    /**
     * A hint to move a range close to {@code target} ahead of use. Default: no-op.
     */
    default void prefetch(DeviceChunk chunk, long offset, long bytes, Device target) {
    }

    /**
     * Passes a usage hint for a range to the device. Default: no-op. Advice that stays with the
     * memory (not with the block) must be undone in {@link #unadvise}.
     */
    default void advise(DeviceChunk chunk, long offset, long bytes, MemoryUsageHint hint) {
    }

    /**
     * The block at this range, which was given a usage hint ({@link #advise}), is freed: undo every
     * advice {@link #advise} may have left on the range, so that the next owner of these bytes does
     * not inherit it. The engine calls it once per freed hinted block, after the block's last pin
     * and before its bytes can go to another allocation, without holding its locks; when
     * defragmentation moves a hinted block, for its old place (then, as the move's copy, under the
     * pool's lock), followed by {@link #advise} at its new place; and before it advises a block that
     * has another hint already (a new hint's advice need not replace the old one), without its
     * locks, a failure then going to the caller of setUsageHint, the block keeping its old hint.
     * Otherwise a failure is logged and the block is given back (or stays moved) all the same:
     * hints never change contents. Default: no-op.
     *
     * @param chunk  the block's chunk
     * @param offset the block's offset in the chunk
     * @param bytes  the block's bytes, as passed to {@link #advise}
     * @since 2.4
     */
    default void unadvise(DeviceChunk chunk, long offset, long bytes) {
    }

    /** Releases what the upstream itself holds; called after every chunk was released. */
    @Override
    default void close() {
    }
}
