package io.ferrum.memory.pool.testkit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryUsageHint;
import io.ferrum.memory.api.OutOfDeviceMemoryException;
import io.ferrum.memory.pool.DeviceChunk;
import io.ferrum.memory.pool.DeviceUpstream;

/**
 * The promises of {@link DeviceUpstream}, as a suite every backend runs against its own upstream
 * (the way RMM runs one {@code mr_ref_test} per memory resource). A backend's test class extends
 * it and supplies the upstream:
 *
 * <pre>{@code
 * class FfmUpstreamContractTest extends DeviceUpstreamContract {
 *     protected DeviceUpstream createUpstream() { return new FfmUpstream(Device.cpu(), 0, new AtomicLong()); }
 * }
 * }</pre>
 *
 * <p>What it checks: the device facts (a backend name, a capacity, a power-of-two chunk
 * alignment); reserve and release (chunks of at least the size asked, aligned, never overlapping,
 * reusable after release); a request no device can satisfy refused with {@link
 * OutOfDeviceMemoryException}, changing nothing; {@code copyFromHost}/{@code copyToHost} at
 * offsets; {@code copy} between chunks and, within one chunk, with {@code memmove} semantics both
 * ways; {@code fill} of exactly its range; a {@code hostSegment}, when offered, that is the chunk's
 * memory; hints and prefetch that never change contents; thread safety; close once every chunk is
 * back. Contents are read through {@code copyToHost} only, so the suite runs on memory the CPU
 * cannot address.
 *
 * <p>Each test gets a fresh upstream; chunks a test leaves are released and the upstream is closed
 * after it.
 */
public abstract class DeviceUpstreamContract {

    /** The upstream under test: new for each test. */
    protected DeviceUpstream upstream;

    private final List<DeviceChunk> held = new ArrayList<>();
    private boolean closed;

    /** @return a new upstream holding no chunks; the suite releases what it reserves and closes it */
    protected abstract DeviceUpstream createUpstream();

    /**
     * @return a size no device of this kind can provide, a multiple of {@link
     *         DeviceUpstream#chunkAlignment()}; 2<sup>62</sup> bytes by default
     */
    protected long unsatisfiableBytes() {
        return 1L << 62;
    }

    /** @return the size of the chunks most tests reserve: 1 MiB rounded up to the chunk alignment */
    protected long chunkBytes() {
        return roundUp(1L << 20, upstream.chunkAlignment());
    }

    @BeforeEach
    final void openUpstream() {
        upstream = createUpstream();
        assertNotNull(upstream, "createUpstream() returned null");
    }

    @AfterEach
    final void closeUpstream() {
        for (DeviceChunk c : held) {
            upstream.release(c);
        }
        held.clear();
        if (!closed) {
            upstream.close();
        }
    }

    // ------------------------------------------------------------------ helpers

    private static long roundUp(long bytes, long alignment) {
        return (bytes + alignment - 1) / alignment * alignment;
    }

    /** Reserves a chunk that the suite releases after the test. */
    protected final DeviceChunk reserve(long bytes) {
        DeviceChunk c = upstream.reserve(bytes);
        assertNotNull(c, "reserve(" + bytes + ") returned null");
        held.add(c);
        return c;
    }

    /** Releases a chunk reserved with {@link #reserve(long)}. */
    protected final void release(DeviceChunk chunk) {
        assertTrue(held.remove(chunk), "not a chunk of this test");
        upstream.release(chunk);
    }

    /** @return {@code n} bytes that differ from one position to the next and from one seed to another */
    static byte[] pattern(int n, int seed) {
        byte[] b = new byte[n];
        for (int i = 0; i < n; i++) {
            b[i] = (byte) (seed * 131 + i * 31 + (i >>> 8));
        }
        return b;
    }

