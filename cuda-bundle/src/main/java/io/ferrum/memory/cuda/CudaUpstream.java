package io.ferrum.memory.cuda;

import java.lang.foreign.MemorySegment;
import java.util.Optional;
import java.util.concurrent.locks.ReentrantLock;

import jcuda.Pointer;
import jcuda.driver.CUdevice;
import jcuda.driver.CUdevice_attribute;
import jcuda.driver.CUmemAttach_flags;
import jcuda.driver.CUstream;
import jcuda.driver.JCudaDriver;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.MemoryUsageHint;
import io.ferrum.memory.pool.BundleClasses;
import io.ferrum.memory.pool.DeviceChunk;
import io.ferrum.memory.pool.DeviceUpstream;

/**
 * One GPU's memory for the pool engine, over JCuda's driver API. Chunks come from {@code cuMemAlloc}
 * (device memory), {@code cuMemHostAlloc} (page-locked host memory) or {@code cuMemAllocManaged}
 * (managed memory), by {@link ChunkKind}; copies between chunks use {@code cuMemcpyAsync} (unified
 * addressing covers every kind), fills {@code cuMemsetD8Async}.
 *
 * <p><b>Peer copies.</b> A chunk may be another GPU's (the engine's {@code copyToPeer}, or a
 * mapping's alias): between two GPUs' device memory the copy is {@code cuMemcpyPeerAsync}, after
 * {@link PeerAccess} asked once for access to the peer's context, so that it goes over the peer
 * link where the pair has one (the driver stages it through host memory where not). Pinned and
 * managed memory are reachable from every context, so {@code cuMemcpyAsync} serves them.
 *
 * <p><b>Ordering.</b> Every call makes the device's primary context current on the calling thread,
 * enqueues on that thread's {@link CurrentStream} and synchronises it before it returns: the engine
 * unpins a block when a call returns, so the device must be done with it by then. A context is
 * current per OS thread, and a virtual thread that parks (on a lock of the staging ring, the bounce
 * buffer or the peer table) goes on on whichever carrier thread is free: the context is made
 * current again after each such wait, before the next driver call.
 *
 * <p><b>Host copies.</b> From and to a native segment inside a pinned chunk of this bundle the copy
 * is one DMA; from anything else (heap arrays, pageable native memory) it goes through the
 * {@link CudaStaging} ring, pipelined in slots.
 *
 * <p><b>Overlap.</b> {@code cuMemcpy} has no memmove semantics: overlapping ranges of one chunk (a
 * defragmentation's slide, a copy within one block) go through a bounce buffer in the order {@link
 * CopyPlan} gives, one copy at a time: the buffer is held until the copy's stream is synchronised.
 *
 * <p><b>Memory types.</b> The engine reserves each pool's chunks with the pool's memory type
 * ({@link #reserve(long, MemoryType)}): GENERAL, TENSOR, CACHE and TEMPORARY get device memory,
 * PINNED page-locked host memory and MAPPED managed memory ({@link ChunkKind}); the last two are
 * host-addressable, so mapping them gives a view of the memory itself, not a staging copy.
 *
 * <p><b>Classes.</b> The first upstream made defines every class of the bundle ({@link
 * BundleClasses}): its managers serve callers until a refresh, also while Equinox uninstalls the
 * bundle, and Equinox loads no class of a bundle then.
 */
final class CudaUpstream implements DeviceUpstream {
    static {
        // Every class of the bundle before the first upstream serves: see BundleClasses (Equinox, uninstall).
        BundleClasses.defineAll(CudaUpstream.class);
    }

    /** The alignment {@code cuMemAlloc} guarantees; pinned and managed memory are page-aligned. */
    static final long CHUNK_ALIGNMENT = 256;

    private final Device device;
    private final PrimaryContext context;
    private final long capacity;
    private final CudaStaging staging;
    private final PinnedRanges pinned;
    private final long bounceBytes;
    private final ManagedHints hints;
    /** Access from this context to other GPUs' memory, asked for on the first copy that needs it. */
    private final PeerAccess<PrimaryContext> peers;
    /**
     * Held by an overlapping copy from its first piece until its stream is synchronised: the engine
     * copies concurrently (two threads moving bytes within their own blocks, two pools compacting),
     * and one bounce buffer must carry one copy's pieces at a time.
     */
    private final ReentrantLock bounceLock = new ReentrantLock();
    private CudaChunk bounce;

