package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

import io.ferrum.memory.api.AccessPatternType;
import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryObserver;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.MemoryUsageHint;
import io.ferrum.memory.api.OutOfDeviceMemoryException;
import io.ferrum.memory.api.StreamHandle;

class PoolEngineTest {
    static final long KiB = 1024;
    static final long MiB = 1024 * KiB;
    static final Device CPU = Device.cpu();

    private final List<AutoCloseable> toClose = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        for (AutoCloseable c : toClose) {
            c.close();
        }
    }

    static MemoryPoolConfig pool(long initial, long growth) {
        return MemoryPoolConfig.builder().initialSize(initial).growthIncrement(growth).alignment(256).build();
    }

    static MemoryManagerConfig config(MemoryPoolConfig general) {
        return MemoryManagerConfig.defaults().withPoolConfig(MemoryType.GENERAL, general).withAutoGc(false, 0.85);
    }

    PooledMemoryManager manager(ArenaUpstream up, MemoryManagerConfig cfg, PoolSettings settings) {
        PooledMemoryManager m = PooledMemoryManager.create(up, cfg, settings, null);
        toClose.add(m);
        return m;
    }

    PooledMemoryManager manager(ArenaUpstream up, MemoryPoolConfig general) {
        return manager(up, config(general), PoolSettings.defaults());
    }

    static void write(PooledMemoryManager m, MemoryHandle h, byte seed) {
        MemorySegment s = m.mapMemory(h, MemoryAccess.WRITE_ONLY);
        for (long i = 0; i < s.byteSize(); i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) (seed + i * 31));
        }
        m.unmapMemory(h);
    }

    static void assertContent(PooledMemoryManager m, MemoryHandle h, byte seed) {
        MemorySegment s = m.mapMemory(h, MemoryAccess.READ_ONLY);
        for (long i = 0; i < s.byteSize(); i++) {
            if (s.get(ValueLayout.JAVA_BYTE, i) != (byte) (seed + i * 31)) {
                m.unmapMemory(h);
                throw new AssertionError("byte " + i + " of " + h + " differs");
            }
        }
        m.unmapMemory(h);
    }

    /** Asserts that {@code call} throws {@code type} and changes nothing visible. */
    static <T extends Throwable> T assertRejected(PooledMemoryManager m, Class<T> type, Executable call) {
        MemoryInfo before = m.memoryInfo();
        int handlesBefore = m.handles().size();
        T e = assertThrows(type, call);
        MemoryInfo after = m.memoryInfo();
        assertEquals(before.usedBytes(), after.usedBytes(), "used changed by a rejected call");
        assertEquals(before.reservedBytes(), after.reservedBytes(), "reserved changed by a rejected call");
        assertEquals(before.activeAllocations(), after.activeAllocations());
        assertEquals(handlesBefore, m.handles().size());
        assertFalse(e.getMessage() == null || e.getMessage().isBlank());
        return e;
    }

    // ------------------------------------------------------------------ accounting

    @Test
    void accountingAddsUpAfterAllocateAndFree() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        // Without thread caches, so that a freed block is a hole in the pool at once.
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB)), PoolSettings.defaults().withThreadCache(0));
        MemoryInfo empty = m.memoryInfo();
        assertEquals(64 * MiB, empty.totalBytes());
        assertEquals(0, empty.usedBytes());
        assertEquals(0, empty.reservedBytes());
        assertEquals(0.0, empty.fragmentationRatio());
        assertTrue(empty.bandwidthGbps().isEmpty(), "no bandwidth before the first copy");

        MemoryHandle a = m.allocate(1000, CPU);
        MemoryHandle b = m.allocate(256, CPU);
        MemoryInfo two = m.memoryInfo();
        assertEquals(1024 + 256, two.usedBytes(), "sizes round up to the 256-byte pool alignment");
        assertEquals(MiB, two.reservedBytes(), "the first chunk is the initial size");
        assertEquals(2, two.activeAllocations());
        assertEquals(two.totalBytes() - two.usedBytes(), two.freeBytes());
        assertEquals(MiB, up.liveBytes());
        assertEquals(1000, m.handleInfo(a).orElseThrow().size());
        assertEquals(256, m.handleInfo(a).orElseThrow().alignment());
        assertEquals(CPU, m.handleInfo(b).orElseThrow().device());

        m.deallocate(a);
        MemoryInfo one = m.memoryInfo();
        assertEquals(256, one.usedBytes());
        assertEquals(1, one.activeAllocations());
        // Free space: the 1 KiB hole before b and the tail after it; the largest is the tail.
        double expected = 1.0 - (double) (MiB - 1024 - 256) / (double) (MiB - 256);
        assertEquals(expected, one.fragmentationRatio(), 1e-12);
        m.deallocate(b);
        assertEquals(0, m.memoryInfo().usedBytes());
        assertEquals(0.0, m.memoryInfo().fragmentationRatio(), "one free block is no fragmentation");
        assertEquals(List.of(), m.handles());
    }

    @Test
    void theLockFreeSnapshotAgreesWithTheFullInformation() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryHandle a = m.allocate(1000, CPU);
        m.allocate(300_000, MemoryType.CACHE, CPU);
        m.deallocate(a);
        MemoryInfo full = m.memoryInfo();
        MemoryInfo quick = m.quickInfo();
        assertEquals(full.usedBytes(), quick.usedBytes());
        assertEquals(full.freeBytes(), quick.freeBytes());
        assertEquals(full.reservedBytes(), quick.reservedBytes());
        assertEquals(full.activeAllocations(), quick.activeAllocations());
        assertEquals(full.fragmentationRatio(), quick.fragmentationRatio(), "the ratio of the last full information");
        m.close();
        assertThrows(DeviceUnavailableException.class, m::quickInfo);
    }

    @Test
    void poolGrowsByTheIncrementOrByTheRequestIfLarger() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, 2 * MiB));
        m.allocate(MiB, CPU);
        assertEquals(MiB, m.memoryInfo().reservedBytes());
        m.allocate(KiB, CPU);
        assertEquals(3 * MiB, m.memoryInfo().reservedBytes(), "grew by growthIncrement");
        m.allocate(5 * MiB, CPU);
        assertEquals(8 * MiB, m.memoryInfo().reservedBytes(), "grew by the request, which was larger");
        assertEquals(3, up.reserves.get());
    }

    @Test
    void preAllocateReservesTheInitialSizeAtOnce() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        MemoryPoolConfig cfg = pool(4 * MiB, MiB).toBuilder().preAllocate(true).build();
        PooledMemoryManager m = manager(up, cfg);
        assertEquals(4 * MiB, m.memoryInfo().reservedBytes());
        assertEquals(0, m.memoryInfo().usedBytes());
        assertEquals(0, m.trim(), "a pre-allocated pool keeps its initial size on trim");
    }

    @Test
    void fixedPoolFailsWhenFullAndStaysConsistent() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB).toBuilder().autoExpansion(false).growthIncrement(0).build());
        MemoryHandle a = m.allocate(MiB / 2, CPU);
        m.allocate(MiB / 2, CPU);
        OutOfDeviceMemoryException e = assertRejected(m, OutOfDeviceMemoryException.class, () -> m.allocate(256, CPU));
        assertEquals(256, e.requestedBytes());
        assertEquals(CPU, e.device());
        assertTrue(e.getMessage().contains("enableAutoExpansion=false"), e.getMessage());
        m.deallocate(a);
        m.allocate(256, CPU);
        assertEquals(MiB, m.memoryInfo().reservedBytes());
    }

    @Test
    void maxSizeIsAHardLimitUnderConcurrentAllocation() throws Exception {
        ArenaUpstream up = new ArenaUpstream(256 * MiB);
        MemoryPoolConfig cfg = pool(0, MiB).toBuilder().maxSize(8 * MiB).build();
        PooledMemoryManager m = manager(up, cfg);
        int threads = 4;
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> ts = new ArrayList<>();
        AtomicLong ok = new AtomicLong();
        AtomicLong oom = new AtomicLong();
        CopyOnWriteArrayList<Throwable> other = new CopyOnWriteArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread th = new Thread(() -> {
                try {
                    start.await();
                    for (int i = 0; i < 200; i++) {
                        try {
                            m.allocate(64 * KiB, CPU);
                            ok.incrementAndGet();
                        } catch (OutOfDeviceMemoryException e) {
                            oom.incrementAndGet();
                        }
                        assertTrue(m.memoryInfo().reservedBytes() <= 8 * MiB);
                    }
                } catch (Throwable e) {
                    other.add(e);
                }
            });
            th.start();
            ts.add(th);
        }
        start.countDown();
        for (Thread th : ts) {
            th.join();
        }
        assertEquals(List.of(), other);
        assertEquals(8 * MiB / (64 * KiB), ok.get(), "exactly the limit's worth of blocks fit");
        assertEquals(threads * 200 - ok.get(), oom.get());
        assertTrue(up.liveBytes() <= 8 * MiB, "the upstream never gave more than maxSize: " + up.liveBytes());
        assertEquals(8 * MiB, m.memoryInfo().usedBytes());
    }

    @Test
    void capacityBoundsEveryPoolTogether() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB)), PoolSettings.defaults().withCapacity(4 * MiB));
        assertEquals(4 * MiB, m.memoryInfo().totalBytes());
        m.allocate(2 * MiB, MemoryType.GENERAL, CPU);
        m.allocate(2 * MiB, MemoryType.CACHE, CPU);
        assertRejected(m, OutOfDeviceMemoryException.class, () -> m.allocate(MiB, MemoryType.TENSOR, CPU));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocate(5 * MiB, CPU));
    }

    // ------------------------------------------------------------------ bad input

    @Test
    void badAllocationRequestsAreRejectedNamingTheValue() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB).toBuilder().maxSize(8 * MiB).build());
        m.allocate(100, CPU);
        assertTrue(assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocate(0, CPU)).getMessage().contains("0"));
        assertTrue(assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocate(-5, CPU)).getMessage().contains("-5"));
        assertTrue(assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocate(9 * MiB, CPU)).getMessage().contains("maxSize"));
        assertTrue(assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocate(Long.MAX_VALUE, CPU)).getMessage().contains("capacity"));
        assertTrue(assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocateAligned(64, 0, CPU)).getMessage().contains("power of two"));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocateAligned(64, 3000, CPU));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocateAligned(64, 1L << 40, CPU));
        assertTrue(assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocate(64, Device.cuda(0))).getMessage().contains("cuda:0"));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocate(64, null));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.allocate(64, null, CPU));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.memoryInfo(Device.cpu(1)));
    }

    @Test
    void badHandlesAreRejectedAndNothingChanges() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        PooledMemoryManager other = manager(new ArenaUpstream(64 * MiB), pool(MiB, MiB));
        MemoryHandle live = m.allocate(512, CPU);
        MemoryHandle freed = m.allocate(512, CPU);
        m.deallocate(freed);
        MemoryHandle foreign = other.allocate(512, CPU);

        assertTrue(assertRejected(m, InvalidHandleException.class, () -> m.deallocate(MemoryHandle.INVALID)).getMessage().contains("zero"));
        InvalidHandleException doubleFree = assertRejected(m, InvalidHandleException.class, () -> m.deallocate(freed));
        assertEquals(freed, doubleFree.handle());
        assertTrue(doubleFree.getMessage().contains("already freed"), doubleFree.getMessage());
        assertTrue(assertRejected(m, InvalidHandleException.class, () -> m.deallocate(foreign)).getMessage().contains("not issued"));
        assertRejected(m, InvalidHandleException.class, () -> m.deallocate(null));
        assertRejected(m, InvalidHandleException.class, () -> m.copy(live, freed, 1, 0, 0));
        assertRejected(m, InvalidHandleException.class, () -> m.mapMemory(freed, MemoryAccess.READ_WRITE));
        assertTrue(m.handleInfo(freed).isEmpty());
        assertTrue(m.handleInfo(foreign).isEmpty());
        assertFalse(m.owns(foreign));
        assertTrue(m.owns(live));
    }

    @Test
    void copiesOutsideEitherBlockAreRejectedIncludingOverflow() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryHandle a = m.allocate(100, CPU);
        MemoryHandle b = m.allocate(50, CPU);
        write(m, a, (byte) 1);
        write(m, b, (byte) 2);
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copy(a, b, 51, 0, 0));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copy(a, b, 10, 95, 0));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copy(a, b, 10, 0, 41));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copy(a, b, -1, 0, 0));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copy(a, b, 1, -1, 0));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copy(a, b, 2, Long.MAX_VALUE, 0));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copy(a, b, Long.MAX_VALUE, 1, 1));
        // The 256-byte block behind a 100-byte request is not the caller's to copy.
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copy(a, a, 1, 100, 0));
        assertContent(m, a, (byte) 1);
        assertContent(m, b, (byte) 2);
    }

    @Test
    void badPoolConfigurationIsRejected() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        m.allocate(2 * MiB, CPU);
        MemoryPoolConfig before = m.poolConfig(MemoryType.GENERAL);
        assertRejected(m, InvalidMemoryRequestException.class,
                () -> m.configurePool(CPU, MemoryPoolConfig.builder().initialSize(0).maxSize(MiB).build()));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.configurePool(CPU, null));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.configurePool(Device.cpu(3), before));
        assertEquals(before, m.poolConfig(MemoryType.GENERAL));
        MemoryPoolConfig bigger = before.toBuilder().growthIncrement(4 * MiB).build();
        m.configurePool(CPU, bigger);
        assertEquals(bigger, m.poolConfig(MemoryType.GENERAL));
        long reserved = m.memoryInfo().reservedBytes();
        m.allocate(MiB / 2, CPU);
        assertEquals(reserved + 4 * MiB, m.memoryInfo().reservedBytes(), "new growth increment applies to future growth");
    }

    @Test
    void aRequestOfAQuarterOfTheGrowthIncrementOrMoreGetsAChunkOfItsOwnSize() {
        ArenaUpstream up = new ArenaUpstream(256 * MiB);
        PooledMemoryManager m = manager(up, pool(4 * MiB, 16 * MiB));
        m.allocate(MiB, CPU);
        assertEquals(4 * MiB, m.memoryInfo().reservedBytes(), "the first chunk is the initial size");
        m.allocate(5 * MiB, CPU);
        assertEquals(9 * MiB, m.memoryInfo().reservedBytes(), "5 MiB >= 16 MiB / 4: a 5 MiB chunk");
        m.allocate(4 * MiB, CPU);
        assertEquals(13 * MiB, m.memoryInfo().reservedBytes(), "4 MiB, exactly a quarter, does not fit the 3 MiB left: its own chunk");
        m.allocate(3 * MiB, CPU);
        assertEquals(13 * MiB, m.memoryInfo().reservedBytes(), "3 MiB fits the first chunk's rest");
        m.allocate(MiB, CPU);
        assertEquals(29 * MiB, m.memoryInfo().reservedBytes(), "1 MiB < 16 MiB / 4 finds no room: a growth increment");
        m.allocate(15 * MiB, CPU);
        assertEquals(29 * MiB, m.memoryInfo().reservedBytes(), "15 MiB fits the rest of that increment");
    }

    @Test
    void afterCloseEveryCallSaysTheDeviceIsUnavailableAndEveryByteIsBack() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        List<String> warnings = new CopyOnWriteArrayList<>();
        PoolLog log = new PoolLog() {
            @Override
            public void warn(String message, Throwable cause) {
                warnings.add(message);
            }

            @Override
            public void info(String message) {
            }
        };
        PooledMemoryManager m = PooledMemoryManager.create(up,
                config(pool(MiB, MiB)).withTracking(true, true), PoolSettings.defaults().withLog(log), null);
        MemoryHandle h = m.allocate(3000, CPU);
        m.allocate(5000, MemoryType.CACHE, CPU);
        MemorySegment view = m.mapMemory(h, MemoryAccess.READ_WRITE);
        assertTrue(up.liveBytes() > 0);
        m.close();
        m.close();
        assertEquals(0, up.liveBytes(), "every chunk went back to the upstream");
        assertTrue(up.closed);
        assertEquals(up.reserves.get(), up.releases.get());
        assertThrows(IllegalStateException.class, () -> view.get(ValueLayout.JAVA_BYTE, 0), "views die with the manager");
        assertEquals(1, warnings.size(), warnings.toString());
        assertTrue(warnings.get(0).contains("2 live allocations") && warnings.get(0).contains("8000 bytes"), warnings.get(0));
        assertTrue(warnings.get(0).contains("PoolEngineTest"), "debug mode names the allocation site: " + warnings.get(0));
        for (Executable call : List.<Executable>of(() -> m.allocate(1, CPU), () -> m.deallocate(h), () -> m.memoryInfo(),
                () -> m.copy(h, h, 1, 0, 0), () -> m.mapMemory(h, MemoryAccess.READ_ONLY), () -> m.defragment(CPU),
                () -> m.configurePool(CPU, MemoryPoolConfig.defaults()), () -> m.handles())) {
            DeviceUnavailableException e = assertThrows(DeviceUnavailableException.class, call);
            assertEquals(CPU, e.device());
        }
        assertTrue(m.handleInfo(h).isEmpty());
    }

    // ------------------------------------------------------------------ copies and mapping

    @Test
    void copyMovesBytesAndOverlapWithinOneBlockIsMemmove() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryHandle a = m.allocate(4096, CPU);
        MemoryHandle b = m.allocate(4096, MemoryType.TENSOR, CPU);
        write(m, a, (byte) 7);
        m.copy(a, b, 4096, 0, 0);
        assertContent(m, b, (byte) 7);
        assertTrue(m.memoryInfo().bandwidthGbps().isPresent(), "a real copy was measured");

        MemorySegment s = m.mapMemory(b, MemoryAccess.READ_WRITE);
        for (int i = 0; i < 16; i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) i);
        }
        m.unmapMemory(b);
        m.copy(b, b, 12, 0, 4); // forward overlap
        MemorySegment r = m.mapMemory(b, MemoryAccess.READ_ONLY);
        byte[] expected = {0, 1, 2, 3, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
        for (int i = 0; i < 16; i++) {
            assertEquals(expected[i], r.get(ValueLayout.JAVA_BYTE, i), "byte " + i);
        }
        m.unmapMemory(b);
        m.copy(a, b, 0, 4096, 4096); // zero bytes at the very end: a valid no-op
    }

    @Test
    void mappedViewCoversExactlyTheBlockAndDiesOnUnmapOrFree() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryHandle h = m.allocate(100, CPU);
        MemorySegment rw = m.mapMemory(h, MemoryAccess.READ_WRITE);
        assertEquals(100, rw.byteSize());
        assertThrows(IndexOutOfBoundsException.class, () -> rw.get(ValueLayout.JAVA_BYTE, 100));
        assertTrue(m.handleInfo(h).orElseThrow().mapped());
        MemorySegment ro = m.mapMemory(h, MemoryAccess.READ_ONLY);
        assertTrue(ro.isReadOnly());
        assertThrows(IllegalArgumentException.class, () -> ro.set(ValueLayout.JAVA_BYTE, 0, (byte) 1));
        rw.set(ValueLayout.JAVA_BYTE, 5, (byte) 42);
        assertEquals(42, ro.get(ValueLayout.JAVA_BYTE, 5), "two views of one block see the same bytes");
        m.unmapMemory(h);
        assertThrows(IllegalStateException.class, () -> rw.get(ValueLayout.JAVA_BYTE, 5), "one unmap closes every view");
        assertThrows(IllegalStateException.class, () -> ro.get(ValueLayout.JAVA_BYTE, 5));
        assertFalse(m.handleInfo(h).orElseThrow().mapped());
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.unmapMemory(h));

        MemorySegment again = m.mapMemory(h, MemoryAccess.READ_WRITE);
        assertEquals(42, again.get(ValueLayout.JAVA_BYTE, 5));
        m.deallocate(h);
        assertThrows(IllegalStateException.class, () -> again.get(ValueLayout.JAVA_BYTE, 5),
                "a view of freed memory must not read what the next owner writes");
        MemoryHandle next = m.allocate(100, CPU);
        write(m, next, (byte) 9);
        assertThrows(IllegalStateException.class, () -> again.get(ValueLayout.JAVA_BYTE, 0));
    }

    @Test
    void nonHostMemoryMapsThroughAStagingCopyWrittenBackOnUnmap() {
        ArenaUpstream up = new ArenaUpstream(Device.cuda(0), 64 * MiB, false);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryHandle h = m.allocate(1000, Device.cuda(0));
        write(m, h, (byte) 3);
        assertContent(m, h, (byte) 3);
        MemorySegment ro = m.mapMemory(h, MemoryAccess.READ_ONLY);
        assertThrows(IllegalArgumentException.class, () -> ro.set(ValueLayout.JAVA_BYTE, 0, (byte) 0));
        m.unmapMemory(h);
        MemoryHandle copy = m.allocate(1000, Device.cuda(0));
        m.copy(h, copy, 1000, 0, 0);
        assertContent(m, copy, (byte) 3);
    }

    @Test
    void alignedAllocationsHonourAnyPowerOfTwo() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(4 * MiB, MiB));
        m.allocate(100, CPU); // so that the next block does not start at the chunk's (aligned) start
        for (long align : new long[] {1, 16, 256, 4096, 65536, MiB}) {
            MemoryHandle h = m.allocateAligned(1000, align, CPU);
            MemorySegment s = m.mapMemory(h, MemoryAccess.READ_ONLY);
            assertEquals(0, s.address() % align, "alignment " + align);
            assertEquals(Math.max(align, 256), m.handleInfo(h).orElseThrow().alignment());
            m.unmapMemory(h);
        }
    }

    @Test
    void asyncCopiesRunInStreamOrderAndEventsOrderStreams() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        HostStreamManager streams = new HostStreamManager(CPU);
        toClose.add(streams);
        PooledMemoryManager m = PooledMemoryManager.create(up, config(pool(4 * MiB, MiB)), PoolSettings.defaults(), streams);
        toClose.add(0, m);
        MemoryHandle a = m.allocate(MiB, CPU);
        MemoryHandle b = m.allocate(MiB, CPU);
        MemoryHandle c = m.allocate(MiB, CPU);
        write(m, a, (byte) 5);
        StreamHandle s1 = streams.createStream(CPU);
        StreamHandle s2 = streams.createStream(CPU);
        // s1: a -> b; s2 waits for s1's event, then b -> c. c must end up with a's bytes.
        m.copyAsync(MemoryTransfer.of(a, b, MiB), s1);
        var event = streams.recordEvent(s1);
        streams.waitEvent(s2, event);
        var done = m.copyAsync(MemoryTransfer.of(b, c, MiB), s2).toCompletableFuture();
        done.get(10, TimeUnit.SECONDS);
        streams.synchronizeStream(s1).toCompletableFuture().get(10, TimeUnit.SECONDS);
        assertTrue(streams.isStreamReady(s2));
        assertContent(m, c, (byte) 5);
        // Bad arguments throw at once, not through the stage.
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copyAsync(MemoryTransfer.of(a, b, MiB + 1), s1));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.copyAsync(MemoryTransfer.of(a, b, 1), new StreamHandle(999)));
        streams.destroyStream(s1);
        assertThrows(InvalidMemoryRequestException.class, () -> streams.destroyStream(s1));
        assertThrows(InvalidMemoryRequestException.class, () -> streams.destroyStream(StreamHandle.DEFAULT));
        assertThrows(InvalidMemoryRequestException.class, () -> streams.waitEvent(s2, new io.ferrum.memory.api.EventHandle(12345)));
        // The default stream is synchronous.
        var sync = m.copyAsync(MemoryTransfer.of(c, a, 10).withDstOffset(100), null).toCompletableFuture();
        assertTrue(sync.isDone());
        assertEquals(List.of(StreamHandle.DEFAULT, s2), streams.streams());
    }

    @Test
    void freeDuringAnAsyncCopyKeepsTheMemoryUntilTheCopyEnds() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        HostStreamManager streams = new HostStreamManager(CPU);
        toClose.add(streams);
        PooledMemoryManager m = PooledMemoryManager.create(up, config(pool(4 * MiB, MiB)), PoolSettings.defaults(), streams);
        toClose.add(0, m);
        MemoryHandle a = m.allocate(MiB, CPU);
        MemoryHandle b = m.allocate(MiB, CPU);
        StreamHandle s = streams.createStream(CPU);
        CountDownLatch gate = new CountDownLatch(1);
        streams.submit(s, () -> {
            try {
                gate.await();
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        var copy = m.copyAsync(MemoryTransfer.of(a, b, MiB), s).toCompletableFuture();
        m.deallocate(b);
        assertTrue(m.handleInfo(b).isEmpty(), "the handle is dead at once");
        assertEquals(2 * MiB, m.memoryInfo().usedBytes(), "the memory stays until the copy has run");
        gate.countDown();
        copy.get(10, TimeUnit.SECONDS);
        assertEquals(MiB, m.memoryInfo().usedBytes());
    }

    // ------------------------------------------------------------------ handles

    @Test
    void handlesAreUniqueAcrossManagersAndNeverComeBack() {
        PooledMemoryManager m1 = manager(new ArenaUpstream(64 * MiB), pool(MiB, MiB));
        PooledMemoryManager m2 = manager(new ArenaUpstream(64 * MiB), pool(MiB, MiB));
        assertNotEquals(m1.handleSpace(), m2.handleSpace());
        assertTrue(m1.handleSpace().isBounded());
        Set<MemoryHandle> seen = new HashSet<>();
        for (int i = 0; i < 1000; i++) {
            MemoryHandle h = m1.allocate(16, CPU);
            assertTrue(seen.add(h), "handle issued twice: " + h);
            assertTrue(seen.add(m2.allocate(16, CPU)));
            m1.deallocate(h); // the slot is reused with the next generation
            assertThrows(InvalidHandleException.class, () -> m1.deallocate(h));
        }
        for (MemoryHandle h : seen) {
            assertTrue(m1.handleSpace().contains(h.id()) != m2.handleSpace().contains(h.id()));
            assertTrue(m1.handleSpace().contains(h.id()) || m2.owns(h));
        }
    }

    // ------------------------------------------------------------------ defragmentation

    @Test
    void defragmentKeepsHandlesValidContentsIntactAndShrinksReserved() throws Exception {
        ArenaUpstream up = new ArenaUpstream(256 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        List<MemoryHandle> keep = new ArrayList<>();
        List<MemoryHandle> drop = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            MemoryHandle h = m.allocate(60 * KiB, CPU);
            write(m, h, (byte) i);
            (i % 4 == 0 ? keep : drop).add(h);
        }
        for (MemoryHandle h : drop) {
            m.deallocate(h);
        }
        MemoryInfo before = m.memoryInfo();
        assertTrue(before.fragmentationRatio() > 0.5, "swiss cheese: " + before.fragmentationRatio());
        DefragmentationStats stats = m.defragment(CPU).toCompletableFuture().get();
        MemoryInfo after = m.memoryInfo();
        assertTrue(stats.blocksMoved() > 0);
        assertEquals(before.fragmentationRatio(), stats.fragmentationBefore(), 1e-12);
        assertEquals(after.fragmentationRatio(), stats.fragmentationAfter(), 1e-12);
        assertTrue(after.fragmentationRatio() < 0.05, "after: " + after.fragmentationRatio());
        assertEquals(before.reservedBytes() - after.reservedBytes(), stats.memoryFreed());
        assertTrue(after.reservedBytes() <= 2 * MiB, "16 live blocks of 60 KiB fit in one chunk: " + after.reservedBytes());
        assertEquals(before.usedBytes(), after.usedBytes());
        assertEquals(after.reservedBytes(), up.liveBytes());
        for (int i = 0; i < keep.size(); i++) {
            assertContent(m, keep.get(i), (byte) (i * 4));
        }
    }

    @Test
    void defragmentNeverMovesDataIntoAnEmptierChunk() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(4 * MiB, MiB).toBuilder().preAllocate(true).build());
        List<MemoryHandle> big = new ArrayList<>();
        for (int i = 0; i < 64; i++) {
            big.add(m.allocate(64 * KiB, CPU)); // fills the pre-allocated 4 MiB chunk
        }
        MemoryHandle inGrowth = m.allocate(64 * KiB, CPU);
        assertEquals(5 * MiB, m.memoryInfo().reservedBytes());
        for (int i = 0; i < 64; i++) {
            if (i % 8 != 0) {
                m.deallocate(big.get(i));
            } else {
                write(m, big.get(i), (byte) i);
            }
        }
        m.deallocate(inGrowth);
        m.defragment(CPU).toCompletableFuture().get();
        // The sparse pre-allocated chunk is compacted in place; the empty growth chunk goes back.
        assertEquals(4 * MiB, m.memoryInfo().reservedBytes());
        for (int i = 0; i < 64; i += 8) {
            assertContent(m, big.get(i), (byte) i);
        }
    }

    @Test
    void mappedAndPinnedBlocksDoNotMove() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryHandle first = m.allocate(100 * KiB, CPU);
        MemoryHandle mapped = m.allocate(100 * KiB, CPU);
        MemorySegment view = m.mapMemory(mapped, MemoryAccess.READ_WRITE);
        long address = view.address();
        m.deallocate(first);
        m.defragment(CPU).toCompletableFuture().get();
        MemorySegment again = m.mapMemory(mapped, MemoryAccess.READ_ONLY);
        assertEquals(address, again.address(), "a mapped block stays where its views point");
        view.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
        m.unmapMemory(mapped);
        m.defragment(CPU).toCompletableFuture().get();
        MemorySegment moved = m.mapMemory(mapped, MemoryAccess.READ_ONLY);
        assertNotEquals(address, moved.address(), "once unmapped it slides into the hole before it");
        assertEquals(1, moved.get(ValueLayout.JAVA_BYTE, 0));
    }

    @Test
    void autoGcCompactsAndRetriesBeforeFailing() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        MemoryPoolConfig cfg = pool(MiB, MiB).toBuilder().maxSize(MiB).build();
        MemoryManagerConfig withGc = config(cfg).withAutoGc(true, 0.85);
        PooledMemoryManager m = manager(up, withGc, PoolSettings.defaults());
        List<MemoryHandle> hs = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            hs.add(m.allocate(64 * KiB, CPU));
        }
        for (int i = 0; i < 16; i += 2) {
            m.deallocate(hs.get(i));
        }
        // Half the pool is free, but in 64 KiB holes: 512 KiB fits only after compaction.
        MemoryHandle big = m.allocate(512 * KiB, CPU);
        assertTrue(m.owns(big));
        for (int i = 1; i < 16; i += 2) {
            assertTrue(m.owns(hs.get(i)));
        }
        PooledMemoryManager noGc = manager(new ArenaUpstream(64 * MiB), config(cfg), PoolSettings.defaults());
        List<MemoryHandle> hs2 = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            hs2.add(noGc.allocate(64 * KiB, CPU));
        }
        for (int i = 0; i < 16; i += 2) {
            noGc.deallocate(hs2.get(i));
        }
        assertRejected(noGc, OutOfDeviceMemoryException.class, () -> noGc.allocate(512 * KiB, CPU));
    }

    // ------------------------------------------------------------------ pressure

    @Test
    void pressureCallbackFiresOncePerCrossingBothWays() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        // 100 blocks of 102400 bytes fill exactly 10 chunks of 1024000 bytes: each block is 1 %.
        PooledMemoryManager m = manager(up, config(pool(1_024_000, 1_024_000)), PoolSettings.defaults().withCapacity(10_240_000));
        List<MemoryPressure> seen = new CopyOnWriteArrayList<>();
        List<String> observed = new CopyOnWriteArrayList<>();
        m.setPressureCallback(seen::add);
        m.addPressureObserver(new MemoryObserver() {
            @Override
            public void pressureChanged(Device d, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
                observed.add(previous + ">" + current + "@" + Math.round(info.utilizationPercent()));
            }
        });
        List<MemoryHandle> hs = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            hs.add(m.allocate(102_400, CPU));
        }
        assertEquals(List.of(MemoryPressure.MEDIUM, MemoryPressure.HIGH, MemoryPressure.CRITICAL), seen);
        assertEquals(List.of("LOW>MEDIUM@70", "MEDIUM>HIGH@85", "HIGH>CRITICAL@95"), observed);
        for (int i = 99; i >= 0; i--) {
            m.deallocate(hs.get(i));
        }
        assertEquals(List.of(MemoryPressure.MEDIUM, MemoryPressure.HIGH, MemoryPressure.CRITICAL,
                MemoryPressure.HIGH, MemoryPressure.MEDIUM, MemoryPressure.LOW), seen);
    }

    @Test
    void aThrowingPressureCallbackIsLoggedAndCannotBreakAllocation() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        List<String> warnings = new CopyOnWriteArrayList<>();
        PoolLog log = new PoolLog() {
            @Override
            public void warn(String message, Throwable cause) {
                warnings.add(message + " / " + (cause == null ? "" : cause.getMessage()));
            }

            @Override
            public void info(String message) {
            }
        };
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB)), PoolSettings.defaults().withCapacity(MiB).withLog(log));
        m.setPressureCallback(p -> {
            throw new IllegalStateException("callback broke");
        });
        MemoryHandle h = m.allocate(800 * KiB, CPU);
        assertTrue(m.owns(h));
        m.deallocate(h);
        assertFalse(m.owns(h), "the free went through too");
        assertEquals(2, warnings.size(), warnings.toString());
        assertTrue(warnings.get(0).contains("LOW -> MEDIUM") && warnings.get(0).contains("callback broke"), warnings.get(0));
        assertTrue(warnings.get(1).contains("MEDIUM -> LOW"), warnings.get(1));
    }

    // ------------------------------------------------------------------ statistics and hints

    @Test
    void accessStatisticsDetectSequentialRandomAndBurst() {
        AtomicLong clock = new AtomicLong(1_000_000_000L);
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB)), PoolSettings.defaults().withNanoClock(clock::get));
        MemoryHandle src = m.allocate(64 * KiB, CPU);
        MemoryHandle seq = m.allocate(64 * KiB, CPU);
        MemoryHandle rnd = m.allocate(64 * KiB, CPU);
        assertEquals(AccessPatternType.UNKNOWN, m.accessStats(seq).orElseThrow().patternType());
        for (int i = 0; i < 8; i++) {
            clock.addAndGet(10_000_000L);
            m.copy(src, seq, 4096, 0, i * 4096L);
            m.copy(src, rnd, 4096, 0, ((i * 7) % 8) * 4096L + (i % 2) * 100);
        }
        var s = m.accessStats(seq).orElseThrow();
        assertEquals(8, s.writeCount());
        assertEquals(0, s.readCount());
        assertEquals(4096, s.avgWriteSize());
        assertEquals(AccessPatternType.SEQUENTIAL, s.patternType());
        assertEquals(AccessPatternType.RANDOM, m.accessStats(rnd).orElseThrow().patternType());
        assertEquals(16, m.accessStats(src).orElseThrow().readCount());

        MemoryHandle burst = m.allocate(64 * KiB, CPU);
        clock.addAndGet(100_000_000L); // idle 100 ms, then 8 accesses 0.1 ms apart
        for (int i = 0; i < 8; i++) {
            clock.addAndGet(100_000L);
            m.copy(src, burst, 16, 0, (i * 5000L) % 60000);
        }
        assertEquals(AccessPatternType.BURST, m.accessStats(burst).orElseThrow().patternType());
    }

    @Test
    void statisticsOffMeansNoStatistics() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB).toBuilder().stats(false).build());
        MemoryHandle h = m.allocate(100, CPU);
        assertTrue(m.accessStats(h).isEmpty());
    }

    @Test
    void usageHintsAndPrefetchReachTheUpstream() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryHandle h = m.allocate(100, CPU);
        m.setUsageHint(h, MemoryUsageHint.READ_MOSTLY);
        assertEquals(MemoryUsageHint.READ_MOSTLY, up.lastHint);
        assertEquals(MemoryUsageHint.READ_MOSTLY, m.usageHint(h).orElseThrow());
        m.prefetch(h, Device.cpu());
        assertEquals(Device.cpu(), up.lastPrefetchTarget);
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.setUsageHint(h, null));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.prefetch(h, null));
    }

    // ------------------------------------------------------------------ zeroing

    @Test
    void zeroingPoliciesClearMemoryBetweenOwners() {
        for (ZeroingPolicy policy : ZeroingPolicy.values()) {
            ArenaUpstream up = new ArenaUpstream(64 * MiB);
            PooledMemoryManager m = manager(up, config(pool(MiB, MiB)), PoolSettings.defaults().withZeroing(policy));
            MemoryHandle a = m.allocate(4096, CPU);
            write(m, a, (byte) 1);
            m.deallocate(a);
            MemoryHandle b = m.allocate(4096, CPU);
            MemorySegment s = m.mapMemory(b, MemoryAccess.READ_ONLY);
            boolean allZero = true;
            for (long i = 0; i < 4096; i++) {
                allZero &= s.get(ValueLayout.JAVA_BYTE, i) == 0;
            }
            m.unmapMemory(b);
            assertEquals(policy != ZeroingPolicy.NONE, allZero, policy.name());
        }
    }

    // ------------------------------------------------------------------ mappings

    @Test
    void aMappingOnOneDeviceIsTwoHandlesOverTheSameBytes() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        var mapping = m.createMapping(CPU, CPU, 1000);
        assertNotEquals(mapping.source(), mapping.target());
        assertEquals(MemoryType.MAPPED, m.handleInfo(mapping.source()).orElseThrow().memoryType());
        assertEquals(1024, m.memoryInfo().usedBytes(), "the bytes count once");
        write(m, mapping.source(), (byte) 4);
        assertContent(m, mapping.target(), (byte) 4);
        m.deallocate(mapping.source());
        assertEquals(1024, m.memoryInfo().usedBytes(), "the other handle still holds the memory");
        assertContent(m, mapping.target(), (byte) 4);
        assertRejected(m, InvalidHandleException.class, () -> m.deallocate(mapping.source()));
        m.deallocate(mapping.target());
        assertEquals(0, m.memoryInfo().usedBytes());
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.createMapping(CPU, CPU, 0));
    }

    @Test
    void aMappingAcrossTwoManagersOfOneBackendAliasesMemory() {
        Map<Device, PooledMemoryManager> running = new java.util.concurrent.ConcurrentHashMap<>();
        PoolSettings settings = PoolSettings.defaults().withPeers(running::get);
        PooledMemoryManager a = manager(new ArenaUpstream(Device.cpu(1), 64 * MiB, true), config(pool(MiB, MiB)), settings);
        PooledMemoryManager b = manager(new ArenaUpstream(Device.cpu(2), 64 * MiB, true), config(pool(MiB, MiB)), settings);
        running.put(Device.cpu(1), a);
        running.put(Device.cpu(2), b);
        var mapping = a.createMapping(Device.cpu(1), Device.cpu(2), 4096);
        assertEquals(Device.cpu(2), b.handleInfo(mapping.target()).orElseThrow().device());
        assertTrue(a.owns(mapping.source()) && !a.owns(mapping.target()));
        assertTrue(b.owns(mapping.target()) && !b.owns(mapping.source()));
        write(b, mapping.target(), (byte) 8);
        assertContent(a, mapping.source(), (byte) 8);
        MemoryHandle local = b.allocate(4096, Device.cpu(2));
        b.copy(mapping.target(), local, 4096, 0, 0);
        assertContent(b, local, (byte) 8);
        assertEquals(4096, a.memoryInfo().usedBytes(), "the memory lives on the device that made the mapping");
        b.deallocate(mapping.target());
        a.deallocate(mapping.source());
        assertEquals(0, a.memoryInfo().usedBytes());

        assertTrue(assertRejected(a, InvalidMemoryRequestException.class, () -> a.createMapping(Device.cpu(1), Device.cpu(9), 64))
                .getMessage().contains("no running cpu:9"));
        assertTrue(assertRejected(a, InvalidMemoryRequestException.class, () -> a.createMapping(Device.cpu(1), Device.cuda(0), 64))
                .getMessage().contains("serves both kinds"));
        assertRejected(a, InvalidMemoryRequestException.class, () -> a.createMapping(Device.cpu(3), Device.cpu(2), 64));
    }

    // ------------------------------------------------------------------ thread caches

    @Test
    void aFreedSmallBlockIsReusedByTheSameThreadUnderANewHandleAndCountsAsFree() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        MemoryHandle a = m.allocate(1000, CPU);
        long address = m.mapMemory(a, MemoryAccess.READ_ONLY).address();
        m.unmapMemory(a);
        assertEquals(1024, m.memoryInfo().usedBytes(), "1000 B is a 1 KiB class at alignment 256");
        m.deallocate(a);
        MemoryInfo afterFree = m.memoryInfo();
        assertEquals(0, afterFree.usedBytes(), "a cached block is reported as free");
        assertEquals(0, afterFree.activeAllocations());
        assertEquals(afterFree.usedBytes(), m.quickInfo().usedBytes());
        assertEquals(List.of(), m.handles());

        MemoryHandle b = m.allocate(1000, CPU);
        assertNotEquals(a, b);
        MemorySegment view = m.mapMemory(b, MemoryAccess.READ_WRITE);
        assertEquals(address, view.address(), "the same thread got its cached block back");
        assertEquals(1000, view.byteSize());
        m.unmapMemory(b);
        assertFalse(m.owns(a));
        assertRejected(m, InvalidHandleException.class, () -> m.deallocate(a));
        assertRejected(m, InvalidHandleException.class, () -> m.mapMemory(a, MemoryAccess.READ_ONLY));
        assertEquals(1000, m.handleInfo(b).orElseThrow().size());
        assertEquals(1, m.memoryInfo().activeAllocations());
    }

    @Test
    void aThreadAloneGivesBlocksAbove256KiBBackToThePoolAtTheirExactSize() {
        PooledMemoryManager m = manager(new ArenaUpstream(64 * MiB), pool(4 * MiB, 4 * MiB));
        m.deallocate(m.allocate(600 * KiB, CPU));
        m.allocate(560 * KiB, CPU);
        assertEquals(560 * KiB, m.memoryInfo().usedBytes(), "carved at its size, not the 600 KiB block freed before");
    }

    @Test
    void threadsTakingTurnsOnAPoolCacheLargeBlocksAndReuseOneUpTo12PercentLarger() throws Exception {
        PooledMemoryManager m = manager(new ArenaUpstream(64 * MiB), pool(4 * MiB, 4 * MiB));
        MemoryHandle kept = m.allocate(64 * KiB, CPU); // this thread takes the pool lock first
        AtomicLong usedBeforeReuse = new AtomicLong();
        AtomicLong usedAfterReuse = new AtomicLong();
        Thread worker = new Thread(() -> {
            m.deallocate(m.allocate(600 * KiB, CPU)); // the lock came from another thread: cache large blocks
            usedBeforeReuse.set(m.memoryInfo().usedBytes());
            m.allocate(560 * KiB, CPU);
            usedAfterReuse.set(m.memoryInfo().usedBytes());
        });
        worker.start();
        worker.join(30_000);
        assertFalse(worker.isAlive());
        assertEquals(64 * KiB, usedBeforeReuse.get(), "the cached 600 KiB block counts as free");
        assertEquals(64 * KiB + 600 * KiB, usedAfterReuse.get(), "560 KiB got the cached 600 KiB block");

        // The worker took the lock since this thread last did: this thread caches too.
        m.deallocate(m.allocate(600 * KiB, CPU));
        m.allocate(560 * KiB, CPU);
        assertEquals(64 * KiB + 600 * KiB + 600 * KiB, m.memoryInfo().usedBytes(), "560 KiB got this thread's cached block");
        assertTrue(m.owns(kept));
    }

    @Test
    void aThreadAloneOnThePoolAgainStopsCachingLargeBlocks() throws Exception {
        PooledMemoryManager m = manager(new ArenaUpstream(64 * MiB), pool(4 * MiB, 4 * MiB));
        m.deallocate(m.allocate(64 * KiB, CPU));
        Thread other = new Thread(() -> m.deallocate(m.allocate(64 * KiB, CPU)));
        other.start();
        other.join(30_000);
        assertFalse(other.isAlive());
        visitThePoolLockInARow(m, 2500); // more than ThreadCache.CHECK_EVERY (4096) visits; the other thread has ended
        assertLargeBlockGoesBackAtItsExactSize(m);
    }

    @Test
    void aThreadKeepsCachingLargeBlocksWhileAnotherIsServedByItsCacheAloneAndStopsWhenItIsIdle() throws Exception {
        PooledMemoryManager m = manager(new ArenaUpstream(64 * MiB), pool(4 * MiB, 4 * MiB));
        m.deallocate(m.allocate(64 * KiB, CPU)); // this thread takes the pool lock first
        ExecutorService other = Executors.newSingleThreadExecutor();
        try {
            Runnable churn64KiB = () -> m.deallocate(m.allocate(64 * KiB, CPU));
            other.submit(churn64KiB).get(30, TimeUnit.SECONDS); // the other thread takes the lock (a turn), then keeps its block cached
            for (int round = 0; round < 3; round++) {
                // More visits in a row than CHECK_EVERY, so each round checks at least once; the other
                // thread's calls between rounds never reach the pool lock: its cache serves them.
                visitThePoolLockInARow(m, 2100);
                other.submit(churn64KiB).get(30, TimeUnit.SECONDS);
            }
            long used = m.memoryInfo().usedBytes();
            m.deallocate(m.allocate(600 * KiB, CPU));
            m.allocate(560 * KiB, CPU);
            assertEquals(used + 600 * KiB, m.memoryInfo().usedBytes(), "560 KiB got the cached 600 KiB block");

            // The other thread lives on but calls no more: two checks later this thread stops.
            visitThePoolLockInARow(m, 4200);
            assertLargeBlockGoesBackAtItsExactSize(m);
        } finally {
            other.shutdownNow();
        }
    }

    /** Allocates {@code n} blocks of 64 B and frees them: about 2n visits to the pool lock in a row (the cache keeps 8). */
    private static void visitThePoolLockInARow(PooledMemoryManager m, int n) {
        List<MemoryHandle> small = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            small.add(m.allocate(64, CPU));
        }
        small.forEach(m::deallocate);
    }

    private static void assertLargeBlockGoesBackAtItsExactSize(PooledMemoryManager m) {
        long used = m.memoryInfo().usedBytes();
        m.deallocate(m.allocate(600 * KiB, CPU));
        m.allocate(560 * KiB, CPU);
        assertEquals(used + 560 * KiB, m.memoryInfo().usedBytes(), "carved at its size: the 600 KiB block went back");
    }

    /** Allocates 16 blocks of 64 KiB, then frees them: the cache keeps 8 (its depth per bin), the pool gets 8. */
    private static void fill1MiBWith64KiBBlocksAndFreeThem(PooledMemoryManager m) {
        List<MemoryHandle> hs = new ArrayList<>();
        for (int i = 0; i < 16; i++) {
            hs.add(m.allocate(64 * KiB, CPU));
        }
        hs.forEach(m::deallocate);
    }

    @Test
    void aThreadGivesItsCachedBlocksBackBeforeThePoolGrows() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        fill1MiBWith64KiBBlocksAndFreeThem(m); // 8 go to this thread's cache (its depth per bin), 8 back to the pool
        assertEquals(MiB, m.memoryInfo().reservedBytes());
        m.allocate(MiB, CPU);
        assertEquals(MiB, m.memoryInfo().reservedBytes(), "the cached half went back: 1 MiB fits without growth");
        assertEquals(MiB, up.liveBytes());
    }

    @Test
    void aMappedBlockIsNeverCachedWithALiveView() {
        PooledMemoryManager m = manager(new ArenaUpstream(64 * MiB), pool(MiB, MiB));
        MemoryHandle a = m.allocate(4096, CPU);
        MemorySegment view = m.mapMemory(a, MemoryAccess.READ_WRITE);
        m.deallocate(a);
        assertThrows(IllegalStateException.class, () -> view.get(ValueLayout.JAVA_BYTE, 0), "the view died with the free");
        MemoryHandle b = m.allocate(4096, CPU);
        assertEquals(4096, m.mapMemory(b, MemoryAccess.READ_ONLY).byteSize());
        m.unmapMemory(b);
    }

    @Test
    void trimAndDefragmentTakeTheCallersCachedBlocksBack() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        fill1MiBWith64KiBBlocksAndFreeThem(m);
        assertEquals(MiB, up.liveBytes(), "cached blocks keep their chunk");
        assertEquals(MiB, m.trim());
        assertEquals(0, up.liveBytes());
        assertEquals(0, m.memoryInfo().reservedBytes());

        fill1MiBWith64KiBBlocksAndFreeThem(m);
        DefragmentationStats d = m.defragment(CPU).toCompletableFuture().join();
        assertEquals(MiB, d.memoryFreed());
        assertEquals(0, up.liveBytes());
    }

    @Test
    void anotherThreadsCachedBlocksComeBackOnItsNextCallAndADeadThreadsAtTrim() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        // One chunk of 1 MiB and no growth: what another thread caches is missing here.
        MemoryPoolConfig fixed = pool(MiB, MiB).toBuilder().autoExpansion(false).build();
        PooledMemoryManager m = manager(up, config(fixed), PoolSettings.defaults());
        CountDownLatch cached = new CountDownLatch(1);
        CountDownLatch callAgain = new CountDownLatch(1);
        CountDownLatch calledAgain = new CountDownLatch(1);
        Thread t = new Thread(() -> {
            List<MemoryHandle> hs = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                hs.add(m.allocate(64 * KiB, CPU));
            }
            hs.forEach(m::deallocate);
            cached.countDown();
            try {
                callAgain.await();
            } catch (InterruptedException e) {
                return;
            }
            m.deallocate(m.allocate(64 * KiB, CPU)); // its next call gives back what was cached
            calledAgain.countDown();
        });
        t.start();
        assertTrue(cached.await(10, TimeUnit.SECONDS));
        assertEquals(0, m.memoryInfo().usedBytes());
        OutOfDeviceMemoryException e = assertThrows(OutOfDeviceMemoryException.class, () -> m.allocate(768 * KiB, CPU));
        assertTrue(e.getMessage().contains("768"), e.getMessage());
        callAgain.countDown();
        assertTrue(calledAgain.await(10, TimeUnit.SECONDS));
        MemoryHandle big = m.allocate(768 * KiB, CPU);
        m.deallocate(big);
        t.join();
        // The thread ended with one block cached: trim takes it back, and the chunk goes too.
        assertEquals(MiB, up.liveBytes());
        m.configurePool(CPU, MemoryType.GENERAL, fixed.toBuilder().autoExpansion(true).build());
        assertEquals(MiB, m.trim());
        assertEquals(0, up.liveBytes());
    }

    @Test
    void aHandleFreedByTwoThreadsAtOnceIsFreedOnce() throws Exception {
        PooledMemoryManager m = manager(new ArenaUpstream(64 * MiB), pool(MiB, MiB));
        for (int round = 0; round < 200; round++) {
            MemoryHandle h = m.allocate(4096, CPU);
            CountDownLatch go = new CountDownLatch(1);
            AtomicLong wins = new AtomicLong();
            AtomicLong refusals = new AtomicLong();
            Runnable free = () -> {
                try {
                    go.await();
                    m.deallocate(h);
                    wins.incrementAndGet();
                } catch (InvalidHandleException e) {
                    refusals.incrementAndGet();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            };
            Thread t1 = new Thread(free);
            Thread t2 = new Thread(free);
            t1.start();
            t2.start();
            go.countDown();
            t1.join();
            t2.join();
            assertEquals(1, wins.get(), "round " + round);
            assertEquals(1, refusals.get(), "round " + round);
        }
        assertEquals(0, m.memoryInfo().activeAllocations());
    }

    @Test
    void threadsAllocatingFreeingCopyingAndCompactingAtOnceNeverShareABlock() throws Exception {
        ArenaUpstream up = new ArenaUpstream(256 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        java.util.concurrent.ConcurrentLinkedQueue<long[]> handedOver = new java.util.concurrent.ConcurrentLinkedQueue<>();
        List<Throwable> failures = new CopyOnWriteArrayList<>();
        int threads = 4;
        CountDownLatch done = new CountDownLatch(threads);
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int seed = t;
            Thread w = new Thread(() -> {
                java.util.Random rnd = new java.util.Random(seed);
                List<long[]> mine = new ArrayList<>(); // {handle id, fill byte}
                try {
                    for (int i = 0; i < 3000; i++) {
                        int op = rnd.nextInt(10);
                        if (op < 4 || mine.isEmpty()) {
                            long size = 1 + rnd.nextInt(rnd.nextBoolean() ? 4096 : 200_000);
                            MemoryHandle h = m.allocate(size, CPU);
                            byte fill = (byte) rnd.nextInt();
                            m.mapMemory(h, MemoryAccess.WRITE_ONLY).fill(fill);
                            m.unmapMemory(h);
                            mine.add(new long[] {h.id(), fill});
                        } else if (op < 7) {
                            long[] e = mine.remove(rnd.nextInt(mine.size()));
                            checkFill(m, e);
                            if (rnd.nextBoolean()) {
                                handedOver.add(e); // another thread frees it
                            } else {
                                m.deallocate(new MemoryHandle(e[0]));
                            }
                        } else if (op < 9) {
                            long[] other = handedOver.poll();
                            if (other != null) {
                                checkFill(m, other);
                                m.deallocate(new MemoryHandle(other[0]));
                            }
                        } else if (rnd.nextInt(20) == 0) {
                            m.defragment(CPU).toCompletableFuture().join();
                        } else {
                            long[] e = mine.get(rnd.nextInt(mine.size()));
                            checkFill(m, e);
                        }
                    }
                    for (long[] e : mine) {
                        checkFill(m, e);
                        m.deallocate(new MemoryHandle(e[0]));
                    }
                } catch (Throwable e) {
                    failures.add(e);
                } finally {
                    done.countDown();
                }
            });
            workers.add(w);
            w.start();
        }
        assertTrue(done.await(120, TimeUnit.SECONDS));
        for (Thread w : workers) {
            w.join();
        }
        assertEquals(List.of(), failures);
        for (long[] e : handedOver) {
            checkFill(m, e);
            m.deallocate(new MemoryHandle(e[0]));
        }
        MemoryInfo end = m.memoryInfo();
        assertEquals(0, end.usedBytes());
        assertEquals(0, end.activeAllocations());
        m.trim(); // every worker has ended: their caches come back and every chunk goes
        assertEquals(0, up.liveBytes());
        assertEquals(0, m.memoryInfo().reservedBytes());
    }

    private static void checkFill(PooledMemoryManager m, long[] e) {
        MemoryHandle h = new MemoryHandle(e[0]);
        MemorySegment s = m.mapMemory(h, MemoryAccess.READ_ONLY);
        try {
            for (long i = 0; i < s.byteSize(); i += 509) {
                if (s.get(ValueLayout.JAVA_BYTE, i) != (byte) e[1]) {
                    throw new AssertionError("byte " + i + " of " + h + " was overwritten: another owner shares the block");
                }
            }
            if (s.get(ValueLayout.JAVA_BYTE, s.byteSize() - 1) != (byte) e[1]) {
                throw new AssertionError("last byte of " + h + " was overwritten");
            }
        } finally {
            m.unmapMemory(h);
        }
    }

    @Test
    void theAllocationClockThreadRunsOnlyWhileAManagerIsOpen() throws Exception {
        PooledMemoryManager m = PooledMemoryManager.create(new ArenaUpstream(64 * MiB), config(pool(MiB, MiB)),
                PoolSettings.defaults(), null);
        java.time.Instant before = java.time.Instant.now();
        MemoryHandle h = m.allocate(100, CPU);
        java.time.Instant at = m.handleInfo(h).orElseThrow().allocatedAt();
        assertTrue(Math.abs(java.time.Duration.between(before, at).toMillis()) < 1000, "allocated at " + at + ", not near " + before);
        assertTrue(clockThread() != null, "the clock ticks while a manager is open");
        m.close();
        Thread t = clockThread();
        if (t != null) {
            t.join(5000);
        }
        assertTrue(clockThread() == null, "no clock thread is left once every manager is closed");
    }

    private static Thread clockThread() {
        return Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.getName().equals("ferrum-coarse-clock") && t.isAlive()).findFirst().orElse(null);
    }
}
