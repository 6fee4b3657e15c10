package io.ferrum.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import jcuda.Pointer;
import jcuda.driver.CUdevice_attribute;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.CUmem_range_attribute;
import jcuda.driver.JCudaDriver;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.EventHandle;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.MemoryUsageHint;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.api.StreamManager;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;
import io.ferrum.memory.pool.StreamExecutor;

/**
 * GPU suite (issue 16): every operation of a {@code cuda:0} manager made by the bundle's own factory,
 * on a real device, with contents checked: each memory type, copies in every direction, write and
 * read from heap, native and pinned segments, async work on two streams ordered by an event,
 * defragmentation, prefetch and advice on managed memory, bad input, and no device memory left after
 * close ({@code cuMemGetInfo} back at its baseline). Skips, with the probe's reason, without a GPU.
 */
@Tag("gpu")
class CudaDeviceGpuTest {
    private static final Device GPU = Device.cuda(0);
    private static final long MiB = 1 << 20;

    private CudaMemoryManagerFactory factory;
    private AdvancedMemoryManager m;
    private PrimaryContext held;

    @BeforeEach
    void open() {
        Gpu.assumePresent();
        held = PrimaryContext.retain(GPU); // keeps the context (and its own memory) alive for the baselines
        factory = new CudaMemoryManagerFactory(null);
        MemoryManagerConfig cfg = MemoryManagerConfig.defaults();
        for (MemoryType t : MemoryType.values()) {
            cfg = cfg.withPoolConfig(t, MemoryPoolConfig.builder().initialSize(2 * MiB).growthIncrement(64 * MiB).build());
        }
        m = factory.createAdvancedMemoryManager(GPU, cfg);
    }

    @AfterEach
    void close() {
        if (factory != null) {
            factory.deactivate();
            held.close();
        }
    }

    private static byte[] pattern(int n, long seed) {
        byte[] b = new byte[n];
        new SplittableRandom(seed).nextBytes(b);
        return b;
    }

    private byte[] readAll(MemoryHandle h, int n) {
        byte[] out = new byte[n];
        m.read(h, 0, MemorySegment.ofArray(out));
        return out;
    }

    @Test
    void everyMemoryTypeKeepsItsBytesAndPinnedAndManagedAreViewedWithoutACopy() {
        int n = (int) MiB + 13;
        for (MemoryType t : MemoryType.values()) {
            byte[] data = pattern(n, t.ordinal());
            MemoryHandle h = m.allocate(n, t, GPU);
            m.write(h, 0, MemorySegment.ofArray(data));
            assertArrayEquals(data, readAll(h, n), t + ": read back");
            byte first = m.withMapped(h, MemoryAccess.READ_ONLY, v -> v.get(ValueLayout.JAVA_BYTE, 0));
            assertEquals(data[0], first, t + ": a view shows the block");
            if (t == MemoryType.PINNED || t == MemoryType.MAPPED) {
                // Host-addressable: a view written is the block itself, no write-back needed to see it.
                MemorySegment view = m.mapMemory(h, MemoryAccess.READ_WRITE);
                view.set(ValueLayout.JAVA_BYTE, 7, (byte) 0x5a);
                byte[] again = readAll(h, 8);
                m.unmapMemory(h);
                assertEquals(0x5a, again[7], t + ": a mapped view is the memory");
            }
            m.deallocate(h);
        }
    }

    @Test
    void copiesInEveryDirectionKeepContentsAndOffsets() {
        int n = 3 * (int) MiB + 5;
        byte[] data = pattern(n, 1);
        MemoryHandle device = m.allocate(n, MemoryType.GENERAL, GPU);
        MemoryHandle device2 = m.allocate(n + 100, MemoryType.TENSOR, GPU);
        MemoryHandle pinned = m.allocate(n, MemoryType.PINNED, GPU);
        MemoryHandle managed = m.allocate(n + 100, MemoryType.MAPPED, GPU);
        m.write(device, 0, MemorySegment.ofArray(data));
        m.copy(device, device2, n, 0, 100); // device to device, at an offset
        m.copy(device2, pinned, n, 100, 0); // device to pinned host
        m.copy(pinned, managed, n, 0, 100); // pinned host to managed
        m.copy(managed, device, n, 100, 0); // managed to device
        assertArrayEquals(data, readAll(device, n));
        assertArrayEquals(data, readAll(pinned, n));
        byte[] tail = new byte[n];
        m.read(managed, 100, MemorySegment.ofArray(tail));
        assertArrayEquals(data, tail);
    }

