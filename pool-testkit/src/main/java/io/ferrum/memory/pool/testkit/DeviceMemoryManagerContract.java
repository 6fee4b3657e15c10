package io.ferrum.memory.pool.testkit;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Set;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.HandleSpace;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryObserver;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.MemoryUsageHint;
import io.ferrum.memory.api.OutOfDeviceMemoryException;

/**
 * The contract of {@link DeviceMemoryManager} and {@link AdvancedMemoryManager} as their Javadoc
 * states it, as a suite every backend runs against its managers (the way Netty extends {@code
 * AbstractByteBufAllocatorTest} per allocator). A backend's test class extends it and supplies a
 * manager for one device:
 *
 * <pre>{@code
 * class CpuManagerContractTest extends DeviceMemoryManagerContract {
 *     protected DeviceMemoryManager createManager() {
 *         return PooledMemoryManager.create(new FfmUpstream(Device.cpu(5), 64 << 20, held), config, settings, null);
 *     }
 * }
 * }</pre>
 *
 * <p>What it checks: allocation (a live block the manager describes, never overlapping another,
 * bad sizes, alignments and devices refused with nothing changed, a full device refused with
 * {@link OutOfDeviceMemoryException} and usable again after frees); free (a dead handle, double
 * frees and foreign handles refused, ids never issued twice); copies (between blocks at offsets,
 * {@code memmove} within one block, ranges outside a block refused, {@code copyAsync} checking its
 * arguments before it returns); {@code handleInfo}/{@code handles}/{@code owns}; the {@link
 * HandleSpace} containing every id issued; {@code quickInfo} equal to {@code memoryInfo} at a quiet
 * point; a pool configuration that cannot apply refused with the figures unchanged; pressure
 * observers and the pressure callback told of each crossing; map and unmap (exact views, read-only
 * views, views closed by unmap and free); hints that keep contents; defragmentation keeping handles
 * and contents; threads allocating at once; and close, after which every operation throws {@link
 * DeviceUnavailableException} while the queries that take any handle ({@code handleInfo}, {@code
 * owns}, {@code accessStats}, {@code usageHint}) answer "not live".
 *
 * <p>Contents are written and read through {@code mapMemory}, so those tests need an {@link
 * AdvancedMemoryManager} and are skipped (visibly) for a manager that is not one.
 *
 * <p>Each test gets a fresh manager, closed after it.
 */
public abstract class DeviceMemoryManagerContract {
    private static final long KiB = 1024;
    private static final long MiB = 1024 * KiB;

    /** The manager under test: new for each test. */
    protected DeviceMemoryManager manager;

    /**
     * @return a new manager for one device, holding no blocks, whose capacity ({@code totalBytes})
     *         is between 16 MiB and 1 GiB so that a test can fill it (64 MiB suits); each call a
     *         new manager (two may be alive at once)
     */
    protected abstract DeviceMemoryManager createManager();

    /**
     * @return true when views from {@code mapMemory} are the device memory itself, so that their
     *         addresses show a block's alignment; false for a backend whose views are host copies
     *         (staging). Default true.
     */
    protected boolean viewsAreDeviceMemory() {
        return true;
    }

    @BeforeEach
    final void openManager() {
        manager = createManager();
        assertNotNull(manager, "createManager() returned null");
        MemoryInfo info = manager.memoryInfo();
        assertEquals(0, info.activeAllocations(), "createManager() must return a manager without blocks");
        assertTrue(info.totalBytes() >= 16 * MiB && info.totalBytes() <= 1024 * MiB,
                "createManager() must return a manager of 16 MiB to 1 GiB so the suite can fill it; its totalBytes is "
                        + info.totalBytes());
    }

    @AfterEach
    final void closeManager() {
        manager.close();
    }

    // ------------------------------------------------------------------ helpers

    /** @return the device the manager serves */
    protected final Device device() {
        return manager.device();
    }

    /** @return a device of the same kind that the manager does not serve */
    protected final Device otherDevice() {
        return new Device(device().kind(), device().index() + 1);
    }

    /** @return the manager as an advanced one; skips the test when it is not */
    protected final AdvancedMemoryManager advanced() {
        assumeTrue(manager instanceof AdvancedMemoryManager,
                manager.getClass().getName() + " is not an AdvancedMemoryManager: tests of contents and mapping skipped");
        return (AdvancedMemoryManager) manager;
    }

    /** The figures of a snapshot that a failed call must leave as they were (bandwidth aside). */
    private record Figures(long total, long used, long free, long reserved, long allocations) {
        static Figures of(MemoryInfo i) {
            return new Figures(i.totalBytes(), i.usedBytes(), i.freeBytes(), i.reservedBytes(), i.activeAllocations());
        }
    }

    private Figures figures() {
        return Figures.of(manager.memoryInfo());
    }

    static byte[] pattern(int n, int seed) {
        return DeviceUpstreamContract.pattern(n, seed);
    }

    private static byte[] filled(int n, byte value) {
        byte[] b = new byte[n];
        Arrays.fill(b, value);
        return b;
    }

