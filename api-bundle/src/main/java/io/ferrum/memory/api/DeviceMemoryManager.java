package io.ferrum.memory.api;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletionStage;
import java.util.function.Consumer;

import org.osgi.annotation.versioning.ProviderType;

/**
 * Raw memory operations on one device: allocate, free, copy, inspect, configure pools,
 * defragment, and be told of pressure changes.
 *
 * <p>A backend registers one manager per device as an OSGi service with the service properties
 * {@value #DEVICE_PROPERTY} (the device, as {@link Device#toString()}), {@value
 * #DEVICE_KIND_PROPERTY} and {@value #BACKEND_PROPERTY}. Methods that take a {@link Device}
 * accept only {@link #device()}, so that code written against the seed's multi-device signatures
 * stays explicit about where memory goes.
 *
 * <p><b>Thread safety:</b> every method may be called from any thread at any time.
 *
 * <p><b>Errors:</b> a failed call changes nothing and throws a subtype of {@link
 * MemoryException}: {@link InvalidMemoryRequestException} for bad sizes, alignments, offsets or
 * devices; {@link InvalidHandleException} for zero, freed, stale or foreign handles; {@link
 * OutOfDeviceMemoryException} when the pool or device is full; {@link DeviceUnavailableException}
 * once the manager is closed or its device is gone.
 *
 * <p><b>Mapped blocks of memory the CPU cannot address</b> (a GPU's): while {@link
 * AdvancedMemoryManager#mapMemory} holds a block through a host staging copy, from the start of
 * that copy to the end of the write-back of {@link AdvancedMemoryManager#unmapMemory}, every other
 * call that moves the block's bytes ({@link #read}, {@link #write}, their asynchronous forms, {@link
 * #copy}, {@link #copyAsync} and {@link #copyToPeer} with the block on either side) is refused with
 * {@link StagingConflictException} and changes nothing: it would read the device's bytes, older than
 * the views', or write bytes the write-back overwrites. Unmap the block first. A {@link
 * AdvancedMemoryManager#withMapped} action on such memory holds its block the same way for its
 * duration: another thread's call on the block, and any copy with it on either side, is refused
 * with {@link StagingConflictException} meanwhile, except that while only READ_ONLY actions hold it
 * other threads' {@link #read}s (and READ_ONLY actions) go on. Host memory has no staging copy: its
 * views are the memory itself, and these calls see them.
 */
@ProviderType
public interface DeviceMemoryManager extends AutoCloseable {

    /** Service property: the device this manager serves, as {@code kind:index}. */
    String DEVICE_PROPERTY = "memory.device";
    /** Service property: the device's kind ({@code cpu}, {@code cuda}, ...). */
    String DEVICE_KIND_PROPERTY = "memory.device.kind";
    /** Service property: the backend's name ({@code ffm}, {@code jcuda}, ...). */
    String BACKEND_PROPERTY = "memory.backend";

    /** @return the device this manager serves */
    Device device();

    /**
     * Allocates {@code size} bytes of {@link MemoryType#GENERAL} memory at the pool's alignment.
     *
     * @param size   bytes, more than zero
     * @param device must be {@link #device()}
     * @return the handle of the new block
     */
    default MemoryHandle allocate(long size, Device device) {
        return allocate(size, MemoryType.GENERAL, device);
    }

    /**
     * Allocates {@code size} bytes from the pool of {@code type}, at that pool's alignment.
     *
     * @param size   bytes, more than zero
     * @param type   the pool, not null
     * @param device must be {@link #device()}
     * @return the handle of the new block
     * @throws InvalidMemoryRequestException  on a size of zero or less, more than the device or the
     *                                        pool's maximum, or a wrong device
     * @throws OutOfDeviceMemoryException     when the pool cannot hold it (full, may not grow)
     */
    MemoryHandle allocate(long size, MemoryType type, Device device);

    /**
     * Allocates {@code size} bytes of {@link MemoryType#GENERAL} memory whose address is a multiple
     * of {@code alignment} (and of the pool's alignment).
     *
     * @param size      bytes, more than zero
     * @param alignment bytes, a power of two, at most the pool's chunk size
     * @param device    must be {@link #device()}
     * @return the handle of the new block
     */
    default MemoryHandle allocateAligned(long size, long alignment, Device device) {
        return allocateAligned(size, alignment, MemoryType.GENERAL, device);
    }

