package io.ferrum.memory.pool.internal;

import java.lang.foreign.MemorySegment;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.MemoryUsageHint;
import io.ferrum.memory.api.OutOfDeviceMemoryException;
import io.ferrum.memory.api.StagingConflictException;
import io.ferrum.memory.api.StreamHandle;

/**
 * The engine's argument checks and every exception message it throws, in one place: a message
 * names the device, the handle and the numbers involved, and says what to do. Tests and docs quote
 * some of these messages: change them here only on purpose.
 *
 * <p>Methods named after what they check throw when the check fails and return otherwise; methods
 * named after a failure build the exception for the caller to throw (so that the caller's control
 * flow stays visible). The checks on the allocation path take no lock and allocate nothing unless
 * they fail. Immutable.
 */
final class Checks {
    private final Device device;
    private final long capacity;
    private final long chunkAlignment;
    private final HandleTable handles;
    private final String backendName;

    Checks(Device device, long capacity, long chunkAlignment, HandleTable handles, String backendName) {
        this.device = device;
        this.capacity = capacity;
        this.chunkAlignment = chunkAlignment;
        this.handles = handles;
        this.backendName = backendName;
    }

    // ---------------------------------------------------------------- construction

    static InvalidMemoryRequestException missingParts() {
        return new InvalidMemoryRequestException("A pooled manager needs an upstream, a configuration and settings");
    }

    /** The upstream's chunk alignment is a power of two. */
    void chunkAlignment() {
        if (Long.bitCount(chunkAlignment) != 1) {
            throw new InvalidMemoryRequestException("Upstream " + backendName + " of " + device
                    + " reports chunk alignment " + chunkAlignment + ", which is not a power of two");
        }
    }

    // ---------------------------------------------------------------- arguments

    DeviceUnavailableException closed() {
        return closed(device);
    }

    /** @return the error for a call on a handle of {@code device}'s manager, which is closed */
    static DeviceUnavailableException closed(Device device) {
        return new DeviceUnavailableException(device, "The memory manager of " + device
                + " is closed (its backend was stopped or the manager was closed); its handles are no longer valid."
                + " Use a running manager for this device");
    }

    void device(Device d) {
        if (d == null) {
            throw new InvalidMemoryRequestException("Device is null; this manager serves " + device);
        }
        if (!device.equals(d)) {
            throw new InvalidMemoryRequestException("Device " + d + " is not served by this manager, which serves "
                    + device + "; use the manager registered with memory.device=" + d + " or the MemoryRouter");
        }
    }

    static void type(MemoryType type) {
        if (type == null) {
            throw new InvalidMemoryRequestException("Memory type is null; use MemoryType.GENERAL for general memory");
        }
    }

    /** A request of {@code size} bytes fits the device and the pool's configuration. */
    void size(long size, MemoryType type, MemoryPoolConfig cfg) {
        if (size <= 0) {
            throw new InvalidMemoryRequestException("Invalid allocation size " + size + " bytes on " + device
                    + ": the size must be more than zero");
        }
        if (size > capacity) {
            throw new InvalidMemoryRequestException("Allocation of " + Bytes.exact(size) + " on " + device
                    + " exceeds the device capacity of " + Bytes.exact(capacity));
        }
        if (cfg.maxSize().isPresent() && size > cfg.maxSize().getAsLong()) {
            throw new InvalidMemoryRequestException("Allocation of " + Bytes.exact(size) + " on " + device + " exceeds the "
                    + type + " pool's maxSize of " + Bytes.exact(cfg.maxSize().getAsLong())
                    + "; raise maxSize with configurePool");
        }
        if (!cfg.enableAutoExpansion() && size > cfg.initialSize()) {
            throw new InvalidMemoryRequestException("Allocation of " + Bytes.exact(size) + " on " + device + " exceeds the "
                    + type + " pool's initialSize of " + Bytes.exact(cfg.initialSize())
                    + " and the pool may not grow (enableAutoExpansion=false)");
        }
    }