    /**
     * @param context     a retain of the device's primary context; this upstream releases it on close,
     *                    or at once when this constructor throws
     * @param settings    staging ring and bounce sizes
     * @param pinned      the bundle's pinned ranges (shared, so one device's pinned memory is direct
     *                    for another's copies)
     */
    CudaUpstream(PrimaryContext context, CudaSettings settings, PinnedRanges pinned) {
        this.device = context.device();
        this.context = context;
        this.pinned = pinned;
        this.staging = new CudaStaging(context, settings.stagingSlots(), settings.stagingSlotBytes());
        this.bounceBytes = settings.stagingSlotBytes();
        this.hints = new ManagedHints(device, new HintCalls());
        this.peers = new PeerAccess<>(context, PeerAccess.DRIVER);
        long[] total = new long[1];
        try {
            context.makeCurrent();
            Cu.check(JCudaDriver.cuDeviceTotalMem(total, context.cuDevice()), device, "cuDeviceTotalMem");
        } catch (RuntimeException | Error e) {
            // No upstream to close: the retain this constructor took over goes back here.
            context.close();
            throw e;
        }
        this.capacity = total[0];
    }

    @Override
    public Device device() {
        return device;
    }

    @Override
    public String backendName() {
        return "jcuda";
    }

    @Override
    public long physicalCapacity() {
        return capacity;
    }

    @Override
    public long chunkAlignment() {
        return CHUNK_ALIGNMENT;
    }

    /** @return free and total bytes of the device now ({@code cuMemGetInfo}) */
    long[] deviceMemoryInfo() {
        context.makeCurrent();
        long[] free = new long[1];
        long[] total = new long[1];
        Cu.check(JCudaDriver.cuMemGetInfo(free, total), device, "cuMemGetInfo");
        return new long[] {free[0], total[0]};
    }

    @Override
    public DeviceChunk reserve(long bytes) {
        return reserve(bytes, MemoryType.GENERAL);
    }

    /**
     * @param bytes more than zero
     * @param type  the pool's memory type: PINNED gives page-locked host memory, MAPPED managed memory
     * @return the chunk
     */
    @Override
    public DeviceChunk reserve(long bytes, MemoryType type) {
        context.makeCurrent();
        ChunkKind kind = ChunkKind.of(type);
        return switch (kind) {
            case DEVICE -> {
                NativePointers.DevicePointer p = new NativePointers.DevicePointer();
                Cu.checkReserve(Cu.rc(() -> JCudaDriver.cuMemAlloc(p, bytes)), device, "cuMemAlloc", bytes);
                yield new CudaChunk(kind, p, p.address(), 0, bytes, null, context);
            }
            case MANAGED -> {
                NativePointers.DevicePointer p = new NativePointers.DevicePointer();
                Cu.checkReserve(Cu.rc(() -> JCudaDriver.cuMemAllocManaged(p, bytes, CUmemAttach_flags.CU_MEM_ATTACH_GLOBAL)),
                        device, "cuMemAllocManaged", bytes);
                yield new CudaChunk(kind, p, p.address(), p.address(), bytes, null, context);
            }
            case PINNED -> {
                int flags = JCudaDriver.CU_MEMHOSTALLOC_PORTABLE | JCudaDriver.CU_MEMHOSTALLOC_DEVICEMAP;
                Pointer h;
                long host;
                if (LargeHostAlloc.jcudaCanWrap(bytes)) {
                    NativePointers.HostPointer filled = new NativePointers.HostPointer();
                    Cu.checkReserve(Cu.rc(() -> JCudaDriver.cuMemHostAlloc(filled, bytes, flags)), device, "cuMemHostAlloc",
                            bytes);
                    h = filled;
                    host = filled.address();
                } else {
                    host = LargeHostAlloc.allocate(bytes, flags, device);
                    h = new NativePointers.HostAddress(host);
                }
                NativePointers.DevicePointer p = new NativePointers.DevicePointer();
                try {
                    Cu.check(JCudaDriver.cuMemHostGetDevicePointer(p, h, 0), device, "cuMemHostGetDevicePointer");
                } catch (RuntimeException e) {
                    JCudaDriver.cuMemFreeHost(h);
                    throw e;
                }
                pinned.add(host, bytes);
                yield new CudaChunk(kind, p, p.address(), host, bytes, h, context);
            }
        };
    }

    @Override
    public void release(DeviceChunk chunk) {
        CudaChunk c = (CudaChunk) chunk;
        context.makeCurrent();
        switch (c.kind()) {
            case DEVICE, MANAGED -> Cu.check(JCudaDriver.cuMemFree(c.pointer()), device, "cuMemFree");
            case PINNED -> {
                pinned.remove(c.hostAddress());
                Cu.check(JCudaDriver.cuMemFreeHost(c.hostPointer()), device, "cuMemFreeHost");
            }
        }
    }