    /**
     * The general form of every allocation: {@code size} bytes from the pool of {@code type}, aligned
     * to the larger of {@code alignment} and the pool's alignment.
     *
     * @param size      bytes, more than zero
     * @param alignment bytes, a power of two
     * @param type      the pool, not null
     * @param device    must be {@link #device()}
     * @return the handle of the new block
     * @throws InvalidMemoryRequestException on a bad size, alignment or device
     * @throws OutOfDeviceMemoryException    when the pool cannot hold it
     */
    MemoryHandle allocateAligned(long size, long alignment, MemoryType type, Device device);

    /**
     * Frees a block. Its handle is never valid again, and views mapped from it are closed.
     *
     * @param handle a live handle of this manager
     * @throws InvalidHandleException on a zero, freed, stale or foreign handle (a double free included)
     */
    void deallocate(MemoryHandle handle);

    /**
     * Copies {@code size} bytes synchronously. Within one block, overlapping ranges behave like
     * {@code memmove} (the destination receives the source bytes as they were before the copy).
     * Both blocks are pinned as for {@link #write}: a {@link #deallocate} of either during the copy
     * is refused with {@link InvalidMemoryRequestException}.
     *
     * @param src       a live handle of this manager
     * @param dst       a live handle of this manager, possibly {@code src}
     * @param size      bytes, zero or more
     * @param srcOffset offset into {@code src}, zero or more, with {@code srcOffset + size} within it
     * @param dstOffset offset into {@code dst}, zero or more, with {@code dstOffset + size} within it
     * @throws InvalidHandleException        on an invalid handle
     * @throws InvalidMemoryRequestException on a negative value or a range outside a block
     * @throws StagingConflictException      if either block is held through a host staging copy (mapped, or by a withMapped action)
     *                                       (see "Mapped blocks" above); nothing is copied then
     */
    void copy(MemoryHandle src, MemoryHandle dst, long size, long srcOffset, long dstOffset);

    /**
     * Writes {@code src.byteSize()} bytes from any segment (a heap array through {@link
     * MemorySegment#ofArray}, a {@link java.nio.ByteBuffer}, native memory, a mapped file) into a
     * block, synchronously. The block is pinned while its bytes are written: defragmentation does
     * not move it, and a {@link #deallocate} of it from any thread meanwhile is refused with {@link
     * InvalidMemoryRequestException} (free it after this call returns).
     *
     * @param dst       a live handle of this manager
     * @param dstOffset where in the block the bytes go, zero or more, with {@code dstOffset +
     *                  src.byteSize()} within the block (checked without overflow)
     * @param src       the bytes, not null; a segment of zero bytes writes nothing
     * @throws InvalidHandleException        on a null, zero, freed, stale or foreign handle
     * @throws InvalidMemoryRequestException on a null segment, a negative offset, a range outside
     *                                       the block, or a segment whose scope is closed or
     *                                       belongs to another thread; nothing is written then
     * @throws StagingConflictException      if the block is held through a host staging copy (mapped, or by a withMapped action) (see
     *                                       "Mapped blocks" above): the unmap's write-back would
     *                                       overwrite the bytes; nothing is written then
     * @since 1.1
     */
    void write(MemoryHandle dst, long dstOffset, MemorySegment src);

    /**
     * Reads {@code dst.byteSize()} bytes of a block into any writable segment, synchronously, with
     * the same pinning as {@link #write}.
     *
     * @param src       a live handle of this manager
     * @param srcOffset where in the block the bytes come from, zero or more, with {@code srcOffset +
     *                  dst.byteSize()} within the block (checked without overflow)
     * @param dst       where the bytes go, not null and not read-only
     * @throws InvalidHandleException        on a null, zero, freed, stale or foreign handle
     * @throws InvalidMemoryRequestException on a null or read-only segment, a negative offset, a
     *                                       range outside the block, or a segment whose scope is
     *                                       closed or belongs to another thread; nothing is read then
     * @throws StagingConflictException      if the block is held through a host staging copy (mapped, or by another thread's
     *                                       withMapped action that may write; READ_ONLY ones let reads
     *                                       go on) (see "Mapped blocks" above): the views hold newer
     *                                       bytes than the device; nothing is read then
     * @since 1.1
     */
    void read(MemoryHandle src, long srcOffset, MemorySegment dst);