    /** @return the alignment a block gets for a request of {@code alignment}: at least the pool's and MIN_BLOCK */
    long alignment(long alignment, MemoryPoolConfig cfg) {
        if (alignment <= 0 || Long.bitCount(alignment) != 1) {
            throw new InvalidMemoryRequestException("Invalid alignment " + alignment + " on " + device
                    + ": the alignment must be a power of two (1, 2, 4, ..., 4096, ...)");
        }
        long largestChunk = Math.max(Math.max(cfg.initialSize(), cfg.growthIncrement()), chunkAlignment);
        if (alignment > largestChunk) {
            throw new InvalidMemoryRequestException("Alignment " + Bytes.exact(alignment) + " on " + device
                    + " is larger than the pool's largest chunk (" + Bytes.exact(largestChunk) + ")");
        }
        return Math.max(alignment, Math.max(cfg.alignment(), Pool.MIN_BLOCK));
    }

    /** The handle is not null and not the zero handle (whether it is live is the handle table's answer). */
    void handle(MemoryHandle handle) {
        if (handle == null) {
            throw new InvalidHandleException(null, "Handle is null on " + device);
        }
        if (!handle.isValid()) {
            throw new InvalidHandleException(handle, "The zero handle names no allocation (on " + device + ")");
        }
    }

    InvalidHandleException invalidHandle(MemoryHandle handle) {
        if (!handles.isOwn(handle.id())) {
            return new InvalidHandleException(handle, "Handle " + handle + " was not issued by the manager of " + device
                    + " (it belongs to another device or manager, or is stale from before a restart)");
        }
        return new InvalidHandleException(handle, "Handle " + handle + " is not live on " + device
                + ": it was already freed (a double free?), was never allocated, or its manager restarted");
    }

    /** {@code size} bytes at {@code offset} lie inside block {@code b} (the {@code what} side of a copy). */
    void range(MemoryHandle h, Block b, long offset, long size, String what) {
        long length = b.requested;
        if (offset < 0 || size < 0) {
            throw new InvalidMemoryRequestException("Invalid copy on " + device + ": " + what + " offset " + offset
                    + " and size " + size + " must be zero or more");
        }
        if (size > length || offset > length - size) {
            throw new InvalidMemoryRequestException("Copy of " + Bytes.count(size) + " at " + what + " offset " + offset
                    + " falls outside " + what + " block " + h + " of " + Bytes.count(length) + " on " + device);
        }
    }

    void transfer(MemoryTransfer transfer) {
        if (transfer == null) {
            throw new InvalidMemoryRequestException("Transfer is null on " + device);
        }
    }

    InvalidMemoryRequestException noTarget() {
        return new InvalidMemoryRequestException("copyToPeer on " + device + " needs a target manager: it is null");
    }

    InvalidMemoryRequestException inScope(MemoryHandle handle) {
        return new InvalidMemoryRequestException("Block " + handle + " on " + device + " is in use by a withMapped action,"
                + " a read, a write or a copy (on this thread or another); free it after that call returns. Nothing was freed");
    }

    InvalidMemoryRequestException tooManyScopes(MemoryHandle handle) {
        return new InvalidMemoryRequestException("Block " + handle + " on " + device + " already has " + Block.SCOPE_COUNT
                + " withMapped actions, reads or writes inside it, the most it can count; call again once some have"
                + " returned. Nothing was done");
    }

    InvalidMemoryRequestException unknownStream(StreamHandle stream) {
        return new InvalidMemoryRequestException("Unknown stream " + stream.id() + " on " + device
                + ": it is not a live stream of the StreamManager of " + device + "; create it there");
    }

    /**
     * An async copy that waited, on its caller's thread (the default stream), for a place among the
     * manager's transfers in flight, and was interrupted: it moved nothing.
     */
    MemoryException interruptedTransfer(long bytes, InterruptedException cause) {
        return new MemoryException("An async copy of " + bytes + " bytes on " + device + " was interrupted while it"
                + " waited for one of the device's maxConcurrentTransfers copies in flight to end; nothing was"
                + " copied: copy again", cause);
    }