    @Test
    void writeAndReadFromHeapNativeAndPinnedSegmentsAt64MiB() {
        int n = 64 * (int) MiB + 3;
        byte[] data = pattern(n, 2);
        MemoryHandle h = m.allocate(n, MemoryType.GENERAL, GPU);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment nativeSrc = arena.allocate(n).copyFrom(MemorySegment.ofArray(data));
            MemoryHandle pinnedBlock = m.allocate(n, MemoryType.PINNED, GPU);
            MemorySegment pinned = m.mapMemory(pinnedBlock, MemoryAccess.READ_WRITE);
            for (MemorySegment src : List.of(MemorySegment.ofArray(data), nativeSrc, pinned.copyFrom(nativeSrc))) {
                m.write(h, 0, MemorySegment.ofArray(new byte[n])); // clear
                m.write(h, 0, src);
                assertArrayEquals(data, readAll(h, n), "from " + src);
                MemorySegment back = arena.allocate(n);
                m.read(h, 0, back);
                assertEquals(-1, back.mismatch(nativeSrc), "into native memory");
            }
            pinned.fill((byte) 0);
            m.read(h, 0, pinned);
            assertEquals(-1, pinned.mismatch(nativeSrc), "into pinned memory");
            m.unmapMemory(pinnedBlock);
        }
    }

    /**
     * The streams are those of the manager's own stream executor, as on a running GPU ({@link
     * CudaDevice}): a manager refuses a stream of another stream manager, so the factory's manager
     * and stream manager cannot be paired here.
     */
    @Test
    void asyncWorkOnTwoStreamsIsOrderedByAnEvent() throws Exception {
        int n = 16 * (int) MiB;
        byte[] data = pattern(n, 3);
        CudaStreams streams = new CudaStreams(PrimaryContext.retain(GPU));
        CudaDeviceConfig cfg = CudaDeviceConfigs.of(Map.of("initialSize", 2 * MiB, "growthIncrement", 64 * MiB));
        PooledMemoryManager gpu = CudaDevice.newManager(new CudaUpstream(PrimaryContext.retain(GPU),
                CudaDeviceConfigs.settings(cfg), new PinnedRanges()), cfg, null, streams);
        try {
            StreamHandle s1 = streams.createStream(GPU);
            StreamHandle s2 = streams.createStream(GPU);
            MemoryHandle a = gpu.allocate(n, MemoryType.GENERAL, GPU);
            MemoryHandle b = gpu.allocate(n, MemoryType.GENERAL, GPU);
            byte[] out = new byte[n];
            var written = gpu.writeAsync(a, 0, MemorySegment.ofArray(data), s1);
            EventHandle e = streams.recordEvent(s1);
            streams.waitEvent(s2, e);
            var copied = gpu.copyAsync(MemoryTransfer.of(a, b, n), s2);
            var read = gpu.readAsync(b, 0, MemorySegment.ofArray(out), s2);
            read.toCompletableFuture().join();
            assertTrue(written.toCompletableFuture().isDone() && copied.toCompletableFuture().isDone(),
                    "work before the event and on the stream completed first");
            assertArrayEquals(data, out);
            streams.synchronizeStream(s2).toCompletableFuture().join();
            assertTrue(streams.isStreamReady(s1) && streams.isStreamReady(s2));
        } finally {
            gpu.close();
            streams.close();
        }
    }

    @Test
    void defragmentationMovesBlocksWithTheirContentsAndHandles() {
        List<MemoryHandle> kept = new ArrayList<>();
        List<byte[]> contents = new ArrayList<>();
        List<MemoryHandle> all = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            int n = 64 * 1024 + i * 4096;
            MemoryHandle h = m.allocate(n, MemoryType.GENERAL, GPU);
            all.add(h);
            if (i % 2 == 1) {
                byte[] d = pattern(n, 100 + i);
                m.write(h, 0, MemorySegment.ofArray(d));
                kept.add(h);
                contents.add(d);
            }
        }
        for (int i = 0; i < all.size(); i += 2) {
            m.deallocate(all.get(i));
        }
        DefragmentationStats stats = m.defragment(GPU).toCompletableFuture().join();
        assertTrue(stats.blocksMoved() > 0, "the holes were closed: " + stats);
        for (int i = 0; i < kept.size(); i++) {
            assertArrayEquals(contents.get(i), readAll(kept.get(i), contents.get(i).length), "block " + i);
        }
    }

    @Test
    void prefetchAndAdviceWorkOnManagedMemoryAndKeepItsContents() {
        int n = 8 * (int) MiB;
        byte[] data = pattern(n, 4);
        MemoryHandle h = m.allocate(n, MemoryType.MAPPED, GPU);
        m.write(h, 0, MemorySegment.ofArray(data));
        m.setUsageHint(h, MemoryUsageHint.READ_MOSTLY);
        assertEquals(MemoryUsageHint.READ_MOSTLY, m.usageHint(h).orElseThrow());
        m.prefetch(h, GPU);
        m.prefetch(h, Device.cpu());
        assertArrayEquals(data, readAll(h, n));
    }

    /**
     * Work on a stream that outlives the stream manager's close (its wait cut short by an interrupt)
     * still runs on a live CUstream: the stream is destroyed after it (CudaStreamsLifecycleTest
     * proves the order over a fake driver; this, that the driver takes it).
     */
    @Test
    void streamWorkThatOutlivesCloseRunsOnALiveStream() throws Exception {
        int n = 4 * (int) MiB;
        byte[] data = pattern(n, 6);
        MemoryHandle a = m.allocate(n, MemoryType.GENERAL, GPU);
        StreamManager streams = factory.createStreamManager(GPU);
        StreamHandle s = streams.createStream(GPU);
        CountDownLatch go = new CountDownLatch(1);
        CompletableFuture<Void> work = ((StreamExecutor) streams).submit(s, () -> {
            try {
                go.await();
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
            m.write(a, 0, MemorySegment.ofArray(data)); // enqueued on s's CUstream
        }).toCompletableFuture();
        Thread.currentThread().interrupt();
        ((AutoCloseable) streams).close(); // CudaStreams; the API type has no close
        assertTrue(Thread.interrupted());
        go.countDown();
        work.get(30, TimeUnit.SECONDS);
        assertArrayEquals(data, readAll(a, n));
    }

    /** Pool SPI 2.4: a freed managed block's READ_MOSTLY is unset before its bytes can go to another owner. */
    @Test
    void aFreedManagedBlocksReadMostlyIsUnset() {
        Assumptions.assumeTrue(concurrentManagedAccess(), "cuda:0 has no concurrent managed access: advice is a no-op there");
        long n = 2 * MiB;
        MemoryHandle h = m.allocate(n, MemoryType.MAPPED, GPU);
        long address = m.mapMemory(h, MemoryAccess.READ_ONLY).address();
        m.unmapMemory(h);
        m.setUsageHint(h, MemoryUsageHint.READ_MOSTLY);
        assertEquals(1, readMostly(address, n));
        m.deallocate(h);
        assertEquals(0, readMostly(address, n), "the freed bytes kept READ_MOSTLY for their next owner");
    }

    private static boolean concurrentManagedAccess() {
        PrimaryContext c = PrimaryContext.retain(GPU);
        try {
            int[] v = new int[1];
            Cu.check(JCudaDriver.cuDeviceGetAttribute(v, CUdevice_attribute.CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS,
                    c.cuDevice()), GPU, "cuDeviceGetAttribute");
            return v[0] != 0;
        } finally {
            c.close();
        }
    }

    private static int readMostly(long address, long bytes) {
        PrimaryContext c = PrimaryContext.retain(GPU);
        try {
            c.makeCurrent();
            int[] v = new int[1];
            Cu.check(JCudaDriver.cuMemRangeGetAttribute(Pointer.to(v), 4, CUmem_range_attribute.CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY,
                    new CUdeviceptr().withByteOffset(address), bytes), GPU, "cuMemRangeGetAttribute");
            return v[0];
        } finally {
            c.close();
        }
    }

    /**
     * A PINNED chunk above 2<sup>31</sup> - 1 bytes ({@link LargeHostAlloc}: JCuda cannot make it, the
     * driver's own {@code cuMemHostAlloc} does): reserved, written past 2 GiB by the CPU, read there
     * by the device through its mapping, and released.
     */
    @Test
    void aPinnedChunkAbove2GiBIsReservedUsedAndReleased() {
        long n = (2L << 30) + 4096;
        CudaUpstream upstream = new CudaUpstream(PrimaryContext.retain(GPU), CudaSettings.DEFAULTS, new PinnedRanges());
        try {
            CudaChunk big = (CudaChunk) upstream.reserve(n, MemoryType.PINNED);
            try {
                byte[] data = pattern(4096, 30);
                MemorySegment host = upstream.hostSegment(big).orElseThrow();
                MemorySegment.copy(data, 0, host, ValueLayout.JAVA_BYTE, n - 4096, 4096);
                CudaChunk device = (CudaChunk) upstream.reserve(4096, MemoryType.GENERAL);
                byte[] back = new byte[4096];
                try {
                    upstream.copy(big, n - 4096, device, 0, 4096);
                    upstream.copyToHost(device, 0, MemorySegment.ofArray(back), 4096);
                } finally {
                    upstream.release(device);
                }
                assertArrayEquals(data, back, "the device read the last page of the pinned chunk");
            } finally {
                upstream.release(big);
            }
        } finally {
            upstream.close();
        }
    }

    @Test
    void badInputIsRefusedAndChangesNothing() {
        byte[] data = pattern(4096, 5);
        MemoryHandle h = m.allocate(4096, MemoryType.GENERAL, GPU);
        m.write(h, 0, MemorySegment.ofArray(data));
        assertThrows(MemoryException.class, () -> m.write(h, 4000, MemorySegment.ofArray(new byte[200])));
        assertThrows(MemoryException.class, () -> m.write(h, -1, MemorySegment.ofArray(new byte[1])));
        assertThrows(MemoryException.class, () -> m.write(h, 0, null));
        assertThrows(MemoryException.class, () -> m.allocate(-5, MemoryType.GENERAL, GPU));
        assertArrayEquals(data, readAll(h, 4096), "nothing written");
        m.deallocate(h);
        assertThrows(MemoryException.class, () -> m.read(h, 0, MemorySegment.ofArray(new byte[1])));
        assertThrows(MemoryException.class, () -> m.deallocate(h));
    }

    @Test
    void closingTheManagerGivesEveryDeviceByteBack() {
        // A context's first allocation of a kind may leave driver bookkeeping with the context (held
        // for the whole test; each test may have a new one): paid before the baseline, so it is in it.
        for (MemoryType t : MemoryType.values()) {
            m.deallocate(m.allocate(MiB, t, GPU));
        }
        long before = freeDeviceBytes();
        AdvancedMemoryManager other = factory.createAdvancedMemoryManager(GPU, MemoryManagerConfig.defaults());
        for (MemoryType t : MemoryType.values()) {
            other.allocate(32 * MiB, t, GPU);
        }
        assertTrue(freeDeviceBytes() < before - 64 * MiB, "device memory was taken");
        other.close();
        // The driver rounds and keeps a little bookkeeping of its own: within 2 MiB of the baseline.
        assertTrue(freeDeviceBytes() >= before - 2 * MiB, "free " + freeDeviceBytes() + " against " + before);
    }

    /**
     * Two GPUs of one backend: {@code copyToPeer} copies device memory to device memory
     * ({@code cuMemcpyPeerAsync}, over the peer link where the pair has one), both ways, with the
     * bytes and offsets kept. Skips, saying so, on a machine with one GPU.
     */
    @Test
    void aPeerCopyBetweenTwoGpusKeepsTheBytes() {
        int[] count = new int[1];
        Cu.check(JCudaDriver.cuDeviceGetCount(count), GPU, "cuDeviceGetCount");
        Assumptions.assumeTrue(count[0] >= 2, () -> "peer copies need two GPUs; this machine has " + count[0]);
        Device gpu1 = Device.cuda(1);
        Map<Device, PooledMemoryManager> running = new ConcurrentHashMap<>();
        PoolSettings settings = PoolSettings.defaults().withPeers(running::get);
        PooledMemoryManager a = PooledMemoryManager.create(
                new CudaUpstream(PrimaryContext.retain(GPU), CudaSettings.DEFAULTS, new PinnedRanges()),
                MemoryManagerConfig.defaults(), settings, null);
        PooledMemoryManager b = PooledMemoryManager.create(
                new CudaUpstream(PrimaryContext.retain(gpu1), CudaSettings.DEFAULTS, new PinnedRanges()),
                MemoryManagerConfig.defaults(), settings, null);
        try {
            running.put(GPU, a);
            running.put(gpu1, b);
            int n = (int) (8 * MiB + 13);
            byte[] data = pattern(n, 16);
            MemoryHandle ha = a.allocate(n + 64, GPU);
            MemoryHandle hb = b.allocate(n + 64, gpu1);
            a.write(ha, 64, MemorySegment.ofArray(data));
            assertTrue(a.copyToPeer(new MemoryTransfer(ha, hb, n, 64, 32), b));
            byte[] there = new byte[n];
            b.read(hb, 32, MemorySegment.ofArray(there));
            assertArrayEquals(data, there, "cuda:0 to cuda:1");
            a.write(ha, 0, MemorySegment.ofArray(new byte[n + 64]));
            assertTrue(b.copyToPeer(new MemoryTransfer(hb, ha, n, 32, 0), a));
            byte[] back = new byte[n];
            a.read(ha, 0, MemorySegment.ofArray(back));
            assertArrayEquals(data, back, "cuda:1 to cuda:0");
        } finally {
            b.close();
            a.close();
        }
    }

    /**
     * {@code createMapping(cpu:0, cuda:0)}: two handles over one block of the GPU's managed memory,
     * the host's named by the host's manager. A write through the host's view reaches the GPU's
     * handle while the view is still open (no staging copy), and copies between the host's own blocks
     * and its handle (two backends) keep the bytes.
     */
    @Test
    void aMappingBetweenTheHostAndTheGpuIsOneBlockOfManagedMemory() {
        Device cpu = Device.cpu(0);
        Map<Device, PooledMemoryManager> running = new ConcurrentHashMap<>();
        PoolSettings settings = PoolSettings.defaults().withPeers(running::get);
        PooledMemoryManager host = PooledMemoryManager.create(new ArenaUpstream(cpu, 1L << 30, true), MemoryManagerConfig.defaults(),
                settings, null);
        PooledMemoryManager gpu = PooledMemoryManager.create(
                new CudaUpstream(PrimaryContext.retain(GPU), CudaSettings.DEFAULTS, new PinnedRanges()),
                MemoryManagerConfig.defaults(), settings, null);
        try {
            running.put(cpu, host);
            running.put(GPU, gpu);
            int n = (int) MiB;
            var mapping = gpu.createMapping(cpu, GPU, n);
            assertEquals(MemoryType.MAPPED, gpu.handleInfo(mapping.target()).orElseThrow().memoryType());
            assertTrue(host.owns(mapping.source()));
            byte[] data = pattern(n, 21);
            byte[] seen = host.withMapped(mapping.source(), MemoryAccess.READ_WRITE, view -> {
                MemorySegment.copy(MemorySegment.ofArray(data), 0, view, 0, n);
                byte[] out = new byte[n];
                gpu.read(mapping.target(), 0, MemorySegment.ofArray(out)); // while the view is open
                return out;
            });
            assertArrayEquals(data, seen, "the host's view is the managed memory itself");

            MemoryHandle own = host.allocate(n, cpu);
            byte[] other = pattern(n, 22);
            host.write(own, 0, MemorySegment.ofArray(other));
            host.copy(own, mapping.source(), n, 0, 0); // the host's chunk into the GPU's
            byte[] there = new byte[n];
            gpu.read(mapping.target(), 0, MemorySegment.ofArray(there));
            assertArrayEquals(other, there);
            host.write(own, 0, MemorySegment.ofArray(new byte[n]));
            host.copy(mapping.source(), own, n, 0, 0); // and back
            byte[] back = new byte[n];
            host.read(own, 0, MemorySegment.ofArray(back));
            assertArrayEquals(other, back);
            host.deallocate(own);
            host.deallocate(mapping.source());
            gpu.deallocate(mapping.target());
            assertEquals(0, gpu.memoryInfo().usedBytes());
        } finally {
            gpu.close();
            host.close();
        }
    }

    private static long freeDeviceBytes() {
        long[] free = new long[1];
        long[] total = new long[1];
        PrimaryContext c = PrimaryContext.retain(GPU);
        try {
            c.makeCurrent();
            Cu.check(JCudaDriver.cuMemGetInfo(free, total), GPU, "cuMemGetInfo");
        } finally {
            c.close();
        }
        return free[0];
    }
}