    @Override
    public void copy(DeviceChunk src, long srcOffset, DeviceChunk dst, long dstOffset, long bytes) {
        if (bytes == 0) {
            return;
        }
        CudaChunk s = (CudaChunk) src;
        CudaChunk d = (CudaChunk) dst;
        context.makeCurrent();
        CUstream stream = CurrentStream.get(device);
        if (s == d && CopyPlan.overlaps(srcOffset, dstOffset, bytes)) {
            copyOverlapping(s, srcOffset, dstOffset, bytes, stream);
        } else if (s.context() != d.context() && s.kind() == ChunkKind.DEVICE && d.kind() == ChunkKind.DEVICE) {
            // Two GPUs' device memory (a peer copy, or a mapping's alias): over the peer link where
            // the pair has one, else staged by the driver. The engine holds both blocks meanwhile, so
            // both contexts' retains are live.
            peers.ensure(s.context());
            peers.ensure(d.context());
            context.makeCurrent(); // the lookups may have parked a virtual thread, now on another carrier
            Cu.check(JCudaDriver.cuMemcpyPeerAsync(d.at(dstOffset), d.context().context(), s.at(srcOffset),
                    s.context().context(), bytes, stream), device, "cuMemcpyPeerAsync");
            synchronize(stream);
        } else {
            Cu.check(JCudaDriver.cuMemcpyAsync(d.at(dstOffset), s.at(srcOffset), bytes, stream), device, "cuMemcpyAsync");
            synchronize(stream);
        }
    }

    /**
     * The pieces through the bounce buffer, holding it until the device has run them: another
     * thread's pieces (on another stream, or interleaved on the same one) would otherwise overwrite
     * the buffer between this copy's read and its write. A failed piece still waits for the pieces
     * already enqueued before the buffer is let go.
     */
    private void copyOverlapping(CudaChunk c, long srcOffset, long dstOffset, long bytes, CUstream stream) {
        bounceLock.lock();
        boolean done = false;
        try {
            enqueueOverlapping(c, srcOffset, dstOffset, bytes, stream);
            synchronize(stream);
            done = true;
        } finally {
            if (!done) {
                // Best effort, the failure already on its way: no piece may still use the buffer.
                JCudaDriver.cuStreamSynchronize(stream);
            }
            bounceLock.unlock();
        }
    }

    private void enqueueOverlapping(CudaChunk c, long srcOffset, long dstOffset, long bytes, CUstream stream) {
        CudaChunk b = bounce();
        // After the locks: a virtual thread that parked on one goes on on another carrier thread,
        // whose current context (per OS thread) may be another device's or none.
        context.makeCurrent();
        boolean forward = CopyPlan.forward(srcOffset, dstOffset);
        long n = CopyPlan.pieces(bytes, bounceBytes);
        for (long k = 0; k < n; k++) {
            long off = CopyPlan.overlapPieceOffset(k, bytes, bounceBytes, forward);
            long len = Math.min(bounceBytes, bytes - off);
            Cu.check(JCudaDriver.cuMemcpyAsync(b.pointer(), c.at(srcOffset + off), len, stream), device, "cuMemcpyAsync");
            Cu.check(JCudaDriver.cuMemcpyAsync(c.at(dstOffset + off), b.pointer(), len, stream), device, "cuMemcpyAsync");
        }
    }

    /** @return the bounce buffer for overlapping copies, made on first use (one at a time: synchronized) */
    private synchronized CudaChunk bounce() {
        if (bounce == null) {
            bounce = (CudaChunk) reserve(bounceBytes, MemoryType.GENERAL);
        }
        return bounce;
    }

    @Override
    public void copyToHost(DeviceChunk src, long srcOffset, MemorySegment dst, long bytes) {
        if (bytes == 0) {
            return;
        }
        CudaChunk s = (CudaChunk) src;
        context.makeCurrent();
        if (pinned.direct(dst, bytes)) {
            CUstream stream = CurrentStream.get(device);
            Cu.check(JCudaDriver.cuMemcpyDtoHAsync(new NativePointers.HostAddress(dst.address()), s.at(srcOffset),
                    bytes, stream), device, "cuMemcpyDtoHAsync");
            synchronize(stream);
        } else {
            staging.download(s, srcOffset, dst, bytes);
        }
    }

