package io.ferrum.memory.api;

import java.lang.foreign.MemorySegment;
import java.util.Optional;
import java.util.concurrent.CompletionStage;

import org.osgi.annotation.versioning.ProviderType;

/**
 * Allocation across devices: the active {@link AllocationStrategy} chooses the device, and every
 * handle is routed back to the manager that issued it. Copies work between handles of any two
 * devices.
 *
 * <p><b>Thread safety:</b> every method may be called from any thread.
 */
@ProviderType
public interface MemoryRouter {

    /**
     * @param size         bytes, more than zero
     * @param requirements what the caller asks of the allocation
     * @return the handle of the new block
     * @throws OutOfDeviceMemoryException when no device could hold it (the message lists what was tried)
     * @throws InvalidMemoryRequestException on a size of zero or less or null requirements, or when every
     *                                       device tried refused the request by its own limits (a pool's
     *                                       maxSize, an alignment above its largest chunk) and none ran
     *                                       out of memory; a device that refuses is left out and the next
     *                                       one tried (the message lists each device's reason)
     * @throws DeviceUnavailableException when no device or no strategy is available (the message says which)
     */
    MemoryHandle allocate(long size, AllocationRequirements requirements);

    /**
     * @param handle a live handle of any device
     * @throws InvalidHandleException     on an unknown or freed handle
     * @throws DeviceUnavailableException if its device has gone away
     */
    void deallocate(MemoryHandle handle);

    /**
     * Copies synchronously between handles of any two devices, with the same checks as {@link
     * DeviceMemoryManager#copy} before a byte moves. Between two devices the bytes move in pieces
     * (of at most 64 MiB): device to device when the source's manager can ({@link
     * DeviceMemoryManager#copyToPeer}), otherwise through host memory; each block is pinned while a
     * piece moves, so a free of either block between two pieces is accepted, and the copy then fails
     * with {@link InvalidHandleException}, having written part of the destination (no byte reaches a
     * block of another owner). An interrupt of the calling thread stops such a copy before its next
     * piece, the first one included, with a {@link MemoryException} (cause: an {@link
     * InterruptedException}) that names the bytes copied and the part of the destination that holds
     * them (its first bytes, or its last ones when the destination offset is above the source's, as
     * the pieces then go back to front); the rest of the destination is as it was, and the interrupt
     * stays set. A copy within one device is one call and runs to its end, except one that a {@link
     * AdvancedMemoryManager#withMapped} action of the calling thread encloses while it holds either
     * block through a host staging copy (memory the CPU cannot address): that copy goes as between two
     * devices, through {@code read} and {@code write}, which share the action's copy, so that it reads
     * the action's bytes and its write-back keeps the copied ones (the manager's own {@code copy}
     * refuses it, as a device copy would do neither).
     *
     * <p>A block its manager holds mapped through a host staging copy (a GPU block between {@link
     * AdvancedMemoryManager#mapMemory} and {@link AdvancedMemoryManager#unmapMemory}), or that another
     * thread's {@code withMapped} action holds so, is refused on either side with {@link
     * StagingConflictException}, as its manager refuses it; a mapping made
     * while a copy through host memory runs refuses that copy at its next piece, having written part
     * of the destination, as a free does.
     *
     * <p>A failure of the first piece is the manager's exception, as it threw it. A failure of a later
     * piece (a free or a mapping meanwhile, a device's error) is thrown with the API type of the
     * manager's exception ({@link InvalidHandleException}, {@link StagingConflictException}, {@link
     * InvalidMemoryRequestException}, {@link DeviceUnavailableException}, {@link
     * OutOfDeviceMemoryException}; any other as a {@link MemoryException}) and that exception as its
     * cause, so that a caller can handle it as it would the manager's; but, unlike what the type says
     * of a failed call, part of the destination has changed: the message names the destination
     * offsets that hold the source's bytes, as an interrupt's does, and, unless the manager refused
     * the piece (a type that says nothing was changed), the offsets the failed piece may have written
     * in part; the rest of the destination is as it was. Copy again to complete it.
     *
     * @param transfer what to copy
     * @throws StagingConflictException if either block is mapped through a host staging copy
     */
    void copy(MemoryTransfer transfer);

    /**
     * Copies asynchronously between handles of any two devices. Within one device the copy is
     * ordered on the stream; between two devices it runs on a router thread, and the stream is only
     * checked to be the destination device's.
     *
     * @param transfer what to copy (checked before this method returns)
     * @param stream   a stream of the destination's device, or {@code null} for the default stream
     *                 (another stream is refused with {@link InvalidMemoryRequestException})
     * @return a stage that completes when the bytes have arrived; between two devices, one that fails
     *         with what {@link #copy} would throw (a failure after the first piece included)
     */
    CompletionStage<Void> copyAsync(MemoryTransfer transfer, StreamHandle stream);

    /**
     * {@link DeviceMemoryManager#write} on the device that holds {@code dst}, with its checks and
     * pinning.
     *
     * @throws InvalidHandleException     on an unknown or freed handle
     * @throws DeviceUnavailableException if its device has gone away
     * @throws StagingConflictException   if the block is mapped through a host staging copy
     * @since 1.1
     */
    void write(MemoryHandle dst, long dstOffset, MemorySegment src);

    /**
     * {@link DeviceMemoryManager#read} on the device that holds {@code src}, with its checks and
     * pinning.
     *
     * @throws InvalidHandleException     on an unknown or freed handle
     * @throws DeviceUnavailableException if its device has gone away
     * @throws StagingConflictException   if the block is mapped through a host staging copy
     * @since 1.1
     */
    void read(MemoryHandle src, long srcOffset, MemorySegment dst);

    /**
     * @param handle any handle
     * @return the block's information, or empty if no device knows it
     */
    Optional<MemoryHandleInfo> handleInfo(MemoryHandle handle);

    /**
     * @param handle any handle
     * @return the device holding the block, or empty if no device knows it
     */
    Optional<Device> owner(MemoryHandle handle);

    /**
     * @return the name of the strategy that places allocations now, or empty when no strategy is
     *         present (allocation then fails)
     */
    Optional<String> activeStrategy();
}