    /**
     * A pool configuration is given, and fits the device: an initial size above the capacity could
     * never be reserved, and an alignment above it would round every block up past the device (each
     * allocation then refused with figures that say the device is free). A growth step above it is
     * taken: growth stops at the capacity (the default step, 512 MiB, is above a small device's).
     */
    void poolConfig(MemoryType type, MemoryPoolConfig cfg) {
        if (cfg == null) {
            throw new InvalidMemoryRequestException("Pool configuration is null for the " + type + " pool on " + device);
        }
        fits(type, "initialSize", cfg.initialSize());
        fits(type, "alignment", cfg.alignment());
    }

    private void fits(MemoryType type, String attribute, long bytes) {
        if (bytes > capacity) {
            throw new InvalidMemoryRequestException("Cannot set " + attribute + " of the " + type + " pool on " + device
                    + " to " + Bytes.exact(bytes) + ": the device has " + Bytes.exact(capacity));
        }
    }

    /**
     * Refuses a configuration whose limit is below the bytes of the pool's live blocks: a fixed
     * pool's initialSize (enableAutoExpansion=false, the most it may hold), or a maxSize.
     */
    void limitCoversUse(MemoryType type, MemoryPoolConfig cfg, long live) {
        if (!cfg.enableAutoExpansion() && cfg.initialSize() < live) {
            throw new InvalidMemoryRequestException("Cannot fix the " + type + " pool on " + device + " at its initialSize"
                    + " of " + Bytes.exact(cfg.initialSize()) + " (enableAutoExpansion=false): its live blocks already use "
                    + Bytes.exact(live));
        }
        if (cfg.maxSize().isPresent() && cfg.maxSize().getAsLong() < live) {
            throw maxSizeBelowUse(type, cfg, live);
        }
    }

    /** @return whether {@code cfg} sets a limit below which a pool's live blocks refuse it ({@link #limitCoversUse}) */
    static boolean limits(MemoryPoolConfig cfg) {
        return cfg.maxSize().isPresent() || !cfg.enableAutoExpansion();
    }

    InvalidMemoryRequestException maxSizeBelowUse(MemoryType type, MemoryPoolConfig cfg, long used) {
        return new InvalidMemoryRequestException("Cannot set maxSize of the " + type + " pool on " + device + " to "
                + Bytes.exact(cfg.maxSize().getAsLong()) + ": its live blocks already use " + Bytes.exact(used));
    }

    // ---------------------------------------------------------------- the data path

    /** A thread that is never started: a segment it may access is not confined to any thread. */
    private static final Thread ANY_THREAD = new Thread(() -> { }, "ferrum-accessibility-probe");

    /**
     * {@code segment} (the {@code role} side of a write or read: "source" or "destination") is given,
     * alive, usable by the calling thread and, for {@code async} work, by any thread; and, as a
     * destination, writable.
     *
     * @return its size in bytes
     */
    long segment(MemorySegment segment, String role, boolean async) {
        if (segment == null) {
            throw new InvalidMemoryRequestException("The " + role + " segment is null (on " + device
                    + "); pass MemorySegment.ofArray(bytes) for a Java array");
        }
        if (!segment.scope().isAlive()) {
            throw new InvalidMemoryRequestException("The " + role + " segment " + segment + " is already closed (its"
                    + " arena was closed); nothing was copied on " + device);
        }
        if (!segment.isAccessibleBy(Thread.currentThread())) {
            throw new InvalidMemoryRequestException("The " + role + " segment " + segment + " belongs to another"
                    + " thread's confined arena; nothing was copied on " + device);
        }
        if (async && !segment.isAccessibleBy(ANY_THREAD)) {
            throw new InvalidMemoryRequestException("The " + role + " segment " + segment + " is confined to this"
                    + " thread, and an asynchronous copy runs on the stream's thread; use a shared, global or heap"
                    + " segment (nothing was copied on " + device + ")");
        }
        if (segment.isReadOnly() && role.equals("destination")) {
            throw new InvalidMemoryRequestException("The destination segment " + segment + " is read-only; a read"
                    + " needs a writable segment (nothing was copied on " + device + ")");
        }
        return segment.byteSize();
    }

