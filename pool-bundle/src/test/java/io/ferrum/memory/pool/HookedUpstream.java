package io.ferrum.memory.pool;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.OutOfDeviceMemoryException;

/**
 * A real upstream (each chunk real off-heap memory of its own shared arena) that lets a test stop
 * the engine inside an upstream call: {@link #pauseNext} makes the next call of one kind wait
 * until the test lets it go, so that a race can be forced instead of hoped for. It can also hand
 * out chunks whose memory is not zero (as {@code posix_memalign} may) and chunks only
 * {@code 4096}-aligned, and it records calls the engine must never make (a release after close,
 * a call on a released chunk).
 */
public final class HookedUpstream implements DeviceUpstream {
    /** The upstream calls a test can pause. */
    public enum Call { RESERVE, COPY, FILL, RELEASE }

    record Chunk(Arena arena, MemorySegment segment) implements DeviceChunk {
        @Override
        public long size() {
            return segment.byteSize();
        }

        @Override
        public long address() {
            return segment.address();
        }
    }

    /** A paused call: the test waits for it to arrive, then lets it go. */
    public static final class Pause {
        private final CountDownLatch arrived = new CountDownLatch(1);
        private final CountDownLatch go = new CountDownLatch(1);
        volatile Thread thread;

        /** Waits (at most 30 s) until the paused call has arrived. */
        public Thread awaitArrival() throws InterruptedException {
            if (!arrived.await(30, TimeUnit.SECONDS)) {
                throw new AssertionError("the paused upstream call never came");
            }
            return thread;
        }

        /** @return true once the call has arrived */
        public boolean arrived() {
            return arrived.getCount() == 0;
        }

        /** Lets the paused call go on. */
        public void release() {
            go.countDown();
        }