    /**
     * {@link #write} ordered on a stream. The arguments are checked before this method returns (bad
     * ones throw here, not through the stage). The caller must not change {@code src} (nor close
     * its arena) until the stage completes: the bytes are taken when the copy runs. The block is
     * pinned until then, as for {@link #copyAsync}: a free meanwhile succeeds, and the memory goes
     * back to the pool only when the copy has run. A call of zero bytes copies nothing but still
     * takes its place on the stream, as it does for {@link #copyAsync}.
     *
     * @param stream a stream of this manager's device, or {@code null} for the default stream;
     *               another device's stream is refused with {@link InvalidMemoryRequestException}
     * @return a stage that completes when the bytes have arrived in the block
     * @throws StagingConflictException if the block is held through a host staging copy (mapped, or by a withMapped action) when the
     *                                  call is made (see "Mapped blocks" above); accepted, the call
     *                                  holds the block until it has run, and a mapping meanwhile is
     *                                  refused instead
     * @since 1.1
     */
    CompletionStage<Void> writeAsync(MemoryHandle dst, long dstOffset, MemorySegment src, StreamHandle stream);

    /**
     * {@link #read} ordered on a stream, with the rules of {@link #writeAsync}: the caller must not
     * read or change {@code dst} until the stage completes.
     *
     * @return a stage that completes when the bytes have arrived in {@code dst}
     * @throws StagingConflictException as {@link #writeAsync} does
     * @since 1.1
     */
    CompletionStage<Void> readAsync(MemoryHandle src, long srcOffset, MemorySegment dst, StreamHandle stream);

    /**
     * Copies asynchronously on a stream. The arguments are checked before this method returns (bad
     * ones throw here, not through the stage); the stage completes when the bytes have arrived, or
     * exceptionally if the device fails. Blocks in flight are not moved by defragmentation. A copy of
     * zero bytes moves nothing, yet its stage too completes only after the work submitted to the
     * stream before it.
     *
     * @param transfer what to copy
     * @param stream   the stream to order it on, or {@code null} for the default stream
     * @return a stage that completes when the copy is done
     * @throws StagingConflictException if either block is held through a host staging copy (mapped, or by a withMapped action) when the
     *                                  call is made, as {@link #writeAsync} says
     */
    CompletionStage<Void> copyAsync(MemoryTransfer transfer, StreamHandle stream);

    /**
     * Copies from a block of this manager into a block of {@code target}, another device's manager,
     * device to device without staging the bytes through host memory (between two GPUs of one
     * backend, a peer copy), when this manager can reach {@code target}'s memory; synchronously, with
     * the checks of {@link #copy} (each handle against its own manager), both blocks pinned while the
     * bytes move, as {@link #copy} pins them: a {@link #deallocate} of either meanwhile is refused, and
     * neither manager's close releases the memory under the copy.
     *
     * <p>A router calls this first for a copy between two devices and moves the bytes through host
     * memory itself when it returns false.
     *
     * @param transfer {@code src} a handle of this manager, {@code dst} one of {@code target}
     * @param target   the destination's manager; when it is this manager, an implementation may copy
     *                 as {@link #copy} does (the pool engine does) or answer false (the default)
     * @return true once the bytes have arrived; false, having checked and changed nothing, when this
     *         manager cannot reach {@code target}'s memory (the default: another backend, a manager it
     *         does not know as a peer, a closed one), or when a {@code withMapped} action of the
     *         calling thread holds either block as a host staging copy (memory the CPU cannot
     *         address), which {@code read} and {@code write} use and a device copy would not
     * @throws InvalidHandleException        if either handle is not live on its manager
     * @throws InvalidMemoryRequestException on a null argument or a range outside a block
     * @throws DeviceUnavailableException    if this manager is closed
     * @throws StagingConflictException      if either block is held through a host staging copy (mapped, or by a withMapped action)
     *                                       (see "Mapped blocks" above); nothing is copied then
     * @since 1.4
     */
    default boolean copyToPeer(MemoryTransfer transfer, DeviceMemoryManager target) {
        if (transfer == null || target == null) {
            throw new InvalidMemoryRequestException("copyToPeer needs a transfer and a target manager: "
                    + (transfer == null ? "the transfer" : "the target") + " is null");
        }
        return false;
    }

    /**
     * @param device must be {@link #device()}
     * @return a consistent snapshot of the device's memory
     */
    MemoryInfo memoryInfo(Device device);

    /** @return {@code memoryInfo(device())} */
    default MemoryInfo memoryInfo() {
        return memoryInfo(device());
    }

    /**
     * What each memory type's pool holds from the device: the bytes of its reserved chunks, used or
     * free. Each pool's figure is exact at some instant of the call; their sum is the reserved bytes
     * of a {@link #memoryInfo()} taken at the same time, when no pool grows or shrinks meanwhile.
     * Default: an empty map, for a manager without a pool per memory type.
     *
     * @return bytes reserved per memory type, only for types whose pool holds some; never null
     * @since 1.2
     */
    default Map<MemoryType, Long> reservedByType() {
        return Map.of();
    }

