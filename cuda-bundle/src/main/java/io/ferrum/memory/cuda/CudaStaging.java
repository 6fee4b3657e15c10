package io.ferrum.memory.cuda;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.locks.ReentrantLock;

import jcuda.driver.CUevent;
import jcuda.driver.CUevent_flags;
import jcuda.driver.CUstream;
import jcuda.driver.JCudaDriver;

/**
 * The page-locked staging ring of one upstream: {@code slots} buffers from {@code cuMemHostAlloc}
 * and one {@code CUevent} each, made on first use and freed on {@link #close()}. One copy at a time
 * uses the ring (a lock); copies run on the calling thread's {@link CurrentStream}.
 */
final class CudaStaging implements AutoCloseable {
    private final PrimaryContext context;
    private final int slots;
    private final long slotBytes;
    private final ReentrantLock lock = new ReentrantLock();
    private NativePointers.HostPointer[] buffers;
    private MemorySegment[] views;
    private CUevent[] events;
    private boolean[] used;
    private boolean closed;

    /**
     * @param context   the device's context
     * @param slots     buffers in the ring, 2 or more for any overlap
     * @param slotBytes bytes per buffer
     */
    CudaStaging(PrimaryContext context, int slots, long slotBytes) {
        this.context = context;
        this.slots = slots;
        this.slotBytes = slotBytes;
    }

    /** Copies {@code bytes} of {@code src} to {@code dst} at {@code dstOffset}, through the ring. */
    void upload(MemorySegment src, CudaChunk dst, long dstOffset, long bytes) {
        lock.lock();
        try {
            StagingRing.upload(src, bytes, channel(dst, dstOffset, CurrentStream.get(context.device())));
        } finally {
            lock.unlock();
        }
    }

    /** Copies {@code bytes} of {@code src} at {@code srcOffset} into {@code dst}, through the ring. */
    void download(CudaChunk src, long srcOffset, MemorySegment dst, long bytes) {
        lock.lock();
        try {
            StagingRing.download(dst, bytes, channel(src, srcOffset, CurrentStream.get(context.device())));
        } finally {
            lock.unlock();
        }
    }

    /**
     * The ring for one copy; the caller holds the lock. The context is made current here, after the
     * lock: a driver context is current per OS thread, and a virtual thread that parked on the lock
     * may go on on another carrier thread, where another context or none is current.
     */
    private StagingRing.Channel channel(CudaChunk chunk, long base, CUstream stream) {
        context.makeCurrent();
        allocate();
        java.util.Arrays.fill(used, false);
        return new StagingRing.Channel() {
            @Override
            public int slots() {
                return slots;
            }

            @Override
            public long slotBytes() {
                return slotBytes;
            }

            @Override
            public MemorySegment slot(int i) {
                return views[i];
            }

            @Override
            public void upload(int i, long offset, long bytes) {
                Cu.check(JCudaDriver.cuMemcpyHtoDAsync(chunk.at(base + offset), buffers[i], bytes, stream),
                        context.device(), "cuMemcpyHtoDAsync");
                record(i, stream);
            }

            @Override
            public void download(int i, long offset, long bytes) {
                Cu.check(JCudaDriver.cuMemcpyDtoHAsync(buffers[i], chunk.at(base + offset), bytes, stream),
                        context.device(), "cuMemcpyDtoHAsync");
                record(i, stream);
            }

            @Override
            public void await(int i) {
                if (used[i]) {
                    used[i] = false;
                    Cu.check(JCudaDriver.cuEventSynchronize(events[i]), context.device(), "cuEventSynchronize");
                }
            }
        };
    }

    private void record(int i, CUstream stream) {
        Cu.check(JCudaDriver.cuEventRecord(events[i], stream), context.device(), "cuEventRecord");
        used[i] = true;
    }

    /** Makes the ring on first use; the caller holds the lock and the context is current. */
    private void allocate() {
        if (closed) {
            throw new io.ferrum.memory.api.DeviceUnavailableException(context.device(), "The staging ring of "
                    + context.device() + " is closed: its backend stopped");
        }
        if (buffers != null) {
            return;
        }
        NativePointers.HostPointer[] b = new NativePointers.HostPointer[slots];
        MemorySegment[] v = new MemorySegment[slots];
        CUevent[] e = new CUevent[slots];
        try {
            for (int i = 0; i < slots; i++) {
                b[i] = new NativePointers.HostPointer();
                NativePointers.HostPointer slot = b[i];
                int rc = Cu.rc(() -> JCudaDriver.cuMemHostAlloc(slot, slotBytes, JCudaDriver.CU_MEMHOSTALLOC_PORTABLE));
                Cu.checkReserve(rc, context.device(), "cuMemHostAlloc (staging)", slotBytes);
                v[i] = MemorySegment.ofAddress(b[i].address()).reinterpret(slotBytes);
                e[i] = new CUevent();
                Cu.check(JCudaDriver.cuEventCreate(e[i], CUevent_flags.CU_EVENT_DISABLE_TIMING), context.device(),
                        "cuEventCreate");
            }
        } catch (RuntimeException | Error failed) {
            free(b, e);
            throw failed;
        }
        buffers = b;
        views = v;
        events = e;
        used = new boolean[slots];
    }

    private static void free(NativePointers.HostPointer[] b, CUevent[] e) {
        for (int i = 0; i < b.length; i++) {
            if (b[i] != null && b[i].address() != 0) {
                JCudaDriver.cuMemFreeHost(b[i]);
            }
            if (e[i] != null) {
                JCudaDriver.cuEventDestroy(e[i]);
            }
        }
    }

    /** Frees the slots and events; later copies are refused. The context must not be released yet. */
    @Override
    public void close() {
        lock.lock();
        try {
            closed = true;
            if (buffers != null) {
                context.makeCurrent(); // after the lock, as in channel()
                free(buffers, events);
                buffers = null;
                views = null;
                events = null;
            }
        } finally {
            lock.unlock();
        }
    }
}