    /** {@code size} bytes at {@code offset} lie inside block {@code b}, for a {@code what} ("write" or "read"). */
    void blockRange(MemoryHandle h, Block b, long offset, long size, String what) {
        long length = b.requested;
        if (offset < 0) {
            throw new InvalidMemoryRequestException("Invalid " + what + " on " + device + ": offset " + offset
                    + " into block " + h + " must be zero or more; nothing was copied");
        }
        if (size > length || offset > length - size) {
            throw new InvalidMemoryRequestException("A " + what + " of " + Bytes.count(size) + " at offset " + offset
                    + " falls outside block " + h + " of " + Bytes.count(length) + " on " + device + "; nothing was copied");
        }
    }

    static void action(Object action) {
        if (action == null) {
            throw new InvalidMemoryRequestException("The action of withMapped is null; pass the code that uses the view");
        }
    }

    static void access(MemoryAccess access) {
        if (access == null) {
            throw new InvalidMemoryRequestException("Access mode is null; use READ_ONLY, WRITE_ONLY or READ_WRITE");
        }
    }

    InvalidMemoryRequestException notMapped(MemoryHandle handle) {
        return new InvalidMemoryRequestException("Block " + handle + " on " + device
                + " is not mapped; map it with mapMemory before unmapping");
    }

    InvalidMemoryRequestException viewInUse(MemoryHandle handle) {
        return new InvalidMemoryRequestException("Block " + handle + " on " + device + " cannot be unmapped now:"
                + " a native operation (an I/O call on a buffer of its view, say) still uses a view;"
                + " unmap it when that operation has ended. It stays mapped");
    }

    /** A data-path call on a block mapped through a host staging copy ({@link Mappings#staged}). */
    StagingConflictException staged(MemoryHandle handle) {
        return new StagingConflictException(handle, "Block " + handle + " on " + device + " is mapped through a host"
                + " staging copy (mapMemory): a read, write or copy of the device's bytes would miss the views' bytes,"
                + " or be overwritten when the copy is written back. unmapMemory it first. Nothing was done");
    }

    /** A data-path call on a block a {@code withMapped} action holds as a host staging copy ({@link Block#heldBy}). */
    StagingConflictException heldByAction(MemoryHandle handle) {
        return new StagingConflictException(handle, "Block " + handle + " on " + device + " is held through a host"
                + " staging copy by a withMapped action (of another thread, or for a copy of this thread's): a read,"
                + " write or copy of the device's bytes would miss the action's bytes, or be overwritten when its"
                + " copy is written back. Call again once that action has returned. Nothing was done");
    }

    /** A call that writes or copies a block that READ_ONLY {@code withMapped} actions share ({@link Block.Readers}). */
    StagingConflictException sharedByReaders(MemoryHandle handle) {
        return new StagingConflictException(handle, "Block " + handle + " on " + device + " is being read through"
                + " host staging copies by READ_ONLY withMapped actions: a write, a writing withMapped action, a copy"
                + " or an asynchronous call on it now could land between their copies and a write-back (or read"
                + " bytes that one's nested view may still change). read and other READ_ONLY actions go on"
                + " meanwhile; call again once those actions have returned. Nothing was done");
    }

    /** A writer nested in a READ_ONLY {@code withMapped} action while another thread's reader shares the block. */
    StagingConflictException writerAmongReaders(MemoryHandle handle) {
        return new StagingConflictException(handle, "Block " + handle + " on " + device + " cannot be written from"
                + " inside a READ_ONLY withMapped action now: another thread's READ_ONLY action shares it through a"
                + " staging copy of its own, and this one's write would change the block under it. To write, make"
                + " the outermost action READ_WRITE (it holds the block alone), or write once the other readers have"
                + " returned. Nothing was done");
    }