    /** Writes {@code bytes} into the chunk at {@code offset} through {@code copyFromHost}. */
    protected final void write(DeviceChunk chunk, long offset, byte[] bytes) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment src = a.allocate(bytes.length);
            MemorySegment.copy(bytes, 0, src, ValueLayout.JAVA_BYTE, 0, bytes.length);
            upstream.copyFromHost(src, chunk, offset, bytes.length);
        }
    }

    /** @return {@code length} bytes of the chunk from {@code offset}, through {@code copyToHost} */
    protected final byte[] read(DeviceChunk chunk, long offset, int length) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment dst = a.allocate(length);
            upstream.copyToHost(chunk, offset, dst, length);
            return dst.toArray(ValueLayout.JAVA_BYTE);
        }
    }

    private static byte[] filled(int n, byte value) {
        byte[] b = new byte[n];
        Arrays.fill(b, value);
        return b;
    }

    // ------------------------------------------------------------------ device facts

    @Test
    void describesItsDeviceBackendCapacityAndAlignment() {
        Device d = upstream.device();
        assertNotNull(d, "device()");
        String name = upstream.backendName();
        assertTrue(name != null && !name.isBlank() && name.strip().equals(name),
                "backendName() is a service property value: not blank, no surrounding space: '" + name + "'");
        assertTrue(upstream.physicalCapacity() > 0, "physicalCapacity() " + upstream.physicalCapacity());
        long alignment = upstream.chunkAlignment();
        assertTrue(alignment > 0 && Long.bitCount(alignment) == 1, "chunkAlignment() " + alignment + " is not a power of two");
    }

    // ------------------------------------------------------------------ reserve and release

    @Test
    void reserveGivesChunksOfAtLeastTheSizeAtTheChunkAlignment() {
        long alignment = upstream.chunkAlignment();
        for (long bytes : new long[] {alignment, 3 * alignment, chunkBytes()}) {
            DeviceChunk c = reserve(bytes);
            assertTrue(c.size() >= bytes, "reserve(" + bytes + ") gave a chunk of " + c.size() + " bytes");
            assertEquals(0, Long.remainderUnsigned(c.address(), alignment),
                    "chunk address 0x" + Long.toHexString(c.address()) + " is not " + alignment + "-aligned");
            release(c);
        }
    }

    @Test
    void chunksNeverOverlap() {
        int n = 8;
        int size = (int) Math.min(chunkBytes(), 1 << 20);
        List<DeviceChunk> chunks = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            DeviceChunk c = reserve(size);
            write(c, 0, pattern(size, i));
            chunks.add(c);
        }
        for (int i = 0; i < n; i++) {
            assertArrayEquals(pattern(size, i), read(chunks.get(i), 0, size), "chunk " + i + " was overwritten by another");
            for (int j = i + 1; j < n; j++) {
                DeviceChunk a = chunks.get(i);
                DeviceChunk b = chunks.get(j);
                assertTrue(a.address() + a.size() <= b.address() || b.address() + b.size() <= a.address(),
                        "chunks " + i + " and " + j + " overlap in the device's address space");
            }
        }
    }

    @Test
    void releasedMemoryCanBeReservedAgain() {
        long bytes = chunkBytes();
        for (int round = 0; round < 64; round++) {
            DeviceChunk c = reserve(bytes);
            write(c, bytes - 8, pattern(8, round));
            assertArrayEquals(pattern(8, round), read(c, bytes - 8, 8), "round " + round);
            release(c);
        }
    }

    @Test
    void aRequestNoDeviceCanSatisfyIsRefusedWithOutOfDeviceMemoryAndChangesNothing() {
        long bytes = unsatisfiableBytes();
        DeviceChunk before = reserve(chunkBytes());
        write(before, 0, pattern(64, 7));

        OutOfDeviceMemoryException e = assertThrows(OutOfDeviceMemoryException.class, () -> upstream.reserve(bytes));

        assertEquals(bytes, e.requestedBytes(), "the exception names the bytes asked for");
        assertTrue(e.device() == null || e.device().equals(upstream.device()), "the exception names the device: " + e.device());
        assertTrue(e.getMessage() != null && !e.getMessage().isBlank(), "the exception says why");
        assertArrayEquals(pattern(64, 7), read(before, 0, 64), "a chunk reserved before is untouched");
        DeviceChunk after = reserve(chunkBytes());
        assertTrue(after.size() >= chunkBytes(), "the upstream still works after a refusal");
    }

    // ------------------------------------------------------------------ copies and fills

    @Test
    void copyToHostAndFromHostMoveExactlyTheRangeAtOffsets() {
        DeviceChunk c = reserve(chunkBytes());
        int size = (int) Math.min(chunkBytes(), 64 * 1024);
        write(c, 0, filled(size, (byte) 0x5A));

        write(c, 100, pattern(1000, 1));

        assertArrayEquals(pattern(1000, 1), read(c, 100, 1000));
        assertArrayEquals(filled(100, (byte) 0x5A), read(c, 0, 100), "bytes before the range are untouched");
        assertArrayEquals(filled(size - 1100, (byte) 0x5A), read(c, 1100, size - 1100), "bytes after the range are untouched");
        write(c, chunkBytes() - 16, pattern(16, 2));
        assertArrayEquals(pattern(16, 2), read(c, chunkBytes() - 16, 16), "the last bytes of the chunk are reachable");
    }

    @Test
    void copyBetweenChunksMovesTheRange() {
        DeviceChunk src = reserve(chunkBytes());
        DeviceChunk dst = reserve(chunkBytes());
        write(src, 0, pattern(4096, 3));
        write(dst, 0, filled(4096, (byte) 0x11));

        upstream.copy(src, 100, dst, 2000, 1000);

        assertArrayEquals(Arrays.copyOfRange(pattern(4096, 3), 100, 1100), read(dst, 2000, 1000));
        assertArrayEquals(filled(2000, (byte) 0x11), read(dst, 0, 2000), "bytes before the range are untouched");
        assertArrayEquals(filled(1096, (byte) 0x11), read(dst, 3000, 1096), "bytes after the range are untouched");
        assertArrayEquals(pattern(4096, 3), read(src, 0, 4096), "the source is untouched");
    }

    @Test
    void copyWithinAChunkIsMemmoveForwardAndBackward() {
        DeviceChunk c = reserve(chunkBytes());
        byte[] p = pattern(4096, 4);

        write(c, 0, p);
        upstream.copy(c, 0, c, 10, 1000);
        byte[] forward = p.clone();
        System.arraycopy(p, 0, forward, 10, 1000);
        assertArrayEquals(forward, read(c, 0, 4096), "copy to a higher, overlapping range");

        write(c, 0, p);
        upstream.copy(c, 10, c, 0, 1000);
        byte[] backward = p.clone();
        System.arraycopy(p, 10, backward, 0, 1000);
        assertArrayEquals(backward, read(c, 0, 4096), "copy to a lower, overlapping range");
    }

    @Test
    void fillSetsExactlyItsRange() {
        DeviceChunk c = reserve(chunkBytes());
        write(c, 0, filled(4096, (byte) 0));

        upstream.fill(c, 10, 100, (byte) 0x7F);

        assertArrayEquals(filled(10, (byte) 0), read(c, 0, 10));
        assertArrayEquals(filled(100, (byte) 0x7F), read(c, 10, 100));
        assertArrayEquals(filled(3986, (byte) 0), read(c, 110, 3986));
    }

    @Test
    void aHostSegmentWhenOfferedIsTheChunksMemory() {
        DeviceChunk c = reserve(chunkBytes());
        Optional<MemorySegment> host = upstream.hostSegment(c);
        assumeTrue(host.isPresent(), "this upstream offers no host segments: mapping stages through host copies");
        MemorySegment s = host.get();
        assertTrue(s.byteSize() >= c.size(), "the host segment covers the chunk: " + s.byteSize() + " < " + c.size());

        write(c, 64, pattern(256, 5));
        assertArrayEquals(pattern(256, 5), s.asSlice(64, 256).toArray(ValueLayout.JAVA_BYTE), "copyFromHost is seen in the segment");
        MemorySegment.copy(pattern(256, 6), 0, s, ValueLayout.JAVA_BYTE, 1024, 256);
        assertArrayEquals(pattern(256, 6), read(c, 1024, 256), "a write through the segment is seen by copyToHost");
    }

    @Test
    void hintsAndPrefetchNeverChangeContents() {
        long bytes = chunkBytes();
        DeviceChunk c = reserve(bytes);
        byte[] p = pattern((int) Math.min(bytes, 1 << 20), 8);
        write(c, 0, p);

        for (MemoryUsageHint hint : MemoryUsageHint.values()) {
            upstream.advise(c, 0, bytes, hint);
            assertArrayEquals(p, read(c, 0, p.length), "advise(" + hint + ") changed the contents");
        }
        upstream.prefetch(c, 0, bytes, upstream.device());
        assertArrayEquals(p, read(c, 0, p.length), "prefetch changed the contents");
        upstream.unadvise(c, 0, bytes);
        assertArrayEquals(p, read(c, 0, p.length), "unadvise changed the contents");
    }

    // ------------------------------------------------------------------ threads and close

    @Test
    void threadsReserveCopyAndReleaseAtOnce() throws Exception {
        int threads = 4;
        int rounds = 50;
        int size = (int) Math.min(chunkBytes(), 256 * 1024);
        CyclicBarrier start = new CyclicBarrier(threads);
        ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int seed = t;
            workers.add(Thread.ofPlatform().name("upstream-contract-" + t).start(() -> {
                try {
                    start.await(30, TimeUnit.SECONDS);
                    for (int r = 0; r < rounds; r++) {
                        DeviceChunk c = upstream.reserve(chunkBytes());
                        try {
                            byte[] p = pattern(size, seed * 1000 + r);
                            write(c, 0, p);
                            if (!Arrays.equals(p, read(c, 0, size))) {
                                throw new AssertionError("thread " + seed + " round " + r + ": contents changed under it");
                            }
                        } finally {
                            upstream.release(c);
                        }
                    }
                } catch (Throwable e) {
                    failures.add(e);
                }
            }));
        }
        for (Thread w : workers) {
            w.join(TimeUnit.MINUTES.toMillis(2));
            assertFalse(w.isAlive(), w.getName() + " did not finish");
        }
        if (!failures.isEmpty()) {
            AssertionError e = new AssertionError(failures.size() + " worker(s) failed");
            failures.forEach(e::addSuppressed);
            throw e;
        }
    }

    @Test
    void closesOnceEveryChunkIsBack() {
        DeviceChunk a = reserve(chunkBytes());
        DeviceChunk b = reserve(chunkBytes());
        release(a);
        release(b);

        upstream.close();
        closed = true;
    }
}