    /** Writes {@code bytes} into the block at {@code offset}: map, write, unmap. */
    protected final void write(MemoryHandle h, long offset, byte[] bytes) {
        AdvancedMemoryManager m = advanced();
        MemorySegment view = m.mapMemory(h, MemoryAccess.READ_WRITE);
        try {
            MemorySegment.copy(bytes, 0, view, ValueLayout.JAVA_BYTE, offset, bytes.length);
        } finally {
            m.unmapMemory(h);
        }
    }

    /** @return {@code length} bytes of the block from {@code offset}: map, read, unmap */
    protected final byte[] read(MemoryHandle h, long offset, int length) {
        AdvancedMemoryManager m = advanced();
        MemorySegment view = m.mapMemory(h, MemoryAccess.READ_ONLY);
        try {
            return view.asSlice(offset, length).toArray(ValueLayout.JAVA_BYTE);
        } finally {
            m.unmapMemory(h);
        }
    }

    private static void await(String what, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("Not within 30 s: " + what);
            }
            Thread.sleep(5);
        }
    }

    // ------------------------------------------------------------------ allocate

    @Test
    void allocateGivesALiveBlockThatTheManagerDescribes() {
        MemoryHandle h = manager.allocate(1000, device());

        assertTrue(h.isValid(), "a zero handle was issued");
        assertTrue(manager.owns(h), "owns(" + h + ")");
        MemoryHandleInfo info = manager.handleInfo(h).orElseThrow(() -> new AssertionError("no handleInfo for " + h));
        assertEquals(h, info.handle());
        assertEquals(1000, info.size(), "the size asked for");
        assertEquals(device(), info.device());
        assertEquals(MemoryType.GENERAL, info.memoryType());
        assertFalse(info.mapped());
        assertTrue(manager.handles().stream().anyMatch(i -> i.handle().equals(h)), "handles() lists " + h);
        MemoryInfo m = manager.memoryInfo();
        assertEquals(1, m.activeAllocations());
        assertTrue(m.usedBytes() >= 1000, "usedBytes " + m.usedBytes() + " counts the block");
        assertEquals(m.totalBytes() - m.usedBytes(), m.freeBytes(), "free = total - used");
        assertTrue(m.usedBytes() <= m.reservedBytes(), "used " + m.usedBytes() + " <= reserved " + m.reservedBytes());
    }

    @Test
    void blocksNeverOverlap() {
        List<MemoryHandle> blocks = new ArrayList<>();
        int[] sizes = {1, 7, 64, 100, 256, 1000, 4096, 5000, 65536, 100_000, 1 << 20, 3 << 20};
        for (int i = 0; i < sizes.length; i++) {
            MemoryHandle h = manager.allocate(sizes[i], device());
            blocks.add(h);
            write(h, 0, pattern(sizes[i], i));
        }
        for (int i = 0; i < sizes.length; i++) {
            assertArrayEquals(pattern(sizes[i], i), read(blocks.get(i), 0, sizes[i]),
                    "block " + i + " (" + sizes[i] + " bytes) was overwritten by another");
        }
    }

    @Test
    void badSizesAndTypesAreRefusedAndChangeNothing() {
        MemoryHandle live = manager.allocate(4096, device());
        Figures before = figures();
        long total = manager.memoryInfo().totalBytes();

        for (long size : new long[] {0, -1, Long.MIN_VALUE, total + 1, Long.MAX_VALUE}) {
            InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class,
                    () -> manager.allocate(size, device()), "allocate(" + size + ")");
            assertTrue(e.getMessage().contains(Long.toString(size)) || e.getMessage().contains(String.format("%,d", size)),
                    "the message names the size " + size + ": " + e.getMessage());
        }
        assertThrows(InvalidMemoryRequestException.class, () -> manager.allocate(64, null, device()), "a null memory type");

        assertEquals(before, figures());
        assertTrue(manager.owns(live));
    }

    @Test
    void anotherDeviceIsRefusedAndChangesNothing() {
        Figures before = figures();

        InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class,
                () -> manager.allocate(64, otherDevice()));
        assertTrue(e.getMessage().contains(otherDevice().toString()), "the message names the device: " + e.getMessage());
        assertThrows(InvalidMemoryRequestException.class, () -> manager.allocate(64, null));
        assertThrows(InvalidMemoryRequestException.class, () -> manager.allocateAligned(64, 64, otherDevice()));
        assertThrows(InvalidMemoryRequestException.class, () -> manager.memoryInfo(otherDevice()));
        assertThrows(InvalidMemoryRequestException.class, () -> manager.defragment(otherDevice()));

        assertEquals(before, figures());
    }

    @Test
    void aFullDeviceRefusesWithOutOfDeviceMemoryAndServesAgainAfterFrees() {
        long total = manager.memoryInfo().totalBytes();
        long block = Math.max(4096, total / 8 / 4096 * 4096);
        List<MemoryHandle> live = new ArrayList<>();
        OutOfDeviceMemoryException refused = null;
        for (int i = 0; i < 64 && refused == null; i++) {
            Figures before = figures();
            try {
                live.add(manager.allocate(block, device()));
            } catch (OutOfDeviceMemoryException e) {
                refused = e;
                assertEquals(before, figures(), "a refused allocation changes nothing");
            }
        }
        assertNotNull(refused, "a device of " + total + " bytes held 64 blocks of " + block + " bytes");
        assertEquals(block, refused.requestedBytes(), "the exception names the bytes asked for");
        assertTrue(refused.device() == null || refused.device().equals(device()), "the exception names the device");
        assertTrue(live.size() >= 1, "not even one block of an eighth of the device fitted");

        for (MemoryHandle h : live) {
            manager.deallocate(h);
        }
        assertEquals(0, manager.memoryInfo().activeAllocations());
        manager.deallocate(manager.allocate(block, device()));
    }

    // ------------------------------------------------------------------ free and handles

    @Test
    void freeKillsTheHandleAndADoubleFreeIsRefused() {
        MemoryHandle h = manager.allocate(1000, device());

        manager.deallocate(h);

        assertFalse(manager.owns(h));
        assertTrue(manager.handleInfo(h).isEmpty());
        assertTrue(manager.handles().isEmpty());
        assertEquals(0, manager.memoryInfo().activeAllocations());
        assertEquals(0, manager.memoryInfo().usedBytes());
        Figures before = figures();
        InvalidHandleException e = assertThrows(InvalidHandleException.class, () -> manager.deallocate(h));
        assertEquals(h, e.handle());
        assertTrue(e.getMessage().contains(h.toString()), "the message names the handle: " + e.getMessage());
        assertEquals(before, figures());
    }

    @Test
    void freeRefusesTheZeroHandleAndAnotherManagersHandle() {
        DeviceMemoryManager other = createManager();
        try {
            MemoryHandle foreign = other.allocate(64, other.device());
            MemoryHandle mine = manager.allocate(64, device());
            Figures before = figures();

            assertThrows(InvalidHandleException.class, () -> manager.deallocate(MemoryHandle.INVALID));
            InvalidHandleException e = assertThrows(InvalidHandleException.class, () -> manager.deallocate(foreign));
            assertEquals(foreign, e.handle());

            assertEquals(before, figures());
            assertTrue(other.owns(foreign), "the other manager's block is untouched");
            assertFalse(manager.owns(foreign));
            assertFalse(other.owns(mine));
        } finally {
            other.close();
        }
    }

    @Test
    void aHandleIsNeverIssuedTwice() {
        Set<Long> seen = new HashSet<>();
        for (int i = 0; i < 500; i++) {
            MemoryHandle h = manager.allocate(i % 2 == 0 ? 64 : 4096, device());
            assertTrue(seen.add(h.id()), "handle " + h + " was issued again after it was freed");
            manager.deallocate(h);
        }
    }

    @Test
    void handleInfoAndOwnsAnswerNotLiveForHandlesThatNameNothing() {
        MemoryHandle freed = manager.allocate(64, device());
        manager.deallocate(freed);

        for (MemoryHandle h : List.of(MemoryHandle.INVALID, freed, new MemoryHandle(-1L), new MemoryHandle(Long.MAX_VALUE))) {
            assertTrue(manager.handleInfo(h).isEmpty(), "handleInfo(" + h + ")");
            assertFalse(manager.owns(h), "owns(" + h + ")");
        }
    }

    @Test
    void theHandleSpaceHoldsEveryIssuedIdNeverChangesAndIsNotAnotherManagers() {
        HandleSpace space = manager.handleSpace();
        assertNotNull(space);
        for (int i = 0; i < 100; i++) {
            MemoryHandle h = manager.allocate(64 + i, device());
            assertTrue(space.contains(h.id()), "handle " + h + " lies outside the manager's space " + space);
        }
        assertEquals(space, manager.handleSpace(), "the space never changes");

        DeviceMemoryManager other = createManager();
        try {
            HandleSpace theirs = other.handleSpace();
            if (space.isBounded() && theirs.isBounded()) {
                long common = space.mask() & theirs.mask();
                assertNotEquals(space.prefix() & common, theirs.prefix() & common,
                        "two live managers have overlapping handle spaces: " + space + " and " + theirs);
            }
            MemoryHandle foreign = other.allocate(64, other.device());
            if (space.isBounded()) {
                assertFalse(space.contains(foreign.id()), "another manager's handle " + foreign + " lies in " + space);
            }
        } finally {
            other.close();
        }
    }

    // ------------------------------------------------------------------ alignment

    @Test
    void allocateAlignedHonoursTheAlignment() {
        for (long alignment : new long[] {1, 64, 4096, 65536}) {
            MemoryHandle h = manager.allocateAligned(100, alignment, device());
            MemoryHandleInfo info = manager.handleInfo(h).orElseThrow();
            assertTrue(info.alignment() >= alignment && Long.bitCount(info.alignment()) == 1,
                    "asked for " + alignment + ", reported " + info.alignment());
            if (manager instanceof AdvancedMemoryManager m && viewsAreDeviceMemory()) {
                MemorySegment view = m.mapMemory(h, MemoryAccess.READ_ONLY);
                try {
                    assertEquals(0, view.address() % alignment, "block address 0x" + Long.toHexString(view.address())
                            + " is not " + alignment + "-aligned");
                } finally {
                    m.unmapMemory(h);
                }
            }
        }
    }

    @Test
    void alignmentsThatAreNotPowersOfTwoAreRefusedAndChangeNothing() {
        Figures before = figures();
        for (long alignment : new long[] {0, -8, 3, 3000, Long.MIN_VALUE}) {
            InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class,
                    () -> manager.allocateAligned(100, alignment, device()), "alignment " + alignment);
            assertTrue(e.getMessage().contains(Long.toString(alignment)) || e.getMessage().contains(String.format("%,d", alignment)),
                    "the message names the alignment " + alignment + ": " + e.getMessage());
        }
        assertEquals(before, figures());
    }

    // ------------------------------------------------------------------ copy

    @Test
    void copyMovesTheRangeBetweenBlocksAtOffsets() {
        MemoryHandle src = manager.allocate(4096, device());
        MemoryHandle dst = manager.allocate(4096, device());
        write(src, 0, pattern(4096, 1));
        write(dst, 0, filled(4096, (byte) 0x11));

        manager.copy(src, dst, 1000, 100, 2000);

        assertArrayEquals(Arrays.copyOfRange(pattern(4096, 1), 100, 1100), read(dst, 2000, 1000));
        assertArrayEquals(filled(2000, (byte) 0x11), read(dst, 0, 2000), "bytes before the range are untouched");
        assertArrayEquals(filled(1096, (byte) 0x11), read(dst, 3000, 1096), "bytes after the range are untouched");
        assertArrayEquals(pattern(4096, 1), read(src, 0, 4096), "the source is untouched");
    }

    @Test
    void copyWithinOneBlockIsMemmove() {
        MemoryHandle h = manager.allocate(4096, device());
        byte[] p = pattern(4096, 2);

        write(h, 0, p);
        manager.copy(h, h, 1000, 0, 10);
        byte[] forward = p.clone();
        System.arraycopy(p, 0, forward, 10, 1000);
        assertArrayEquals(forward, read(h, 0, 4096), "copy to a higher, overlapping range");

        write(h, 0, p);
        manager.copy(h, h, 1000, 10, 0);
        byte[] backward = p.clone();
        System.arraycopy(p, 10, backward, 0, 1000);
        assertArrayEquals(backward, read(h, 0, 4096), "copy to a lower, overlapping range");
    }

    @Test
    void copyRefusesRangesOutsideTheBlocksAndBadHandlesAndChangesNothing() {
        MemoryHandle src = manager.allocate(1000, device());
        MemoryHandle dst = manager.allocate(1000, device());
        MemoryHandle freed = manager.allocate(1000, device());
        manager.deallocate(freed);
        boolean contents = manager instanceof AdvancedMemoryManager;
        if (contents) {
            write(src, 0, pattern(1000, 3));
            write(dst, 0, filled(1000, (byte) 0x22));
        }
        Figures before = figures();

        List<Executable> outside = List.of(
                () -> manager.copy(src, dst, 1001, 0, 0),
                () -> manager.copy(src, dst, 1000, 1, 0),
                () -> manager.copy(src, dst, 2, 0, 999),
                () -> manager.copy(src, dst, -1, 0, 0),
                () -> manager.copy(src, dst, 1, -1, 0),
                () -> manager.copy(src, dst, 1, 0, -1),
                () -> manager.copy(src, dst, 1, Long.MAX_VALUE, 0),
                () -> manager.copy(src, dst, Long.MAX_VALUE, 1, 1));
        for (int i = 0; i < outside.size(); i++) {
            assertThrows(InvalidMemoryRequestException.class, outside.get(i), "bad range #" + i);
        }
        assertThrows(InvalidHandleException.class, () -> manager.copy(freed, dst, 1, 0, 0), "a freed source");
        assertThrows(InvalidHandleException.class, () -> manager.copy(src, freed, 1, 0, 0), "a freed destination");
        assertThrows(InvalidHandleException.class, () -> manager.copy(MemoryHandle.INVALID, dst, 1, 0, 0), "the zero handle");

        assertEquals(before, figures());
        if (contents) {
            assertArrayEquals(filled(1000, (byte) 0x22), read(dst, 0, 1000), "a refused copy wrote nothing");
        }
        manager.copy(src, dst, 0, 1000, 1000); // zero bytes at the very end: a valid no-op
    }

    @Test
    void copyAsyncCopiesAndChecksItsArgumentsBeforeItReturns() throws Exception {
        MemoryHandle src = manager.allocate(4096, device());
        MemoryHandle dst = manager.allocate(4096, device());
        MemoryHandle freed = manager.allocate(64, device());
        manager.deallocate(freed);
        boolean contents = manager instanceof AdvancedMemoryManager;
        if (contents) {
            write(src, 0, pattern(4096, 4));
        }

        manager.copyAsync(MemoryTransfer.of(src, dst, 4096), null).toCompletableFuture().get(30, TimeUnit.SECONDS);

        if (contents) {
            assertArrayEquals(pattern(4096, 4), read(dst, 0, 4096));
        }
        assertThrows(InvalidMemoryRequestException.class,
                () -> manager.copyAsync(MemoryTransfer.of(src, dst, 4097), null), "a range outside is refused by the call itself");
        assertThrows(InvalidMemoryRequestException.class,
                () -> manager.copyAsync(new MemoryTransfer(src, dst, 10, 4090, 0), null));
        assertThrows(InvalidHandleException.class,
                () -> manager.copyAsync(MemoryTransfer.of(freed, dst, 1), null), "a freed handle is refused by the call itself");
    }

    // ------------------------------------------------------------------ figures

    @Test
    void quickInfoEqualsMemoryInfoAtAQuietPoint() {
        List<MemoryHandle> live = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            live.add(manager.allocate(64L << (i % 14), device()));
        }
        for (int i = 0; i < live.size(); i += 3) {
            manager.deallocate(live.get(i));
        }

        MemoryInfo full = manager.memoryInfo();
        MemoryInfo quick = manager.quickInfo();

        assertEquals(Figures.of(full), Figures.of(quick), "quickInfo " + quick + " against memoryInfo " + full);
        assertEquals(full.fragmentationRatio(), quick.fragmentationRatio(), 1e-12,
                "quickInfo's fragmentation ratio is the last memoryInfo's at most");
    }

    // ------------------------------------------------------------------ pools

    @Test
    void aPoolConfigurationThatCannotApplyIsRefusedAndChangesNothing() {
        MemoryPoolConfig current = manager.poolConfig(MemoryType.GENERAL);
        MemoryHandle live = manager.allocate(MiB, device());
        Figures before = figures();
        MemoryPoolConfig tooSmall = new MemoryPoolConfig(0, OptionalLong.of(4096), current.growthIncrement(),
                current.enableAutoExpansion(), current.alignment(), false, current.enableStats());

        InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class,
                () -> manager.configurePool(device(), MemoryType.GENERAL, tooSmall),
                "a maximum below the bytes of live blocks");
        assertTrue(e.getMessage().contains("4096") || e.getMessage().contains("4 KiB") || e.getMessage().contains("4,096"),
                "the message names the maximum: " + e.getMessage());
        assertThrows(InvalidMemoryRequestException.class, () -> manager.configurePool(otherDevice(), MemoryType.GENERAL, current));
        assertThrows(InvalidMemoryRequestException.class, () -> manager.configurePool(device(), MemoryType.GENERAL, null));

        assertEquals(current, manager.poolConfig(MemoryType.GENERAL), "the configuration is unchanged");
        assertEquals(before, figures(), "the figures are unchanged");
        assertTrue(manager.owns(live));
    }

    @Test
    void aPoolConfigurationThatAppliesLimitsLaterAllocations() {
        MemoryPoolConfig current = manager.poolConfig(MemoryType.GENERAL);
        long max = manager.memoryInfo().totalBytes() / 2 / 4096 * 4096;
        MemoryPoolConfig capped = new MemoryPoolConfig(Math.min(current.initialSize(), max), OptionalLong.of(max),
                Math.max(4096, Math.min(current.growthIncrement(), max)), true, current.alignment(), false, current.enableStats());

        manager.configurePool(device(), capped);

        assertEquals(capped, manager.poolConfig(MemoryType.GENERAL));
        assertThrows(InvalidMemoryRequestException.class, () -> manager.allocate(max + 4096, device()),
                "a request above the pool's maximum");
        manager.deallocate(manager.allocate(max / 2, device()));
    }

    // ------------------------------------------------------------------ pressure

    /** Records what a pressure observer hears. */
    private static final class Heard implements MemoryObserver {
        final List<MemoryPressure[]> changes = new CopyOnWriteArrayList<>();
        final List<Device> devices = new CopyOnWriteArrayList<>();

        @Override
        public void pressureChanged(Device d, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
            devices.add(d);
            changes.add(new MemoryPressure[] {previous, current});
        }

        MemoryPressure last() {
            return changes.isEmpty() ? MemoryPressure.LOW : changes.get(changes.size() - 1)[1];
        }
    }

    @Test
    void pressureObserversAndTheCallbackHearEachCrossingOnce() throws Exception {
        Heard heard = new Heard();
        Heard removed = new Heard();
        boolean reports = manager.addPressureObserver(heard);
        assumeTrue(reports, "this manager does not report pressure to observers (addPressureObserver answered false)");
        assertTrue(manager.addPressureObserver(heard), "adding twice is allowed, and tells it once");
        assertTrue(manager.addPressureObserver(removed));
        manager.removePressureObserver(removed);
        List<MemoryPressure> callback = new CopyOnWriteArrayList<>();
        manager.setPressureCallback(callback::add);

        long total = manager.memoryInfo().totalBytes();
        long block = Math.max(4096, total / 50 / 4096 * 4096);
        List<MemoryHandle> live = new ArrayList<>();
        while (manager.memoryInfo().utilizationPercent() < 88) {
            live.add(manager.allocate(block, device()));
        }
        await("the observer hears HIGH", () -> heard.last() == MemoryPressure.HIGH);
        for (MemoryHandle h : live) {
            manager.deallocate(h);
        }
        await("the observer hears LOW", () -> heard.last() == MemoryPressure.LOW);
        await("the callback hears LOW", () -> !callback.isEmpty() && callback.get(callback.size() - 1) == MemoryPressure.LOW);

        MemoryPressure expectedPrevious = MemoryPressure.LOW;
        List<MemoryPressure> told = new ArrayList<>();
        for (MemoryPressure[] change : heard.changes) {
            assertEquals(expectedPrevious, change[0], "each change starts where the last one ended");
            assertNotEquals(change[0], change[1], "a change to the same level was told");
            expectedPrevious = change[1];
            told.add(change[1]);
        }
        assertTrue(told.containsAll(List.of(MemoryPressure.MEDIUM, MemoryPressure.HIGH)), "heard " + told);
        assertEquals(Set.of(device()), Set.copyOf(heard.devices), "the observer is told the manager's device");
        assertEquals(told, callback, "the callback hears the same levels");
        assertTrue(removed.changes.isEmpty(), "a removed observer is not told");

        manager.removePressureObserver(heard);
        manager.setPressureCallback(null);
        int before = heard.changes.size();
        List<MemoryHandle> again = new ArrayList<>();
        while (manager.memoryInfo().utilizationPercent() < 75) {
            again.add(manager.allocate(block, device()));
        }
        again.forEach(manager::deallocate);
        assertEquals(before, heard.changes.size(), "a removed observer is not told");
    }

    // ------------------------------------------------------------------ map and unmap

    @Test
    void aMappedViewIsExactlyTheBlockUntilUnmapped() {
        AdvancedMemoryManager m = advanced();
        MemoryHandle h = m.allocate(1000, device());

        MemorySegment view = m.mapMemory(h, MemoryAccess.READ_WRITE);
        assertEquals(1000, view.byteSize(), "the view covers exactly the block");
        assertTrue(m.handleInfo(h).orElseThrow().mapped(), "handleInfo says mapped");
        MemorySegment.copy(pattern(1000, 5), 0, view, ValueLayout.JAVA_BYTE, 0, 1000);
        m.unmapMemory(h);

        assertFalse(m.handleInfo(h).orElseThrow().mapped());
        assertThrows(IllegalStateException.class, () -> view.get(ValueLayout.JAVA_BYTE, 0), "an unmapped view is closed");
        assertArrayEquals(pattern(1000, 5), read(h, 0, 1000), "what was written through the view stays");
        InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class, () -> m.unmapMemory(h),
                "unmapping a block that is not mapped");
        assertTrue(e.getMessage().contains(h.toString()), "the message names the handle: " + e.getMessage());
    }

    @Test
    void aReadOnlyViewRefusesWrites() {
        AdvancedMemoryManager m = advanced();
        MemoryHandle h = m.allocate(256, device());
        MemorySegment ro = m.mapMemory(h, MemoryAccess.READ_ONLY);
        try {
            assertTrue(ro.isReadOnly());
            assertThrows(IllegalArgumentException.class, () -> ro.set(ValueLayout.JAVA_BYTE, 0, (byte) 1));
        } finally {
            m.unmapMemory(h);
        }
    }

    @Test
    void oneUnmapClosesEveryViewOfTheBlock() {
        AdvancedMemoryManager m = advanced();
        MemoryHandle h = m.allocate(256, device());
        MemorySegment first = m.mapMemory(h, MemoryAccess.READ_WRITE);
        MemorySegment second = m.mapMemory(h, MemoryAccess.READ_ONLY);

        m.unmapMemory(h);

        assertThrows(IllegalStateException.class, () -> first.get(ValueLayout.JAVA_BYTE, 0));
        assertThrows(IllegalStateException.class, () -> second.get(ValueLayout.JAVA_BYTE, 0));
    }

    @Test
    void freeClosesTheViewsOfAMappedBlock() {
        AdvancedMemoryManager m = advanced();
        MemoryHandle h = m.allocate(256, device());
        MemorySegment view = m.mapMemory(h, MemoryAccess.READ_WRITE);

        m.deallocate(h);

        assertThrows(IllegalStateException.class, () -> view.get(ValueLayout.JAVA_BYTE, 0),
                "a view of a freed block never reads memory that belongs to someone else");
        assertFalse(m.owns(h));
    }

    @Test
    void mapAndUnmapRefuseHandlesThatNameNothing() {
        AdvancedMemoryManager m = advanced();
        MemoryHandle freed = m.allocate(64, device());
        m.deallocate(freed);

        assertThrows(InvalidHandleException.class, () -> m.mapMemory(MemoryHandle.INVALID, MemoryAccess.READ_ONLY));
        assertThrows(InvalidHandleException.class, () -> m.mapMemory(freed, MemoryAccess.READ_ONLY));
        assertThrows(InvalidHandleException.class, () -> m.unmapMemory(freed));
        assertThrows(InvalidHandleException.class, () -> m.prefetch(freed, device()));
        assertThrows(InvalidHandleException.class, () -> m.setUsageHint(freed, MemoryUsageHint.RANDOM));
    }

    @Test
    void aMappingWithADeviceTheBackendCannotReachIsRefused() {
        AdvancedMemoryManager m = advanced();
        Figures before = figures();
        Device unknown = new Device("nosuchkind", 0);

        InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class,
                () -> m.createMapping(device(), unknown, 4096));
        assertTrue(e.getMessage().contains(unknown.toString()), "the message names the device: " + e.getMessage());
        assertEquals(before, figures());
    }

    @Test
    void hintsAndPrefetchKeepTheContents() {
        AdvancedMemoryManager m = advanced();
        MemoryHandle h = m.allocate(64 * KiB, device());
        byte[] p = pattern((int) (64 * KiB), 6);
        write(h, 0, p);

        for (MemoryUsageHint hint : MemoryUsageHint.values()) {
            m.setUsageHint(h, hint);
            assertEquals(hint, m.usageHint(h).orElseThrow(), "usageHint after setUsageHint(" + hint + ")");
            assertArrayEquals(p, read(h, 0, p.length), "setUsageHint(" + hint + ") changed the contents");
        }
        m.prefetch(h, device());
        assertArrayEquals(p, read(h, 0, p.length), "prefetch changed the contents");
    }

    // ------------------------------------------------------------------ defragment

    @Test
    void defragmentKeepsHandlesValidAndContentsIntact() throws Exception {
        int n = 24;
        int size = (int) (64 * KiB);
        List<MemoryHandle> blocks = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            MemoryHandle h = manager.allocate(size, device());
            blocks.add(h);
            write(h, 0, pattern(size, i));
        }
        for (int i = 0; i < n; i += 2) {
            manager.deallocate(blocks.get(i));
        }

        assertNotNull(manager.defragment(device()).toCompletableFuture().get(60, TimeUnit.SECONDS));

        for (int i = 1; i < n; i += 2) {
            MemoryHandle h = blocks.get(i);
            assertTrue(manager.owns(h), "handle " + h + " stays valid");
            assertArrayEquals(pattern(size, i), read(h, 0, size), "block " + i + " kept its contents");
        }
        assertEquals(n / 2, manager.memoryInfo().activeAllocations());
    }

    // ------------------------------------------------------------------ threads

    @Test
    void threadsAllocatingAndFreeingAtOnceLeaveNothingBehind() throws Exception {
        int threads = 4;
        int rounds = 2000;
        CyclicBarrier start = new CyclicBarrier(threads);
        ConcurrentLinkedQueue<Throwable> failures = new ConcurrentLinkedQueue<>();
        Set<Long> everLive = java.util.concurrent.ConcurrentHashMap.newKeySet();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int seed = t;
            workers.add(Thread.ofPlatform().name("manager-contract-" + t).start(() -> {
                try {
                    start.await(30, TimeUnit.SECONDS);
                    List<MemoryHandle> mine = new ArrayList<>();
                    for (int r = 0; r < rounds; r++) {
                        MemoryHandle h = manager.allocate(64L << ((r + seed) % 12), device());
                        if (!everLive.add(h.id())) {
                            throw new AssertionError("handle " + h + " issued twice");
                        }
                        mine.add(h);
                        if (mine.size() > 8) {
                            manager.deallocate(mine.remove((r * 7) % mine.size()));
                        }
                    }
                    mine.forEach(manager::deallocate);
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
        MemoryInfo after = manager.memoryInfo();
        assertEquals(0, after.activeAllocations());
        assertEquals(0, after.usedBytes());
        assertTrue(manager.handles().isEmpty());
    }

    // ------------------------------------------------------------------ the data path

    @Test
    void writeAndReadMoveAnySegmentsBytesAtOffsets() {
        MemoryHandle h = manager.allocate(10_000, device());
        byte[] data = pattern(5000, 17);
        manager.write(h, 123, MemorySegment.ofArray(data));
        byte[] back = new byte[5000];
        manager.read(h, 123, MemorySegment.ofArray(back));
        assertArrayEquals(data, back, "heap -> block -> heap");
        try (java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofConfined()) {
            MemorySegment nat = arena.allocate(10_000);
            manager.read(h, 0, nat);
            assertArrayEquals(data, nat.asSlice(123, 5000).toArray(ValueLayout.JAVA_BYTE), "block -> native");
            nat.fill((byte) 0x33);
            manager.write(h, 0, nat.asSlice(0, 16));
        }
        java.nio.ByteBuffer buffer = java.nio.ByteBuffer.allocateDirect(16);
        manager.read(h, 0, MemorySegment.ofBuffer(buffer));
        assertEquals(0x33, buffer.get(15), "native -> block -> direct buffer");
    }

    @Test
    void writeAndReadRefuseBadArgumentsAndChangeNothing() {
        MemoryHandle h = manager.allocate(1000, device());
        byte[] before = pattern(1000, 5);
        manager.write(h, 0, MemorySegment.ofArray(before));
        MemorySegment eight = MemorySegment.ofArray(new byte[8]);
        Figures f = figures();
        assertThrows(InvalidMemoryRequestException.class, () -> manager.write(h, 0, null));
        assertThrows(InvalidMemoryRequestException.class, () -> manager.read(h, 0, null));
        assertThrows(InvalidMemoryRequestException.class, () -> manager.write(h, -1, eight));
        assertThrows(InvalidMemoryRequestException.class, () -> manager.write(h, 993, eight));
        assertThrows(InvalidMemoryRequestException.class, () -> manager.write(h, Long.MAX_VALUE, eight));
        assertThrows(InvalidMemoryRequestException.class, () -> manager.read(h, 0, eight.asReadOnly()));
        assertThrows(InvalidHandleException.class, () -> manager.write(null, 0, eight));
        assertThrows(InvalidHandleException.class, () -> manager.read(new MemoryHandle(0), 0, eight));
        assertEquals(f, figures(), "refused calls changed no figure");
        MemoryHandle freed = manager.allocate(64, device());
        manager.deallocate(freed);
        f = figures();
        assertThrows(InvalidHandleException.class, () -> manager.write(freed, 0, eight));
        assertEquals(f, figures());
        byte[] after = new byte[1000];
        manager.read(h, 0, MemorySegment.ofArray(after));
        assertArrayEquals(before, after, "refused writes wrote nothing");
    }

    @Test
    void withMappedGivesAViewOfTheBlockThatDiesWithTheAction() {
        AdvancedMemoryManager m = advanced();
        MemoryHandle h = m.allocate(300, device());
        MemorySegment[] escaped = new MemorySegment[1];
        long size = m.withMapped(h, MemoryAccess.READ_WRITE, view -> {
            view.set(ValueLayout.JAVA_BYTE, 299, (byte) 9);
            escaped[0] = view;
            return view.byteSize();
        });
        assertEquals(300, size);
        assertThrows(IllegalStateException.class, () -> escaped[0].get(ValueLayout.JAVA_BYTE, 0));
        byte[] one = new byte[1];
        m.read(h, 299, MemorySegment.ofArray(one));
        assertEquals(9, one[0], "the action's write reached the block");
        assertThrows(IllegalArgumentException.class, () -> m.withMapped(h, MemoryAccess.READ_ONLY, view -> {
            view.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
            return null;
        }));
        Figures f = figures();
        InvalidMemoryRequestException refused = m.withMapped(h, MemoryAccess.READ_ONLY,
                view -> assertThrows(InvalidMemoryRequestException.class, () -> m.deallocate(h)));
        assertFalse(refused.getMessage().isBlank());
        assertTrue(m.owns(h), "a free from inside the action is refused");
        assertEquals(f, figures());
        assertThrows(InvalidMemoryRequestException.class, () -> m.withMapped(h, null, v -> 1));
        assertThrows(InvalidMemoryRequestException.class, () -> m.withMapped(h, MemoryAccess.READ_ONLY, null));
        m.deallocate(h);
        assertThrows(InvalidHandleException.class, () -> m.withMapped(h, MemoryAccess.READ_ONLY, v -> 1));
    }

    // ------------------------------------------------------------------ close

    @Test
    void closeMakesEveryOperationThrowDeviceUnavailable() {
        MemoryHandle h = manager.allocate(256, device());
        MemoryHandle other = manager.allocate(256, device());
        MemoryPoolConfig config = manager.poolConfig(MemoryType.GENERAL);
        Device d = device();

        manager.close();
        manager.close(); // idempotent

        Map<String, Executable> calls = new java.util.LinkedHashMap<>();
        calls.put("allocate", () -> manager.allocate(64, d));
        calls.put("allocateAligned", () -> manager.allocateAligned(64, 64, d));
        calls.put("deallocate", () -> manager.deallocate(h));
        calls.put("copy", () -> manager.copy(h, other, 1, 0, 0));
        calls.put("copyAsync", () -> manager.copyAsync(MemoryTransfer.of(h, other, 1), null));
        calls.put("memoryInfo", () -> manager.memoryInfo());
        calls.put("quickInfo", () -> manager.quickInfo());
        calls.put("handles", () -> manager.handles());
        calls.put("configurePool", () -> manager.configurePool(d, config));
        calls.put("poolConfig", () -> manager.poolConfig(MemoryType.GENERAL));
        calls.put("defragment", () -> manager.defragment(d));
        calls.put("write", () -> manager.write(h, 0, MemorySegment.ofArray(new byte[1])));
        calls.put("read", () -> manager.read(h, 0, MemorySegment.ofArray(new byte[1])));
        if (manager instanceof AdvancedMemoryManager m) {
            calls.put("mapMemory", () -> m.mapMemory(h, MemoryAccess.READ_ONLY));
            calls.put("unmapMemory", () -> m.unmapMemory(h));
            calls.put("withMapped", () -> m.withMapped(h, MemoryAccess.READ_ONLY, v -> 1));
            calls.put("createMapping", () -> m.createMapping(d, d, 4096));
            calls.put("prefetch", () -> m.prefetch(h, d));
            calls.put("setUsageHint", () -> m.setUsageHint(h, MemoryUsageHint.RANDOM));
        }
        for (Map.Entry<String, Executable> call : calls.entrySet()) {
            DeviceUnavailableException e = assertThrows(DeviceUnavailableException.class, call.getValue(),
                    call.getKey() + " after close");
            assertTrue(e.device() == null || e.device().equals(d), call.getKey() + ": the exception names the device");
        }
        assertEquals(d, manager.device(), "device() still answers");
        assertTrue(manager.handleInfo(h).isEmpty(), "handleInfo after close: not live");
        assertFalse(manager.owns(h), "owns after close: not live");
        if (manager instanceof AdvancedMemoryManager m) {
            assertTrue(m.accessStats(h).isEmpty());
            assertTrue(m.usageHint(h).isEmpty());
        }
    }
}