    /** A {@code withMapped} action that would stage a block while another call on it is under way. */
    StagingConflictException actionBusy(MemoryHandle handle) {
        return new StagingConflictException(handle, "Block " + handle + " on " + device + " cannot be staged for a"
                + " withMapped action now: another thread's read, write, copy or withMapped action, or an asynchronous"
                + " copy or hint, is under way on it, and a host staging copy made now would miss its bytes or be"
                + " written back over them. Call again once that call has returned. The action was not run");
    }

    /**
     * A READ_ONLY {@code withMapped} action that would stage a block while an asynchronous call on it
     * (pinned) has not run: it may write the block, and nothing tells a read from a write then.
     */
    StagingConflictException readerBusy(MemoryHandle handle) {
        return new StagingConflictException(handle, "Block " + handle + " on " + device + " cannot be staged for a"
                + " READ_ONLY withMapped action now: an asynchronous call on it (a copy, writeAsync or readAsync"
                + " accepted on a stream, or a hint) has not completed, and no staging copy is made while one is"
                + " pending, since it may still change the block's bytes. Call again once that call has completed"
                + " (its CompletionStage, or a synchronize of its stream). The action was not run");
    }

    /**
     * A manager {@code copy} with a block that a {@code withMapped} action of the calling thread holds
     * through a staging copy, called from inside that action.
     */
    StagingConflictException copyInCallersAction(MemoryHandle handle) {
        return new StagingConflictException(handle, "Block " + handle + " on " + device + " is held through a host"
                + " staging copy by this thread's own withMapped action, inside which this copy was called: a"
                + " device copy would neither read that copy's bytes nor survive its write-back. Inside the action,"
                + " move the bytes with read and write (they go through the action's copy) or MemoryRouter.copy"
                + " (which does so); or copy once the action has returned. Nothing was done");
    }

    /** A mapping through a host staging copy while a data-path call on the block is under way. */
    StagingConflictException stagingBusy(MemoryHandle handle) {
        return new StagingConflictException(handle, "Block " + handle + " on " + device + " cannot be mapped now:"
                + " a read, write, copy, withMapped action or hint on it is under way (an asynchronous copy until"
                + " it has run, a withMapped action of this thread until it returns), and a host staging copy made"
                + " now would miss its bytes. Map it once that call has returned. Nothing was done");
    }

    /** Both devices of a mapping are given and one of them is this manager's. */
    void mappingDevices(Device sourceDevice, Device targetDevice) {
        if (sourceDevice == null || targetDevice == null) {
            throw new InvalidMemoryRequestException("Both devices of a mapping are required (source " + sourceDevice
                    + ", target " + targetDevice + ")");
        }
        if (!sourceDevice.equals(device) && !targetDevice.equals(device)) {
            throw new InvalidMemoryRequestException("Mapping " + sourceDevice + " <-> " + targetDevice
                    + " does not involve " + device + "; ask the manager of " + sourceDevice);
        }
    }

    InvalidMemoryRequestException noPeer(Device sourceDevice, Device targetDevice, Device other) {
        return new InvalidMemoryRequestException("Mapping " + sourceDevice + " <-> " + targetDevice
                + " is not provided by the " + backendName + " backend of " + device
                + ": no running " + other + " is known to it"
                + (device.isCpu() && !other.isCpu()
                   // A GPU's backend answers the host's managers as peers, never the other way round.
                   ? "; a mapping between a host device and a " + other.kind() + " device is made by the "
                     + other.kind() + " device's manager: ask " + other + "'s"
                   : ""));
    }

    InvalidMemoryRequestException wrongPeer(Device sourceDevice, Device targetDevice, Device other, Device answered) {
        return new InvalidMemoryRequestException("Mapping " + sourceDevice + " <-> " + targetDevice
                + " is refused on " + device + ": the " + backendName + " backend's lookup of running managers answered"
                + " the manager of " + answered + " for " + other + ", whose handle would not be " + other
                + "'s; the backend's device registry is wrong or stale");
    }

