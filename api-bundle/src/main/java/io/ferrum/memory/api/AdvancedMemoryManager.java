package io.ferrum.memory.api;

import java.lang.foreign.MemorySegment;
import java.util.Optional;
import java.util.function.Function;

import org.osgi.annotation.versioning.ProviderType;

/**
 * A {@link DeviceMemoryManager} that can also map blocks for direct CPU access, alias memory
 * across devices, prefetch, take usage hints and report access patterns.
 *
 * <p><b>Thread safety:</b> every method may be called from any thread.
 */
@ProviderType
public interface AdvancedMemoryManager extends DeviceMemoryManager {

    /**
     * Maps a block for direct access. The view covers exactly the block (not its neighbours) and is
     * read-only for {@link MemoryAccess#READ_ONLY} (writes through it throw
     * {@link IllegalArgumentException}). While mapped, the block is not moved by
     * defragmentation. After {@link #unmapMemory} or {@link #deallocate} every access through the view
     * throws {@link IllegalStateException}: it never reads memory that belongs to someone else.
     * Mapping a block that is already mapped returns a new view of the same block; one unmap
     * closes all of them. On memory the CPU cannot address (a GPU's) the views show a host staging
     * copy of the block, which the first mapping makes; another mapping meanwhile waits for that copy
     * and shares it ({@link #unmapMemory} writes it back).
     *
     * <p><b>Staged mappings exclude the other data paths.</b> From the start of that copy to the end
     * of the unmap's write-back, the views hold the block's bytes: every other call that moves them
     * ({@code read}, {@code write}, their asynchronous forms, {@link #withMapped}, {@code copy},
     * {@code copyAsync}, {@code copyToPeer}, with the block on either side) is refused with {@link
     * StagingConflictException}, changing nothing, rather than read the device's older bytes or write
     * bytes the write-back would overwrite. Unmap the block first: once {@link #unmapMemory} has
     * returned, those calls see every byte the views wrote. Conversely a mapping that would make the
     * copy while such a call on the block is under way (on another thread, an asynchronous copy
     * accepted and not yet run, a prefetch or usage hint being applied, or a {@link #withMapped}
     * action of the calling thread) is refused with
     * {@link StagingConflictException}: its copy would miss their bytes. Of two such calls not ordered
     * by their callers, the later is refused; calls ordered by the caller always see each other. Host
     * memory has no staging copy and no such rule: its views are the memory itself.
     *
     * <p>A view may be used by any thread until it is closed. A thread that is reading or writing
     * through it when another thread unmaps or frees the block (or the manager closes) gets an
     * {@link IllegalStateException}; on JDK 25 it may also find its interrupt flag set afterwards
     * (closing the view's shared arena interrupts the threads it must stop): code that relies on
     * interrupts should clear it with {@link Thread#interrupted()} when it catches that exception,
     * and should not unmap a block while other threads may still use its views.
     *
     * <p><b>Cost.</b> Each mapping opens a shared arena, and the unmap (or free) that closes it
     * waits for a handshake with every thread: microseconds per map and unmap. Prefer {@link
     * #withMapped} to touch a block from one thread, and {@link #write}/{@link #read} to move bytes;
     * map when a view must outlive a call or be shared between threads.
     *
     * @param handle a live handle of this manager
     * @param access how the view will be used
     * @return a view of exactly the block
     * @throws InvalidHandleException   on an invalid handle
     * @throws StagingConflictException on memory the CPU cannot address, when the staging copy would
     *                                  start while another call moves the block's bytes (see above)
     */
    MemorySegment mapMemory(MemoryHandle handle, MemoryAccess access);