    /**
     * A snapshot cheap enough to take on every allocation: what the router and strategies read.
     * Each figure is exact at some instant of the call, but the figures need not come from the same
     * instant, and the fragmentation ratio may be the one of the last {@link #memoryInfo()}.
     * Managers that keep lock-free counters override this; the default is {@link #memoryInfo()}.
     *
     * @return the snapshot
     * @throws DeviceUnavailableException once closed
     * @since 1.1
     */
    default MemoryInfo quickInfo() {
        return memoryInfo();
    }

    /**
     * @return the ids this manager issues; {@link HandleSpace#ANY} when it does not say, and then a
     *         router asks {@link #owns(MemoryHandle)}. The space never changes for one manager.
     * @since 1.1
     */
    default HandleSpace handleSpace() {
        return HandleSpace.ANY;
    }

    /**
     * Adds an observer told of this device's pressure changes through {@link
     * MemoryObserver#pressureChanged}, with the same rules as the {@linkplain #setPressureCallback
     * pressure callback} (edge-triggered, outside the manager's locks, after that callback; a
     * throwing observer is logged and stays). Its other methods are not called by the manager. Adding
     * an observer twice adds it once.
     *
     * @param observer the observer, not null
     * @return true if this manager will tell the observer; false if it does not report pressure to
     *         observers (the default), and then the caller must derive levels from {@link #quickInfo()}
     * @since 1.1
     */
    default boolean addPressureObserver(MemoryObserver observer) {
        return false;
    }

    /**
     * @param observer an observer added before; unknown ones are ignored
     * @since 1.1
     */
    default void removePressureObserver(MemoryObserver observer) {
    }

    /**
     * @param handle any handle, even an invalid one
     * @return the block's information, or empty if the handle is not a live block of this manager
     */
    Optional<MemoryHandleInfo> handleInfo(MemoryHandle handle);

    /**
     * @return every live block of this manager, in no particular order; a snapshot. A block is listed
     *         under a handle this manager issued, one {@link #handleInfo} answers for: the second
     *         handle of a mapping across devices by the manager that issued it
     */
    List<MemoryHandleInfo> handles();

    /**
     * @param handle any handle
     * @return true if it names a live block of this manager
     */
    default boolean owns(MemoryHandle handle) {
        return handleInfo(handle).isPresent();
    }

    /**
     * Configures the {@link MemoryType#GENERAL} pool.
     *
     * @param device must be {@link #device()}
     * @param config the new configuration
     */
    default void configurePool(Device device, MemoryPoolConfig config) {
        configurePool(device, MemoryType.GENERAL, config);
    }

    /**
     * Configures one pool. Applies to future growth; memory already reserved stays, except that a
     * maximum below what the pool holds gives back its empty chunks at once.
     *
     * @param device must be {@link #device()}
     * @param type   the pool
     * @param config the new configuration
     * @throws InvalidMemoryRequestException if the configuration cannot apply to this device (a
     *                                       maximum below what the pool already holds in live blocks,
     *                                       say)
     */
    void configurePool(Device device, MemoryType type, MemoryPoolConfig config);

    /**
     * @param type a pool
     * @return its current configuration
     */
    MemoryPoolConfig poolConfig(MemoryType type);

    /**
     * Compacts live blocks (those neither mapped nor in an in-flight copy) so free space coalesces,
     * and gives empty chunks back to the device. Handles stay valid and contents are preserved.
     *
     * @param device must be {@link #device()}
     * @return a stage with what was achieved
     */
    CompletionStage<DefragmentationStats> defragment(Device device);

    /**
     * Sets the one callback told of pressure-level changes of this device (edge-triggered: only
     * when the level changes). It runs outside the manager's locks, on the thread whose allocation
     * or free changed the level; one that blocks holds up only that call (other threads go on, and
     * a level reached meanwhile is told when it returns). If it throws, the failure is logged and
     * allocation goes on. Replaces any earlier callback; {@code null} removes it.
     *
     * @param callback receives the new level
     */
    void setPressureCallback(Consumer<MemoryPressure> callback);

    /**
     * Releases every byte the manager holds and makes every later call throw {@link
     * DeviceUnavailableException}. Live blocks at that moment are reported in the log. Idempotent.
     * Managers registered as services are closed by their backend; callers close only managers they
     * created through a {@link MemoryManagerFactory}.
     */
    @Override
    void close();
}