    static void prefetchTarget(Device target) {
        if (target == null) {
            throw new InvalidMemoryRequestException("Prefetch target device is null");
        }
    }

    static void usageHint(MemoryUsageHint hint) {
        if (hint == null) {
            throw new InvalidMemoryRequestException("Usage hint is null");
        }
    }

    // ---------------------------------------------------------------- handle table

    static MemoryException noManagerNumber(long numbers) {
        return new MemoryException("No manager number is left for a new memory manager: all " + numbers
                + " were given out in this JVM, and a number is never given twice (a stale handle of a closed"
                + " manager would name a block of the new one); restart the JVM");
    }

    /** @return the error for a handle table with no slot left, saying where its slots are */
    static MemoryException handleTableFull(long managerId, int slotLimit, int retired, int namesPerSlot) {
        String where = "Handle table of manager " + managerId + " has no slot left for a new handle: ";
        if (retired == slotLimit) {
            return new MemoryException(where + "all " + slotLimit + " slots are retired (each named " + namesPerSlot
                    + " blocks, so that no stale handle can name a later one); this manager can issue no more handles:"
                    + " close it and use a new one");
        }
        return new MemoryException(where + retired + " of its " + slotLimit + " slots are retired (each named "
                + namesPerSlot + " blocks, so that no stale handle can name a later one), the other "
                + (slotLimit - retired)
                + " name live allocations or are spares of thread caches; free some allocations before allocating more");
    }

    // ---------------------------------------------------------------- out of memory and growth

    OutOfDeviceMemoryException outOfMemory(long size, MemoryType type, String why, long used) {
        long free = Math.max(0, capacity - used);
        return new OutOfDeviceMemoryException(device, size, free, "Out of memory on " + device + ": cannot allocate "
                + Bytes.exact(size) + " in the " + type + " pool: " + why + ". The device has " + Bytes.human(free)
                + " of " + Bytes.human(capacity) + " free; free blocks, raise the limit, or defragment");
    }

    OutOfDeviceMemoryException preAllocationFailed(long bytes, MemoryType type, String why, long used) {
        return new OutOfDeviceMemoryException(device, bytes, Math.max(0, capacity - used),
                "Cannot pre-allocate " + Bytes.exact(bytes) + " for the " + type + " pool on " + device + ": " + why);
    }

    /** @return why a pool may not grow: its limit */
    static String poolAtLimit(Pool pool) {
        return poolAtLimit(pool.reserved, pool.config);
    }

    /** @return why a pool holding {@code reserved} bytes may not grow under {@code cfg}: its limit */
    static String poolAtLimit(long reserved, MemoryPoolConfig cfg) {
        return cfg.enableAutoExpansion()
                ? "the pool holds " + Bytes.human(reserved) + " and may hold at most "
                  + Bytes.human(Pool.limitOf(cfg)) + " (maxSize)"
                : "the pool holds " + Bytes.human(reserved) + " and may not grow (enableAutoExpansion=false)";
    }

    /**
     * @param held   bytes of the pools' chunks (what memoryInfo reports as reserved)
     * @param booked bytes of capacity booked: those chunks and the ones being asked for right now
     * @return why a pool may not grow: the device's capacity, the chunks being asked for apart (the
     *         upstream may yet refuse them)
     */
    String deviceFull(long held, long booked) {
        long asked = booked - held;
        return "the device's pools already hold " + Bytes.human(held) + " of its " + Bytes.human(capacity) + " capacity"
                + (asked > 0 ? " (" + Bytes.human(asked) + " more being reserved)" : "");
    }

    /** @return why a pool did not grow: the upstream refused */
    static String chunkRefused(long size, OutOfDeviceMemoryException e) {
        return "the device refused a chunk of " + Bytes.human(size) + " (" + e.getMessage() + ")";
    }

    DeviceUnavailableException backendGone(LinkageError e) {
        return new DeviceUnavailableException(device, "The backend of " + device + " was updated or"
                + " refreshed while a chunk was reserved (" + e + "); use the manager of its new revision", e);
    }
}
