package io.ferrum.memory.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.lang.reflect.Constructor;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.MemoryUsageHint;
import io.ferrum.memory.pool.DeviceChunk;
import io.ferrum.memory.pool.DeviceUpstream;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;
import io.ferrum.memory.pool.ZeroingPolicy;

class FfmUpstreamTest {
    private static final long MiB = 1 << 20;

    @Test
    void chunksAreRealPageAlignedNativeMemoryAndAreCounted() {
        AtomicLong held = new AtomicLong();
        FfmUpstream up = new FfmUpstream(Device.cpu(), 0, held);
        assertTrue(up.physicalCapacity() > 256 * MiB, "physical memory from sysconf: " + up.physicalCapacity());
        DeviceChunk c = up.reserve(4 * MiB);
        assertEquals(4 * MiB, held.get());
        assertEquals(0, c.address() % FfmUpstream.CHUNK_ALIGNMENT);
        MemorySegment s = up.hostSegment(c).orElseThrow();
        s.set(ValueLayout.JAVA_LONG, 4 * MiB - 8, 0x1234_5678_9abc_def0L);
        assertEquals(0x1234_5678_9abc_def0L, s.get(ValueLayout.JAVA_LONG, 4 * MiB - 8));
        up.release(c);
        assertEquals(0, held.get());
    }