    /**
     * Runs {@code action} on a view of exactly the block, and returns what it returns. This is the
     * cheap way to touch a block: on host memory the view costs about what a confined arena costs
     * (tens of nanoseconds), where {@link #mapMemory} opens and closes a shared arena (microseconds,
     * a handshake with every thread on close).
     *
     * <ul>
     * <li>The view is usable only by the calling thread (another thread's access throws {@link
     *     WrongThreadException}) and only until the action returns or throws (afterwards every access
     *     throws {@link IllegalStateException}). Do not let it escape.</li>
     * <li>{@link MemoryAccess#READ_ONLY} views are read-only segments: writes through them throw
     *     {@link IllegalArgumentException}.</li>
     * <li>The block is pinned during the action: defragmentation does not move it, and {@link
     *     #deallocate} of it, from inside the action or from any other thread, is refused with {@link
     *     InvalidMemoryRequestException} and changes nothing.</li>
     * <li>Nested calls work, on the same block or others.</li>
     * <li>{@link #close()} called from inside the action does not wait for it: it returns, the view
     *     stays the block's until the action ends, and that end releases the memory.</li>
     * <li>On memory the CPU cannot address (a GPU's), the view is a host staging copy of the block,
     *     written back when a {@link MemoryAccess#READ_WRITE} or {@link MemoryAccess#WRITE_ONLY}
     *     action returns normally (not when it throws: its bytes are dropped). Calls on the same
     *     block nested in the action, on its thread, work on that copy: a nested view is the copy,
     *     {@code read} reads it, {@code write} writes it and the device; so the action sees their
     *     bytes and its write-back keeps them. A nested view that may write and returns normally
     *     keeps its bytes whatever the outer action then does: the copy is written back when the
     *     outermost action ends, after a READ_ONLY action too, and after one that throws (the outer
     *     action's own bytes, in the same copy, go back with them). A nested action that throws
     *     leaves its bytes in the copy, where the thread sees them: they go back only if the copy is
     *     written back for another reason. {@code copyToPeer} of the block answers false, so that a
     *     router copies it through {@code read} and {@code write}.</li>
     * <li><b>The action holds the block</b> on such memory from before its copy is made to the end
     *     of its write-back: the copy would miss, and the write-back overwrite, any other call's
     *     bytes. A {@link MemoryAccess#READ_WRITE} or {@link MemoryAccess#WRITE_ONLY} action holds it
     *     alone: every other thread's call on the block ({@code read}, {@code write}, their
     *     asynchronous forms, {@code withMapped}, {@link #mapMemory}) is refused meanwhile. {@link
     *     MemoryAccess#READ_ONLY} actions of several threads share it, each on a copy of its own:
     *     other threads' {@code read}s and READ_ONLY actions go on, while their {@code write}s,
     *     writing actions, asynchronous calls and mappings are refused. A view that may write, or a
     *     {@code write}, nested in a READ_ONLY action makes the hold its thread's alone (as a
     *     READ_WRITE action's, until the outermost action ends) when no other thread's READ_ONLY
     *     action shares the block, and is refused while one does: to write while others may read,
     *     make the outermost action READ_WRITE. Whatever the access, every {@code copy}, {@code
     *     copyAsync} and {@code copyToPeer} with the block on either side, the action's own thread's
     *     included (they work on the device's bytes, not on the copy), is refused. Each refusal is a
     *     {@link StagingConflictException} and changes nothing. Conversely an action that would make
     *     the copy while another call on the block is under way (another thread's call or action that
     *     may write, any other thread's call or action for a writing action, an asynchronous copy
     *     accepted and not yet run, a hint being applied) is refused with {@link
     *     StagingConflictException} and not run. Of two such calls not ordered by their callers, the
     *     later is refused; calls ordered by their callers see each other's bytes. To share a block's
     *     writable bytes between threads, {@link #mapMemory} it. Host memory has no staging copy and
     *     no such rule.</li>
     * <li>A {@link #mapMemory} of the block during the action is refused with {@link
     *     StagingConflictException}, and the action is refused so while the block is mapped through a
     *     host staging copy (see {@link #mapMemory}).</li>
     * </ul>
     * Whatever the action throws reaches the caller unchanged, after the view is closed.
     *
     * @param handle a live handle of this manager
     * @param access how the view will be used, not null
     * @param action what to do with the view, not null
     * @param <R>    what the action returns
     * @return what the action returned
     * @throws InvalidHandleException        on a null, zero, freed, stale or foreign handle
     * @throws InvalidMemoryRequestException on a null access or action (the action is not run)
     * @throws StagingConflictException      on memory the CPU cannot address, if the block is mapped
     *                                       through a host staging copy ({@link #mapMemory}), held by
     *                                       another thread's action (for a READ_ONLY action: one that
     *                                       may write), or another call on it is under way (see
     *                                       above); the action is not run. Also for a view that may
     *                                       write nested in a READ_ONLY action while another thread's
     *                                       READ_ONLY action shares the block
     * @since 1.1
     */
    <R> R withMapped(MemoryHandle handle, MemoryAccess access, Function<? super MemorySegment, ? extends R> action);

    /**
     * Closes every view of the block. On memory the CPU cannot address (a GPU's), the views' host
     * staging copy is then written back to the device, unless every view was {@link
     * MemoryAccess#READ_ONLY}; the block counts as unmapped from the moment its views close, and a
     * mapping of it made meanwhile waits for the write-back and sees its bytes. A write-back the
     * device fails throws the device's exception, the views closed all the same; the staging copy,
     * with every byte written through them, stays the block's mapping: the next {@link #mapMemory}
     * returns views of it and the next unmap writes it back again (a free drops it). Until this call
     * returns, the block's other data paths are refused ({@link #mapMemory}, "Staged mappings");
     * once it has returned, they see the bytes written back (a failed write-back leaves the block
     * mapped, and them refused).
     *
     * @param handle a live, mapped handle of this manager
     * @throws InvalidHandleException        on an invalid handle
     * @throws InvalidMemoryRequestException if the block is not mapped (another unmap of it may be
     *                                       writing its staging copy back)
     */
    void unmapMemory(MemoryHandle handle);

    /**
     * Allocates memory visible on two devices: two handles aliasing the same bytes.
     *
     * @param sourceDevice the first device
     * @param targetDevice the second device
     * @param size         bytes, more than zero
     * @return the two handles
     * @throws InvalidMemoryRequestException if this backend cannot map that pair of devices (the
     *                                       message names which backend can)
     */
    MemoryMapping createMapping(Device sourceDevice, Device targetDevice, long size);

    /**
     * Asks the device to bring the block close to {@code target} ahead of use. A hint: it never
     * changes contents, and backends where it means nothing accept it as a no-op.
     *
     * @param handle a live handle of this manager
     * @param target where the block will be used
     */
    void prefetch(MemoryHandle handle, Device target);

    /**
     * @param handle any handle
     * @return the block's access statistics, or empty if the handle is not live or statistics are off
     */
    Optional<MemoryAccessStats> accessStats(MemoryHandle handle);

    /**
     * Records how a block will be used and passes the hint to the device.
     *
     * @param handle a live handle of this manager
     * @param hint   the intended use
     */
    void setUsageHint(MemoryHandle handle, MemoryUsageHint hint);

    /**
     * @param handle any handle
     * @return the last hint set on the block, or empty
     */
    Optional<MemoryUsageHint> usageHint(MemoryHandle handle);
}