        void hold() {
            thread = Thread.currentThread();
            arrived.countDown();
            boolean interrupted = false;
            while (true) {
                try {
                    if (!go.await(60, TimeUnit.SECONDS)) {
                        throw new AssertionError("a paused upstream call was never let go");
                    }
                    break;
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private final Device device;
    private final long capacity;
    private final ConcurrentHashMap<Chunk, Boolean> live = new ConcurrentHashMap<>();
    /**
     * Every live chunk of every instance: a copy may touch a peer's chunk (another device's upstream,
     * {@link DeviceUpstream#copy}), which must then be live in its own upstream.
     */
    private static final java.util.Set<Chunk> ALL_LIVE = ConcurrentHashMap.newKeySet();
    private final ConcurrentHashMap<Call, Pause> paused = new ConcurrentHashMap<>();
    final AtomicInteger reserves = new AtomicInteger();
    /** The memory type each chunk was reserved for, by its address ({@link #reserve(long, MemoryType)}). */
    private final ConcurrentHashMap<Long, MemoryType> types = new ConcurrentHashMap<>();
    /** The most bytes held at once. */
    final java.util.concurrent.atomic.AtomicLong peakBytes = new java.util.concurrent.atomic.AtomicLong();
    volatile boolean closed;
    /** Fill new chunks with this byte (non-zero: memory as malloc may return it); 0 leaves them zero. */
    volatile byte dirt;
    /** Hand out chunks whose address is 4096 modulo 8192 (only the promised alignment, never more). */
    volatile boolean barelyAligned;
    /** Calls the engine must never make, described; empty when all was well. */
    final StringBuffer violations = new StringBuffer();

    public HookedUpstream(Device device, long capacity) {
        this.device = device;
        this.capacity = capacity;
    }

    public HookedUpstream(long capacity) {
        this(Device.cpu(), capacity);
    }

    /** Makes the next call of {@code call} wait until the returned pause is released. */
    public Pause pauseNext(Call call) {
        Pause p = new Pause();
        if (paused.putIfAbsent(call, p) != null) {
            throw new IllegalStateException(call + " is already paused");
        }
        return p;
    }

    private void maybePause(Call call) {
        Pause p = paused.remove(call);
        if (p != null) {
            p.hold();
        }
    }

    /** @return true once the engine closed this upstream (for tests of other packages) */
    public boolean isClosed() {
        return closed;
    }

    /** @return the calls the engine must never make that it made, described; empty when all was well */
    public String violations() {
        return violations.toString();
    }

    public long liveBytes() {
        return live.keySet().stream().mapToLong(Chunk::size).sum();
    }

    @Override
    public Device device() {
        return device;
    }

    @Override
    public String backendName() {
        return "test-hooked";
    }

    @Override
    public long physicalCapacity() {
        return capacity;
    }

    @Override
    public long chunkAlignment() {
        return 4096;
    }

    @Override
    public DeviceChunk reserve(long bytes, MemoryType type) {
        DeviceChunk c = reserve(bytes);
        types.put(c.address(), type);
        return c;
    }

    /** @return the memory type the engine reserved the chunk holding {@code address} for, or null */
    public MemoryType typeOfChunkAt(long address) {
        for (Chunk c : live.keySet()) {
            if (address >= c.address() && address < c.address() + c.size()) {
                return types.get(c.address());
            }
        }
        return null;
    }

    @Override
    public DeviceChunk reserve(long bytes) {
        reserves.incrementAndGet();
        maybePause(Call.RESERVE);
        if (closed) {
            violations.append("reserve after close; ");
        }
        if (liveBytes() + bytes > capacity) {
            throw new OutOfDeviceMemoryException(device, bytes, capacity - liveBytes(), "test upstream full");
        }
        Arena arena = Arena.ofShared();
        MemorySegment s;
        if (barelyAligned) {
            MemorySegment whole = arena.allocate(bytes + 4096, 8192);
            s = whole.asSlice(4096, bytes);
        } else {
            s = arena.allocate(bytes, 4096);
        }
        if (dirt != 0) {
            s.fill(dirt);
        }
        Chunk c = new Chunk(arena, s);
        live.put(c, Boolean.TRUE);
        ALL_LIVE.add(c);
        peakBytes.accumulateAndGet(liveBytes(), Math::max);
        return c;
    }

    @Override
    public void release(DeviceChunk chunk) {
        maybePause(Call.RELEASE);
        if (closed) {
            violations.append("release after close; ");
        }
        Chunk c = (Chunk) chunk;
        if (live.remove(c) == null) {
            violations.append("chunk released twice; ");
            return;
        }
        ALL_LIVE.remove(c);
        c.arena.close();
    }

    private MemorySegment seg(DeviceChunk c) {
        if (!ALL_LIVE.contains((Chunk) c)) {
            violations.append("call on a released chunk; ");
        }
        return ((Chunk) c).segment;
    }

    @Override
    public void copy(DeviceChunk src, long srcOffset, DeviceChunk dst, long dstOffset, long bytes) {
        maybePause(Call.COPY);
        MemorySegment.copy(seg(src), srcOffset, seg(dst), dstOffset, bytes);
    }

    @Override
    public void copyToHost(DeviceChunk src, long srcOffset, MemorySegment dst, long bytes) {
        MemorySegment.copy(seg(src), srcOffset, dst, 0, bytes);
    }

    @Override
    public void copyFromHost(MemorySegment src, DeviceChunk dst, long dstOffset, long bytes) {
        MemorySegment.copy(src, 0, seg(dst), dstOffset, bytes);
    }

    @Override
    public void fill(DeviceChunk chunk, long offset, long bytes, byte value) {
        maybePause(Call.FILL);
        seg(chunk).asSlice(offset, bytes).fill(value);
    }

    @Override
    public Optional<MemorySegment> hostSegment(DeviceChunk chunk) {
        return Optional.of(((Chunk) chunk).segment);
    }

    @Override
    public void close() {
        if (closed) {
            violations.append("closed twice; ");
        }
        closed = true;
    }
}