    @Test
    void copyWithinAChunkIsMemmoveAndFillSetsBytes() {
        FfmUpstream up = new FfmUpstream(Device.cpu(), 0, new AtomicLong());
        DeviceChunk c = up.reserve(64 * 1024);
        MemorySegment s = up.hostSegment(c).orElseThrow();
        for (int i = 0; i < 32; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) i);
        }
        up.copy(c, 0, c, 8, 24);
        for (int i = 0; i < 8; i++) {
            assertEquals(i, s.get(ValueLayout.JAVA_BYTE, i));
        }
        for (int i = 8; i < 32; i++) {
            assertEquals(i - 8, s.get(ValueLayout.JAVA_BYTE, i));
        }
        up.fill(c, 4, 4, (byte) 0x7f);
        assertEquals(0x7f, s.get(ValueLayout.JAVA_BYTE, 5));
        for (MemoryUsageHint h : MemoryUsageHint.values()) {
            up.advise(c, 0, 64 * 1024, h); // a hint never changes contents
        }
        up.prefetch(c, 0, 64 * 1024, Device.cpu());
        assertEquals(0x7f, s.get(ValueLayout.JAVA_BYTE, 5));
        assertEquals(0, s.get(ValueLayout.JAVA_BYTE, 8));
        up.release(c);
    }

    @Test
    void aManagerOverTheFfmUpstreamGivesEveryByteBackOnClose() {
        AtomicLong held = new AtomicLong();
        MemoryPoolConfig pool = MemoryPoolConfig.builder().initialSize(8 * MiB).growthIncrement(4 * MiB).build();
        PooledMemoryManager m = PooledMemoryManager.create(new FfmUpstream(Device.cpu(2), 64 * MiB, held),
                MemoryManagerConfig.defaults().withPoolConfig(MemoryType.GENERAL, pool), PoolSettings.defaults(), null);
        assertEquals(64 * MiB, m.memoryInfo().totalBytes());
        MemoryHandle a = m.allocate(3 * MiB, Device.cpu(2));
        MemoryHandle b = m.allocate(9 * MiB, Device.cpu(2));
        MemorySegment view = m.mapMemory(a, MemoryAccess.READ_WRITE);
        view.fill((byte) 5);
        m.unmapMemory(a);
        m.copy(a, b, 3 * MiB, 0, 6 * MiB);
        MemorySegment rb = m.mapMemory(b, MemoryAccess.READ_ONLY);
        assertEquals(5, rb.get(ValueLayout.JAVA_BYTE, 9 * MiB - 1));
        m.unmapMemory(b);
        assertEquals(m.memoryInfo().reservedBytes(), held.get());
        m.close();
        assertEquals(0, held.get(), "closing the manager released every chunk");
    }

    @Test
    void configurationMapsToPoolAndManagerConfig() {
        assertEquals(ZeroingPolicy.NONE, CpuDevice.zeroing("none"));
        assertEquals(ZeroingPolicy.ON_ALLOCATE, CpuDevice.zeroing(" On-Allocate "));
        assertEquals(ZeroingPolicy.ON_FREE, CpuDevice.zeroing("on_free"));
        assertTrue(assertThrows(InvalidMemoryRequestException.class, () -> CpuDevice.zeroing("sometimes"))
                .getMessage().contains("sometimes"));
    }

    // ------------------------------------------------------------------ a refresh under an allocation (defect 21)

    /**
     * The cpu bundle's class loader after a refresh replaced its wiring: it still has the classes it
     * had loaded, and fails to load any other. Here: a fresh copy of the upstream and NativeMemory
     * (one runtime package), and no {@code FfmUpstream$Chunk}, which the upstream loads on its first
     * reserve.
     */
    private static final class RefreshedLoader extends ClassLoader {
        private static final Set<String> OWN = Set.of(FfmUpstream.class.getName(), NativeMemory.class.getName());
        private static final String GONE = FfmUpstream.Chunk.class.getName();

        RefreshedLoader() {
            super("refreshed-cpu-bundle", FfmUpstreamTest.class.getClassLoader());
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            synchronized (getClassLoadingLock(name)) {
                if (name.equals(GONE)) {
                    throw new ClassNotFoundException(name + " (the bundle's wiring was replaced by a refresh)");
                }
                if (!OWN.contains(name)) {
                    return super.loadClass(name, resolve);
                }
                Class<?> c = findLoadedClass(name);
                if (c == null) {
                    try (InputStream in = getParent().getResourceAsStream(name.replace('.', '/') + ".class")) {
                        byte[] b = in.readAllBytes();
                        c = defineClass(name, b, 0, b.length);
                    } catch (IOException e) {
                        throw new ClassNotFoundException(name, e);
                    }
                }
                return c;
            }
        }

        DeviceUpstream upstream(AtomicLong held) throws ReflectiveOperationException {
            Constructor<?> c = loadClass(FfmUpstream.class.getName())
                    .getDeclaredConstructor(Device.class, long.class, AtomicLong.class);
            c.setAccessible(true);
            return (DeviceUpstream) c.newInstance(Device.cpu(), 0L, held);
        }
    }

    /**
     * Bytes the C library has handed out and not taken back (glibc's {@code mallinfo2}: in-use heap
     * plus mmapped blocks), or empty where that call does not exist.
     */
    private static Optional<Long> cLibraryBytesInUse() {
        Linker linker = Linker.nativeLinker();
        Optional<MemorySegment> symbol = linker.defaultLookup().find("mallinfo2");
        if (symbol.isEmpty()) {
            return Optional.empty();
        }
        // struct mallinfo2: ten size_t fields; hblkhd (mmapped bytes) is the 5th, uordblks (heap in use) the 8th.
        StructLayout layout = MemoryLayout.structLayout(MemoryLayout.sequenceLayout(10, ValueLayout.JAVA_LONG));
        MethodHandle mallinfo2 = linker.downcallHandle(symbol.get(), FunctionDescriptor.of(layout));
        try (Arena a = Arena.ofConfined()) {
            MemorySegment info = (MemorySegment) mallinfo2.invokeExact((java.lang.foreign.SegmentAllocator) a);
            return Optional.of(info.getAtIndex(ValueLayout.JAVA_LONG, 4) + info.getAtIndex(ValueLayout.JAVA_LONG, 7));
        } catch (Throwable t) {
            throw new AssertionError(t);
        }
    }

    @Test
    void aReserveThatFailsAfterPosixMemalignFreesTheChunkAndUncountsIt() throws Exception {
        AtomicLong held = new AtomicLong();
        DeviceUpstream refreshed = new RefreshedLoader().upstream(held);
        long size = 64 * MiB; // above glibc's largest mmap threshold: always a mapping of its own
        Optional<Long> before = cLibraryBytesInUse();
        NoClassDefFoundError e = assertThrows(NoClassDefFoundError.class, () -> refreshed.reserve(size),
                "the failure reaches the caller as it is");
        assertTrue(e.getMessage().contains("Chunk"), e.getMessage());
        assertEquals(0, held.get(), "the bytes of a chunk that never left reserve are not counted");
        Optional<Long> after = cLibraryBytesInUse();
        if (before.isPresent() && after.isPresent()) {
            assertTrue(after.get() - before.get() < size / 2, "the C library got the chunk back: "
                    + (after.get() - before.get()) + " more bytes in use than before the reserve");
        }
    }

    @Test
    void aReleaseThatFailsBeforeFreeingKeepsTheBytesCounted() throws Exception {
        AtomicLong held = new AtomicLong();
        FfmUpstream up = new FfmUpstream(Device.cpu(), 0, held);
        DeviceUpstream refreshed = new RefreshedLoader().upstream(held);
        DeviceChunk c = up.reserve(4 * MiB);
        // The refreshed copy cannot even look inside the chunk: nothing was freed, so it stays counted
        // (the count is how a stopped backend proves it gave every byte back).
        assertThrows(NoClassDefFoundError.class, () -> refreshed.release(c));
        assertEquals(4 * MiB, held.get());
        up.release(c);
        assertEquals(0, held.get());
    }

    /**
     * Review defect: the engine frees a hinted block and hands its bytes to another allocation; the
     * RANDOM (or SEQUENTIAL) advice of the first owner stayed on the pages (VmFlags {@code rr} in
     * /proc/self/smaps), turning off read-ahead for the next owner. unadvise (pool SPI 2.4) undoes it.
     */
    @Test
    void unadviseTakesAFreedBlocksReadAdviceOffItsPages() throws IOException {
        Assumptions.assumeTrue(NativeMemory.adviceSupported() && Files.isReadable(Path.of("/proc/self/smaps")),
                "needs Linux madvise and /proc/self/smaps");
        FfmUpstream up = new FfmUpstream(Device.cpu(), 64 * MiB, new AtomicLong());
        DeviceChunk c = up.reserve(8 * MiB);
        try {
            long page = NativeMemory.pageSize();
            long offset = ((c.address() + MiB + page - 1) & -page) - c.address();
            up.advise(c, offset, MiB, MemoryUsageHint.RANDOM);
            assertTrue(vmFlags(c.address() + offset).contains("rr"), "RANDOM is on the pages: " + vmFlags(c.address() + offset));
            up.unadvise(c, offset, MiB);
            assertTrue(!vmFlags(c.address() + offset).contains("rr"), "a freed block's RANDOM stayed on its pages: "
                    + vmFlags(c.address() + offset));
        } finally {
            up.release(c);
        }
    }

    /**
     * A block's hint changed from RANDOM to READ_MOSTLY: usageHint answered READ_MOSTLY while the
     * block's pages kept RANDOM (read-ahead off), since READ_MOSTLY's madvise (WILLNEED) replaces
     * nothing; the earlier hint's advice is undone when another replaces it.
     */
    @Test
    void aNewHintTakesTheEarlierHintsAdviceOffTheBlocksPages() throws IOException {
        Assumptions.assumeTrue(NativeMemory.adviceSupported() && Files.isReadable(Path.of("/proc/self/smaps")),
                "needs Linux madvise and /proc/self/smaps");
        CpuDeviceConfig cfg = TestConfigs.small();
        PooledMemoryManager m = CpuDevice.newManager(new FfmUpstream(Device.cpu(6), CpuDevice.capacity(cfg),
                new AtomicLong()), cfg, null, null);
        try {
            MemoryHandle h = m.allocate(2 * MiB, MemoryType.GENERAL, Device.cpu(6));
            long page = NativeMemory.pageSize();
            long start = m.withMapped(h, MemoryAccess.READ_ONLY, MemorySegment::address);
            long inside = (start + page - 1) & -page;
            m.setUsageHint(h, MemoryUsageHint.RANDOM);
            assertTrue(vmFlags(inside).contains("rr"), "RANDOM is on the pages: " + vmFlags(inside));
            m.setUsageHint(h, MemoryUsageHint.READ_MOSTLY);
            assertEquals(Optional.of(MemoryUsageHint.READ_MOSTLY), m.usageHint(h));
            assertTrue(!vmFlags(inside).contains("rr"), "the earlier RANDOM stayed on the pages of a READ_MOSTLY block: "
                    + vmFlags(inside));
            m.deallocate(h);
        } finally {
            m.close();
        }
    }

    /**
     * A manager closed with a live hinted block releases its chunk with the block's RANDOM still on
     * its pages (unadvise runs only at a block's free); posix_memalign's heap keeps the bytes and
     * hands them to the next chunk reserved, whose owner never asked for RANDOM.
     */
    @Test
    void aChunkReleasedWithAdviceOnItGoesBackWithout() throws IOException {
        Assumptions.assumeTrue(NativeMemory.adviceSupported() && Files.isReadable(Path.of("/proc/self/smaps")),
                "needs Linux madvise and /proc/self/smaps");
        FfmUpstream up = new FfmUpstream(Device.cpu(), 64 * MiB, new AtomicLong());
        // A first chunk, mmapped and unmapped by malloc, raises its threshold: the next come from its heap.
        up.release(up.reserve(4 * MiB));
        DeviceChunk c = up.reserve(4 * MiB);
        long page = NativeMemory.pageSize();
        long offset = ((c.address() + MiB + page - 1) & -page) - c.address();
        long advised = c.address() + offset;
        up.advise(c, offset, MiB, MemoryUsageHint.RANDOM);
        up.release(c);
        DeviceChunk next = up.reserve(4 * MiB);
        try {
            Assumptions.assumeTrue(next.address() <= advised && advised < next.address() + 4 * MiB,
                    "malloc handed the released bytes back: 0x" + Long.toHexString(next.address()));
            assertTrue(!vmFlags(advised).contains("rr"), "the next chunk inherited a released chunk's RANDOM: "
                    + vmFlags(advised));
        } finally {
            up.release(next);
        }
    }

    /** @return the VmFlags of the mapping of this process that holds {@code address} */
    private static List<String> vmFlags(long address) throws IOException {
        boolean inside = false;
        for (String line : Files.readAllLines(Path.of("/proc/self/smaps"))) {
            int dash = line.indexOf('-');
            int space = line.indexOf(' ');
            if (dash > 0 && space > dash && line.substring(0, dash).matches("[0-9a-f]+")) {
                long start = Long.parseUnsignedLong(line.substring(0, dash), 16);
                long end = Long.parseUnsignedLong(line.substring(dash + 1, space), 16);
                inside = Long.compareUnsigned(start, address) <= 0 && Long.compareUnsigned(address, end) < 0;
            } else if (inside && line.startsWith("VmFlags:")) {
                return List.of(line.substring("VmFlags:".length()).trim().split(" "));
            }
        }
        throw new AssertionError("no mapping holds 0x" + Long.toHexString(address));
    }
}