    @Override
    public void copyFromHost(MemorySegment src, DeviceChunk dst, long dstOffset, long bytes) {
        if (bytes == 0) {
            return;
        }
        CudaChunk d = (CudaChunk) dst;
        context.makeCurrent();
        if (pinned.direct(src, bytes)) {
            CUstream stream = CurrentStream.get(device);
            Cu.check(JCudaDriver.cuMemcpyHtoDAsync(d.at(dstOffset), new NativePointers.HostAddress(src.address()),
                    bytes, stream), device, "cuMemcpyHtoDAsync");
            synchronize(stream);
        } else {
            staging.upload(src, d, dstOffset, bytes);
        }
    }

    @Override
    public void fill(DeviceChunk chunk, long offset, long bytes, byte value) {
        if (bytes == 0) {
            return;
        }
        CudaChunk c = (CudaChunk) chunk;
        context.makeCurrent();
        CUstream stream = CurrentStream.get(device);
        Cu.check(JCudaDriver.cuMemsetD8Async(c.at(offset), value, bytes, stream), device, "cuMemsetD8Async");
        synchronize(stream);
    }

    @Override
    public Optional<MemorySegment> hostSegment(DeviceChunk chunk) {
        CudaChunk c = (CudaChunk) chunk;
        return hints.hostMayAddress(c)
                ? Optional.of(MemorySegment.ofAddress(c.hostAddress()).reinterpret(c.size()))
                : Optional.empty();
    }

    /** See {@link ManagedHints#prefetch}: a no-op where the driver cannot take it. */
    @Override
    public void prefetch(DeviceChunk chunk, long offset, long bytes, Device target) {
        hints.prefetch((CudaChunk) chunk, offset, bytes, target);
    }

    /** See {@link ManagedHints#advise}: a no-op where the driver cannot take it. */
    @Override
    public void advise(DeviceChunk chunk, long offset, long bytes, MemoryUsageHint hint) {
        hints.advise((CudaChunk) chunk, offset, bytes, hint);
    }

    /** See {@link ManagedHints#unadvise}: the pool frees a hinted block of managed memory. */
    @Override
    public void unadvise(DeviceChunk chunk, long offset, long bytes) {
        hints.unadvise((CudaChunk) chunk, offset, bytes);
    }

    /** The hints' driver calls, on this upstream's context and the calling thread's stream. */
    private final class HintCalls implements ManagedHints.Driver {
        @Override
        public boolean concurrentManagedAccess(int ordinal) {
            context.makeCurrent();
            CUdevice d = context.cuDevice();
            if (ordinal != device.index()) {
                d = new CUdevice();
                Cu.check(JCudaDriver.cuDeviceGet(d, ordinal), device, "cuDeviceGet (cuda:" + ordinal + ")");
            }
            int[] value = new int[1];
            Cu.check(JCudaDriver.cuDeviceGetAttribute(value,
                    CUdevice_attribute.CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, d), device,
                    "cuDeviceGetAttribute (concurrent managed access of cuda:" + ordinal + ")");
            return value[0] != 0;
        }

        @Override
        public void prefetch(CudaChunk c, long offset, long bytes, int ordinal) {
            context.makeCurrent();
            CUdevice where;
            if (ordinal == ManagedHints.CPU_ORDINAL) {
                where = JCudaDriver.CU_DEVICE_CPU;
            } else if (ordinal == device.index()) {
                where = context.cuDevice();
            } else {
                where = new CUdevice();
                Cu.check(JCudaDriver.cuDeviceGet(where, ordinal), device, "cuDeviceGet (prefetch to cuda:" + ordinal + ")");
            }
            CUstream stream = CurrentStream.get(device);
            Cu.check(JCudaDriver.cuMemPrefetchAsync(c.at(offset), bytes, where, stream), device, "cuMemPrefetchAsync");
            synchronize(stream);
        }

        @Override
        public void advise(CudaChunk c, long offset, long bytes, int advice) {
            context.makeCurrent();
            Cu.check(JCudaDriver.cuMemAdvise(c.at(offset), bytes, advice, context.cuDevice()), device, "cuMemAdvise");
        }
    }

    private void synchronize(CUstream stream) {
        Cu.check(JCudaDriver.cuStreamSynchronize(stream), device, "cuStreamSynchronize");
    }

    /** Frees the staging ring and the bounce buffer, then releases this upstream's context retain. */
    @Override
    public void close() {
        try {
            context.makeCurrent();
            staging.close();
            synchronized (this) {
                if (bounce != null) {
                    release(bounce);
                    bounce = null;
                }
            }
        } finally {
            context.close();
        }
    }
}
