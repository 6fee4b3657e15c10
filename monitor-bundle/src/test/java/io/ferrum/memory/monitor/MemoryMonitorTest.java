package io.ferrum.memory.monitor;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.annotation.Annotation;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.BooleanSupplier;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;
import org.junit.jupiter.api.function.Executable;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.AllocationStrategy;
import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryMapping;
import io.ferrum.memory.api.MemoryObserver;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.OutOfDeviceMemoryException;
import io.ferrum.memory.api.StagingConflictException;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;
import io.ferrum.memory.strategy.bestfit.BestFitStrategy;

/** The monitor and router over real pooled managers (off-heap memory), driven as DS would drive them. */
class MemoryMonitorTest {
    static final long MiB = 1 << 20;
    static final Device CPU1 = Device.cpu(1);
    static final Device CPU2 = Device.cpu(2);

    private final List<AutoCloseable> toClose = new ArrayList<>();
    private long nextServiceId = 100;

    @AfterEach
    void closeAll() throws Exception {
        for (AutoCloseable c : toClose) {
            c.close();
        }
    }

    static MonitorConfig config(String strategy, long samplePeriodMs) {
        return MonitorBuilder.config(strategy, samplePeriodMs, 4);
    }

    MemoryMonitor monitor(String strategy) {
        MemoryMonitor m = new MemoryMonitor(null, config(strategy, 0), null);
        toClose.add(m::deactivate);
        return m;
    }

    PooledMemoryManager device(Device d, long capacity, MemoryPoolConfig pool) {
        PooledMemoryManager m = PooledMemoryManager.create(new ArenaUpstream(d, 256 * MiB, true),
                MemoryManagerConfig.defaults().withAutoGc(false, 0.85).withPoolConfig(MemoryType.GENERAL, pool)
                        .withPoolConfig(MemoryType.MAPPED, pool),
                PoolSettings.defaults().withCapacity(capacity), null);
        toClose.add(m);
        return m;
    }

    PooledMemoryManager device(Device d, long capacity) {
        return device(d, capacity, MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).build());
    }

    Map<String, Object> props(Device d, int ranking) {
        return Map.of(DeviceMemoryManager.DEVICE_PROPERTY, d.toString(), "service.ranking", ranking,
                "service.id", nextServiceId++);
    }

    Map<String, Object> strategyProps(String name, int ranking) {
        return Map.of(AllocationStrategy.NAME_PROPERTY, name, "service.ranking", ranking, "service.id", nextServiceId++);
    }

    static void await(BooleanSupplier condition, String what) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out waiting for " + what);
            }
            Thread.sleep(5);
        }
    }

    /** A strategy that always names one device, to drive the router deterministically. */
    record Fixed(Device device) implements AllocationStrategy {
        @Override
        public Optional<Device> selectDevice(long size, AllocationRequirements r, List<Device> available,
                                             Map<Device, MemoryInfo> info) {
            return available.contains(device) ? Optional.of(device) : Optional.empty();
        }

        @Override
        public String name() {
            return "fixed-" + device;
        }
    }

    /** A monitor over cpu:1 ({@code aBytes}) and cpu:2 (16 MiB) with best-fit. */
    private record TwoDevices(MemoryMonitor mon, PooledMemoryManager a, PooledMemoryManager b) {
    }

    private TwoDevices twoDevicesWithBestFit(long aBytes) {
        MemoryMonitor mon = monitor("");
        PooledMemoryManager a = device(CPU1, aBytes);
        PooledMemoryManager b = device(CPU2, 16 * MiB);
        mon.addManager(a, props(CPU1, 0));
        mon.addManager(b, props(CPU2, 0));
        mon.addStrategy(new BestFitStrategy(), strategyProps("best-fit", 0));
        return new TwoDevices(mon, a, b);
    }

    @Test
    void routesAllocationsThroughTheStrategyAndHandlesBackToTheirOwner() {
        TwoDevices t = twoDevicesWithBestFit(8 * MiB);
        MemoryMonitor mon = t.mon();
        PooledMemoryManager a = t.a();
        PooledMemoryManager b = t.b();
        assertEquals(Optional.of("best-fit"), mon.activeStrategy());
        a.allocate(3 * MiB, CPU1);
        // best-fit: cpu:1 scores 1 - 3/8 - |3/8 - 1/2|/2 = 0.5625, cpu:2 scores 1 - 14/16 - 1/4 = -0.125
        MemoryHandle h = mon.allocate(2 * MiB, AllocationRequirements.defaults());
        assertEquals(Optional.of(CPU1), mon.owner(h));
        assertEquals(2 * MiB, mon.handleInfo(h).orElseThrow().size());
        // preferring cpu:2 adds 0.2: still below cpu:1
        assertEquals(Optional.of(CPU1), mon.owner(mon.allocate(MiB, AllocationRequirements.defaults().preferring(CPU2))));
        MemoryHandle big = mon.allocate(10 * MiB, AllocationRequirements.defaults().withMemoryType(MemoryType.TENSOR));
        assertEquals(Optional.of(CPU2), mon.owner(big), "only cpu:2 has 10 MiB free");
        assertEquals(MemoryType.TENSOR, b.handleInfo(big).orElseThrow().memoryType());
        MemoryHandle aligned = mon.allocate(100, AllocationRequirements.defaults().withAlignment(65536));
        assertEquals(65536, mon.handleInfo(aligned).orElseThrow().alignment());
        mon.deallocate(h);
        assertFalse(a.owns(h));
        assertTrue(assertThrows(InvalidHandleException.class, () -> mon.deallocate(h)).getMessage()
                .contains("is not live on"), "the owner's own message: a double free");
        assertTrue(assertThrows(InvalidHandleException.class, () -> mon.deallocate(MemoryHandle.INVALID)).getMessage()
                .contains("zero handle"));
        assertTrue(assertThrows(InvalidHandleException.class, () -> mon.deallocate(null)).getMessage().contains("null"));
        assertTrue(assertThrows(InvalidHandleException.class, () -> mon.deallocate(new MemoryHandle(0xFFFFF_000001_00001L)))
                .getMessage().contains("not known to any device"));
        assertEquals(Optional.empty(), mon.owner(h));
        assertEquals(Map.of(CPU1, a.memoryInfo(), CPU2, b.memoryInfo()).keySet(), mon.globalMemoryInfo().keySet());
        assertTrue(assertThrows(InvalidMemoryRequestException.class, () -> mon.allocate(0, AllocationRequirements.defaults()))
                .getMessage().contains("size 0"));
        assertTrue(assertThrows(InvalidMemoryRequestException.class, () -> mon.allocate(-1, null))
                .getMessage().contains("size -1"), "the size is checked first");
        assertTrue(assertThrows(InvalidMemoryRequestException.class, () -> mon.allocate(1, null))
                .getMessage().contains("requirements are null"));
    }

    @Test
    void writesAndReadsGoToTheDeviceThatHoldsTheBlock() {
        TwoDevices t = twoDevicesWithBestFit(8 * MiB);
        MemoryMonitor mon = t.mon();
        MemoryHandle onA = t.a().allocate(4096, CPU1);
        MemoryHandle onB = t.b().allocate(4096, CPU2);
        byte[] bytes = {1, 2, 3, 4};
        mon.write(onA, 10, java.lang.foreign.MemorySegment.ofArray(bytes));
        mon.write(onB, 20, java.lang.foreign.MemorySegment.ofArray(new byte[] {9, 9}));
        byte[] back = new byte[4];
        t.a().read(onA, 10, java.lang.foreign.MemorySegment.ofArray(back));
        assertArrayEquals(bytes, back, "written on the owner, cpu:1");
        mon.read(onB, 20, java.lang.foreign.MemorySegment.ofArray(back));
        assertEquals(9, back[0], "read from the owner, cpu:2");
        assertTrue(assertThrows(InvalidHandleException.class, () -> mon.write(new MemoryHandle(0xFFFFF_000001_00001L), 0,
                java.lang.foreign.MemorySegment.ofArray(bytes))).getMessage().contains("not known to any device"));
        assertThrows(InvalidMemoryRequestException.class,
                () -> mon.write(onA, 4095, java.lang.foreign.MemorySegment.ofArray(bytes)), "the owner's range check");
        mon.deactivate();
        assertThrows(DeviceUnavailableException.class, () -> mon.read(onA, 0, java.lang.foreign.MemorySegment.ofArray(back)));
    }

    @Test
    void aDeviceOutOfMemoryIsLeftOutAndTheStrategyAskedAgain() {
        MemoryMonitor mon = monitor("");
        MemoryPoolConfig capped = MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).maxSize(4 * MiB).build();
        PooledMemoryManager a = device(CPU1, 8 * MiB, capped);
        PooledMemoryManager b = device(CPU2, 16 * MiB);
        mon.addManager(a, props(CPU1, 0));
        mon.addManager(b, props(CPU2, 0));
        mon.addStrategy(new BestFitStrategy(), strategyProps("best-fit", 0));
        a.allocate(3 * MiB, CPU1);
        // best-fit picks cpu:1 (free 5 MiB by capacity) but its pool may hold only 4 MiB: retried on cpu:2.
        MemoryHandle h = mon.allocate(2 * MiB, AllocationRequirements.defaults());
        assertEquals(Optional.of(CPU2), mon.owner(h));

        mon.removeManager(b, props(CPU2, 0));
        OutOfDeviceMemoryException e = assertThrows(OutOfDeviceMemoryException.class,
                () -> mon.allocate(2 * MiB, AllocationRequirements.defaults()));
        assertTrue(e.getMessage().contains("tried [cpu:1"), e.getMessage());
        assertTrue(e.getMessage().contains("best-fit"), e.getMessage());
        assertEquals(2 * MiB, e.requestedBytes());
    }

    @Test
    void aThreadsRoutingFiguresAreAtMost64CallsOld() {
        TwoDevices t = twoDevicesWithBestFit(4 * MiB);
        MemoryMonitor mon = t.mon();
        PooledMemoryManager b = t.b();
        // Best-fit for 1 MiB: cpu:1 (4 MiB free) scores 0, cpu:2 (16 MiB free) -0.1875.
        MemoryHandle first = mon.allocate(MiB, AllocationRequirements.defaults());
        assertEquals(Optional.of(CPU1), mon.owner(first));
        mon.deallocate(first);
        // Behind the router's back cpu:2 fills to 2 MiB free: now it scores 0.75 and should win.
        MemoryHandle filler = b.allocate(14 * MiB, CPU2);
        int stale = 0;
        for (int i = 0; i < 64; i++) {
            MemoryHandle h = mon.allocate(MiB, AllocationRequirements.defaults());
            if (mon.owner(h).equals(Optional.of(CPU1))) {
                stale++;
            }
            mon.deallocate(h);
        }
        assertTrue(stale < 64, "64 routed calls on the same figures, then fresh ones: " + stale + " went to cpu:1");
        MemoryHandle fresh = mon.allocate(MiB, AllocationRequirements.defaults());
        assertEquals(Optional.of(CPU2), mon.owner(fresh), "decided on figures read since the change");
        assertTrue(b.owns(filler));
    }

    @Test
    void aDeviceThatStopsAnsweringWhileRegisteredLeavesTheFiguresOfTheNextRefresh() {
        MemoryMonitor mon = monitor("");
        PooledMemoryManager a = device(CPU1, 4 * MiB);
        PooledMemoryManager b = device(CPU2, 16 * MiB);
        mon.addManager(a, props(CPU1, 0));
        mon.addManager(b, props(CPU2, 0));
        List<List<Device>> offered = new ArrayList<>();
        AllocationStrategy cpu1First = new AllocationStrategy() {
            @Override
            public Optional<Device> selectDevice(long size, AllocationRequirements r, List<Device> available,
                                                 Map<Device, MemoryInfo> infos) {
                offered.add(List.copyOf(available));
                assertEquals(Set.copyOf(available), infos.keySet(), "figures for exactly the devices offered");
                return available.contains(CPU1) ? Optional.of(CPU1) : available.stream().findFirst();
            }

            @Override
            public String name() {
                return "cpu1-first";
            }
        };
        mon.addStrategy(cpu1First, strategyProps("cpu1-first", 0));
        mon.deallocate(mon.allocate(MiB, AllocationRequirements.defaults())); // this thread's figures: both devices
        assertEquals(List.of(CPU1, CPU2), offered.get(0));
        b.close(); // never chosen here, still registered, but failing
        for (int i = 0; i < 3 * 64; i++) { // past several refreshes of the figures
            MemoryHandle h = mon.allocate(MiB, AllocationRequirements.defaults());
            assertEquals(Optional.of(CPU1), mon.owner(h), "allocation " + i);
            mon.deallocate(h);
        }
        assertEquals(List.of(CPU1), offered.get(offered.size() - 1), "cpu:2 left the figures");
        assertTrue(offered.stream().filter(o -> o.contains(CPU2)).count() <= 64, "within one refresh");

        a.close(); // no device answers now
        for (int i = 0; i < 3 * 64; i++) {
            DeviceUnavailableException e = assertThrows(DeviceUnavailableException.class,
                    () -> mon.allocate(MiB, AllocationRequirements.defaults()));
            assertTrue(e.getMessage().startsWith("No device is available to allocate 1048576 bytes"), "allocation " + i + ": " + e);
        }
    }

    @Test
    void theOnlyDeviceStoppingToAnswerJustBeforeARefreshMakesTheNextAllocationUnavailable() {
        MemoryMonitor mon = monitor("");
        PooledMemoryManager a = device(CPU1, 4 * MiB);
        mon.addManager(a, props(CPU1, 0));
        mon.addStrategy(new BestFitStrategy(), strategyProps("best-fit", 0));
        for (int i = 0; i < 64; i++) { // the figures read at the first call serve 63 more
            mon.deallocate(mon.allocate(MiB, AllocationRequirements.defaults()));
        }
        a.close();
        DeviceUnavailableException e = assertThrows(DeviceUnavailableException.class,
                () -> mon.allocate(MiB, AllocationRequirements.defaults()));
        assertEquals("No device is available to allocate 1048576 bytes: none of [cpu:1] answers", e.getMessage());
    }

    @Test
    void aChoiceMadeOnStaleFiguresThatFailsIsRetriedOnFreshOnes() {
        TwoDevices t = twoDevicesWithBestFit(4 * MiB);
        MemoryMonitor mon = t.mon();
        PooledMemoryManager a = t.a();
        PooledMemoryManager b = t.b();
        // The router now holds figures in which cpu:1 (the tighter fit) has 4 MiB free...
        mon.deallocate(mon.allocate(MiB, AllocationRequirements.defaults()));
        // ...then cpu:1 fills up behind the router's back.
        MemoryHandle filler = a.allocate(3 * MiB, CPU1);
        for (int i = 0; i < 50; i++) {
            MemoryHandle h = mon.allocate(2 * MiB, AllocationRequirements.defaults());
            assertEquals(Optional.of(CPU2), mon.owner(h), "allocation " + i + " went to a full device");
            mon.deallocate(h);
        }
        a.deallocate(filler);
        assertEquals(0, a.memoryInfo().usedBytes());
        assertEquals(0, b.memoryInfo().usedBytes());
    }

    @Test
    void withoutAStrategyOrADeviceAllocationSaysWhatIsMissing() {
        MemoryMonitor mon = monitor("");
        mon.addManager(device(CPU1, 8 * MiB), props(CPU1, 0));
        DeviceUnavailableException noStrategy = assertThrows(DeviceUnavailableException.class,
                () -> mon.allocate(1, AllocationRequirements.defaults()));
        assertTrue(noStrategy.getMessage().contains("No allocation strategy"), noStrategy.getMessage());
        assertEquals(Optional.empty(), mon.activeStrategy());

        MemoryMonitor empty = monitor("");
        empty.addStrategy(new BestFitStrategy(), strategyProps("best-fit", 0));
        assertTrue(assertThrows(DeviceUnavailableException.class, () -> empty.allocate(1, AllocationRequirements.defaults()))
                .getMessage().contains("No memory device"));
        assertEquals(MemoryPressure.LOW, empty.globalMemoryPressure());
    }

    @Test
    void theActiveStrategyIsTheConfiguredOneElseTheHighestRankingElseBestFit() {
        MemoryMonitor mon = monitor("");
        Fixed one = new Fixed(CPU1);
        Fixed two = new Fixed(CPU2);
        BestFitStrategy best = new BestFitStrategy();
        mon.addStrategy(one, strategyProps("one", 0));
        assertEquals(Optional.of("one"), mon.activeStrategy());
        mon.addStrategy(best, strategyProps("best-fit", 0));
        assertEquals(Optional.of("best-fit"), mon.activeStrategy(), "best-fit wins among equal rankings");
        mon.addStrategy(two, strategyProps("two", 5));
        assertEquals(Optional.of("two"), mon.activeStrategy(), "a higher ranking wins");
        mon.modify(config("one", 0));
        assertEquals(Optional.of("one"), mon.activeStrategy(), "the configured name wins");
        mon.removeStrategy(one);
        assertEquals(Optional.of("two"), mon.activeStrategy(), "a configured strategy that is gone falls back");
        mon.modify(config("", 0));
        mon.removeStrategy(two);
        assertEquals(Optional.of("best-fit"), mon.activeStrategy());
        assertEquals(List.of("best-fit"), mon.strategyNames());
    }

    @Test
    void placementsFollowTheActiveStrategyAcrossASwap() {
        MemoryMonitor mon = monitor("");
        mon.addManager(device(CPU1, 8 * MiB), props(CPU1, 0));
        mon.addManager(device(CPU2, 8 * MiB), props(CPU2, 0));
        Fixed one = new Fixed(CPU1);
        mon.addStrategy(one, strategyProps("one", 10));
        mon.addStrategy(new Fixed(CPU2), strategyProps("two", 0));
        assertEquals(Optional.of(CPU1), mon.owner(mon.allocate(1024, AllocationRequirements.defaults())));
        mon.removeStrategy(one);
        assertEquals(Optional.of(CPU2), mon.owner(mon.allocate(1024, AllocationRequirements.defaults())));
    }

    @Test
    void theHigherRankingManagerServesADeviceAndAManagerByHandComesFirst() {
        MemoryMonitor mon = monitor("");
        PooledMemoryManager low = device(CPU1, 8 * MiB);
        PooledMemoryManager high = device(CPU1, 16 * MiB);
        PooledMemoryManager byHand = device(CPU1, 32 * MiB);
        mon.addManager(low, props(CPU1, 1));
        mon.addManager(high, props(CPU1, 10));
        assertSame(high, mon.manager(CPU1).orElseThrow());
        mon.registerManager(CPU1, byHand);
        assertSame(byHand, mon.manager(CPU1).orElseThrow());
        assertEquals(32 * MiB, mon.globalMemoryInfo().get(CPU1).totalBytes());
        mon.unregisterManager(CPU1);
        assertSame(high, mon.manager(CPU1).orElseThrow());
        mon.removeManager(high, props(CPU1, 10));
        assertSame(low, mon.manager(CPU1).orElseThrow());
        assertThrows(InvalidMemoryRequestException.class, () -> mon.registerManager(CPU2, low), "low serves cpu:1");
    }

    @Test
    void handlesOfADeviceThatWentAwaySayUnavailableAndTotalsDropIt() {
        MemoryMonitor mon = monitor("");
        PooledMemoryManager a = device(CPU1, 8 * MiB);
        mon.addManager(a, props(CPU1, 0));
        mon.addManager(device(CPU2, 8 * MiB), props(CPU2, 0));
        mon.addStrategy(new Fixed(CPU1), strategyProps("one", 0));
        MemoryHandle h = mon.allocate(MiB, AllocationRequirements.defaults());
        mon.removeManager(a, props(CPU1, 0));
        a.close();
        assertEquals(List.of(CPU2), List.copyOf(mon.globalMemoryInfo().keySet()));
        DeviceUnavailableException e = assertThrows(DeviceUnavailableException.class, () -> mon.deallocate(h));
        assertEquals(CPU1, e.device());
        assertTrue(e.getMessage().contains("went away"), e.getMessage());
        assertThrows(DeviceUnavailableException.class, () -> mon.copy(MemoryTransfer.of(h, h, 1)));
        assertEquals(Optional.empty(), mon.owner(h));
    }

    static void assertStopped(String call, Executable executable) {
        DeviceUnavailableException e = assertThrows(DeviceUnavailableException.class, executable, call);
        assertTrue(e.getMessage().contains("is stopped"), call + ": " + e.getMessage());
        assertTrue(e.getMessage().contains("untouched"), call + ": " + e.getMessage());
        assertTrue(e.getMessage().contains("running MemoryRouter"), call + ": " + e.getMessage());
        assertFalse(e.getMessage().contains("released"), call + ": " + e.getMessage());
        assertEquals(null, e.device(), call + ": no device is unavailable, the monitor is");
    }

    @Test
    void aStoppedRouterRefusesToFreeABlockItDoesNotOwnAndTheNextRouterFreesIt() {
        MemoryMonitor mon = monitor("");
        PooledMemoryManager a = device(CPU1, 8 * MiB);
        mon.addManager(a, props(CPU1, 0));
        Fixed one = new Fixed(CPU1);
        mon.addStrategy(one, strategyProps("one", 0));
        MemoryHandle h = mon.allocate(MiB, AllocationRequirements.defaults());

        // DS stops the component first, then unbinds its references; the manager itself keeps running.
        mon.deactivate();
        mon.removeManager(a, props(CPU1, 0));
        mon.removeStrategy(one);
        assertStopped("deallocate", () -> mon.deallocate(h));
        assertTrue(a.owns(h), "the block is still live on its manager");
        assertEquals(MiB, a.memoryInfo().usedBytes());

        MemoryMonitor next = monitor("");
        next.addManager(a, props(CPU1, 0));
        next.deallocate(h);
        assertFalse(a.owns(h));
        assertEquals(0, a.memoryInfo().usedBytes());
    }

    @Test
    void aStoppedMonitorRefusesEveryCallSayingItIsStopped() {
        MemoryMonitor mon = monitor("");
        PooledMemoryManager a = device(CPU1, 8 * MiB);
        PooledMemoryManager b = device(CPU2, 8 * MiB);
        List<String> heard = new CopyOnWriteArrayList<>();
        MemoryObserver observer = new MemoryObserver() {
            @Override
            public void deviceRemoved(Device d) {
                heard.add("-" + d);
            }
        };
        mon.addObserver(observer, Map.of());
        mon.addManager(a, props(CPU1, 0));
        mon.addManager(b, props(CPU2, 0));
        Fixed one = new Fixed(CPU1);
        mon.addStrategy(one, strategyProps("one", 0));
        MemoryHandle h = mon.allocate(MiB, AllocationRequirements.defaults());
        MemoryHandle other = b.allocate(MiB, CPU2);

        mon.deactivate();
        // Still bound (DS unbinds after deactivation): the refusal does not depend on what is bound.
        assertStopped("allocate", () -> mon.allocate(MiB, AllocationRequirements.defaults()));
        assertStopped("allocate of a bad size", () -> mon.allocate(0, AllocationRequirements.defaults()));
        assertStopped("deallocate", () -> mon.deallocate(h));
        assertStopped("copy", () -> mon.copy(MemoryTransfer.of(h, other, 64)));
        assertStopped("copy on one device", () -> mon.copy(MemoryTransfer.of(h, h, 64).withDstOffset(64)));
        assertStopped("copyAsync", () -> mon.copyAsync(MemoryTransfer.of(h, other, 64), null));
        assertStopped("handleInfo", () -> mon.handleInfo(h));
        assertStopped("owner", () -> mon.owner(h));
        assertStopped("activeStrategy", mon::activeStrategy);
        assertStopped("globalMemoryInfo", mon::globalMemoryInfo);
        assertStopped("globalMemoryPressure", mon::globalMemoryPressure);
        assertStopped("devices", mon::devices);
        assertStopped("manager", () -> mon.manager(CPU1));
        assertStopped("registerManager", () -> mon.registerManager(CPU2, b));
        assertStopped("unregisterManager", () -> mon.unregisterManager(CPU2));
        assertStopped("setGlobalPressureCallback", () -> mon.setGlobalPressureCallback(levels -> { }));
        assertStopped("globalGc", mon::globalGc);

        // DS then unbinds everything: no call fails and no observer is told anything any more.
        mon.removeManager(a, props(CPU1, 0));
        mon.removeManager(b, props(CPU2, 0));
        mon.removeStrategy(one);
        mon.removeObserver(observer);
        mon.deactivate();
        assertStopped("deallocate after unbinding", () -> mon.deallocate(h));
        assertEquals(List.of(), heard);
        assertTrue(a.owns(h) && b.owns(other), "nothing was freed");
    }

    @Test
    void copiesBetweenDevicesArriveIntactAndAreBoundsChecked() throws Exception {
        MemoryMonitor mon = monitor("");
        PooledMemoryManager a = device(CPU1, 8 * MiB);
        PooledMemoryManager b = device(CPU2, 8 * MiB);
        mon.addManager(a, props(CPU1, 0));
        mon.addManager(b, props(CPU2, 0));
        MemoryHandle src = a.allocate(MiB, CPU1);
        MemoryHandle dst = b.allocate(MiB, CPU2);
        MemorySegment w = a.mapMemory(src, MemoryAccess.WRITE_ONLY);
        for (long i = 0; i < MiB; i += 8) {
            w.set(ValueLayout.JAVA_LONG, i, i * 7);
        }
        a.unmapMemory(src);
        mon.copy(MemoryTransfer.of(src, dst, MiB / 2).withSrcOffset(MiB / 2));
        mon.copyAsync(MemoryTransfer.of(src, dst, MiB / 2).withDstOffset(MiB / 2), null).toCompletableFuture()
                .get(30, TimeUnit.SECONDS);
        MemorySegment r = b.mapMemory(dst, MemoryAccess.READ_ONLY);
        for (long i = 0; i < MiB / 2; i += 8) {
            assertEquals((i + MiB / 2) * 7, r.get(ValueLayout.JAVA_LONG, i));
            assertEquals(i * 7, r.get(ValueLayout.JAVA_LONG, i + MiB / 2));
        }
        assertTrue(b.handleInfo(dst).orElseThrow().mapped(), "a view the caller holds stays open");
        b.unmapMemory(dst);
        assertFalse(a.handleInfo(src).orElseThrow().mapped(), "the router's own views are closed");
        assertThrows(InvalidMemoryRequestException.class, () -> mon.copy(MemoryTransfer.of(src, dst, MiB + 1)));
        assertThrows(InvalidMemoryRequestException.class, () -> mon.copy(MemoryTransfer.of(src, dst, 2).withSrcOffset(Long.MAX_VALUE)));
        assertThrows(InvalidMemoryRequestException.class,
                () -> mon.copyAsync(MemoryTransfer.of(src, dst, 2).withDstOffset(MiB - 1), null));
    }

    /** {@code m} seen through a proxy whose {@code copyToPeer} answers false, copying nothing. */
    private static DeviceMemoryManager withoutPeerCopies(PooledMemoryManager m) {
        return (DeviceMemoryManager) Proxy.newProxyInstance(AdvancedMemoryManager.class.getClassLoader(),
                new Class<?>[] {AdvancedMemoryManager.class}, (proxy, method, args) -> {
                    if (method.getName().equals("copyToPeer")) {
                        return false;
                    }
                    try {
                        return method.invoke(m, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }

    /** {@code m} seen through a proxy that records the name of every method called on it. */
    private static DeviceMemoryManager recorded(PooledMemoryManager m, List<String> calls) {
        return (DeviceMemoryManager) Proxy.newProxyInstance(AdvancedMemoryManager.class.getClassLoader(),
                new Class<?>[] {AdvancedMemoryManager.class}, (proxy, method, args) -> {
                    calls.add(method.getName());
                    try {
                        return method.invoke(m, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }

    /**
     * Issues 15 and 16: a copy between devices goes through the managers' data path, so no block is
     * mapped whole (on a GPU that is a staging copy of all of it): from host memory a view of the
     * source is written, into host memory the source is read, and between two other devices the
     * bytes go through a bounded host buffer, piece by piece; every route keeps the bytes and offsets.
     */
    @Test
    void copiesBetweenDevicesGoThroughTheDataPathWithoutMappingABlock() throws Exception {
        MemoryMonitor mon = monitor("");
        Device gpu1 = Device.cuda(1);
        Device gpu2 = Device.cuda(2);
        List<String> calls = new CopyOnWriteArrayList<>();
        DeviceMemoryManager host = recorded(device(CPU1, 32 * MiB), calls);
        DeviceMemoryManager g1 = recorded(device(gpu1, 32 * MiB), calls);
        DeviceMemoryManager g2 = recorded(device(gpu2, 32 * MiB), calls);
        mon.addManager(host, props(CPU1, 0));
        mon.addManager(g1, props(gpu1, 0));
        mon.addManager(g2, props(gpu2, 0));
        int n = (int) (2 * CrossDeviceCopier.BOUNCE_BYTES + 123); // three pieces through the bounce buffer
        byte[] data = new byte[n];
        new java.util.SplittableRandom(7).nextBytes(data);
        MemoryHandle hc = host.allocate(n + 64, CPU1);
        MemoryHandle h1 = g1.allocate(n + 64, gpu1);
        MemoryHandle h2 = g2.allocate(n + 64, gpu2);
        host.write(hc, 0, MemorySegment.ofArray(data));
        calls.clear();

        mon.copy(MemoryTransfer.of(hc, h1, n).withDstOffset(64)); // from host memory
        mon.copy(MemoryTransfer.of(h1, h2, n).withSrcOffset(64).withDstOffset(32)); // between two GPUs
        mon.copyAsync(MemoryTransfer.of(h2, hc, n).withSrcOffset(32).withDstOffset(64), null) // into host memory
                .toCompletableFuture().get(30, TimeUnit.SECONDS);
        List<String> made = List.copyOf(calls);

        byte[] back = new byte[n];
        host.read(hc, 64, MemorySegment.ofArray(back));
        assertArrayEquals(data, back);
        assertFalse(made.contains("mapMemory") || made.contains("unmapMemory"), "a block was mapped: " + made);
        assertEquals(2, made.stream().filter("withMapped"::equals).count(), "one view per host-side copy: " + made);
        assertEquals(1 + 3, made.stream().filter("write"::equals).count(), "the host view, then three pieces: " + made);
        assertEquals(3 + 1, made.stream().filter("read"::equals).count(), "three pieces, then into the host view: " + made);
        assertEquals(3, made.stream().filter("copyToPeer"::equals).count(),
                "each source's manager is asked first, and none knows the other as a peer: " + made);
    }

    /**
     * Ctrl-C in the shell interrupts the thread running {@code mem:copy}: a copy between two devices
     * through the host buffer stops before its next piece, says how much of the destination holds the
     * source, and keeps the interrupt; it used to copy every piece. The destination's manager
     * interrupts the thread as its first piece is written.
     */
    @Test
    void anInterruptStopsACopyBetweenDevicesBetweenTwoPieces() {
        MemoryMonitor mon = monitor("");
        Device gpu1 = Device.cuda(1);
        Device gpu2 = Device.cuda(2);
        PooledMemoryManager real2 = device(gpu2, 32 * MiB);
        DeviceMemoryManager g1 = withoutPeerCopies(device(gpu1, 32 * MiB));
        DeviceMemoryManager g2 = (DeviceMemoryManager) Proxy.newProxyInstance(AdvancedMemoryManager.class.getClassLoader(),
                new Class<?>[] {AdvancedMemoryManager.class}, (proxy, method, args) -> {
                    try {
                        return method.invoke(real2, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    } finally {
                        if (method.getName().equals("write")) {
                            Thread.currentThread().interrupt(); // Ctrl-C during the first piece
                        }
                    }
                });
        mon.addManager(g1, props(gpu1, 0));
        mon.addManager(g2, props(gpu2, 0));
        int n = (int) (2 * CrossDeviceCopier.BOUNCE_BYTES + 123); // three pieces
        byte[] data = new byte[n];
        java.util.Arrays.fill(data, (byte) 7);
        MemoryHandle h1 = g1.allocate(n, gpu1);
        MemoryHandle h2 = g2.allocate(n, gpu2);
        g1.write(h1, 0, MemorySegment.ofArray(data));
        Thread.interrupted();

        MemoryException e;
        try {
            e = assertThrows(MemoryException.class, () -> mon.copy(MemoryTransfer.of(h1, h2, n)));
            assertTrue(Thread.currentThread().isInterrupted(), "the interrupt stays set");
        } finally {
            Thread.interrupted();
        }
        assertTrue(e.getCause() instanceof InterruptedException, "an interrupt, said as one: " + e.getCause());
        assertTrue(e.getMessage().contains("interrupted after " + CrossDeviceCopier.BOUNCE_BYTES + " bytes")
                && e.getMessage().contains("destination offsets 0 to " + CrossDeviceCopier.BOUNCE_BYTES)
                && e.getMessage().contains(h2 + " on cuda:2"), e.getMessage());
        byte[] back = new byte[n];
        g2.read(h2, 0, MemorySegment.ofArray(back));
        int copied = (int) CrossDeviceCopier.BOUNCE_BYTES;
        assertEquals(copied, java.util.stream.IntStream.range(0, n).filter(i -> back[i] == 7).count(),
                "the first piece arrived, no other");
        assertEquals(7, back[copied - 1]);
        assertEquals(0, back[copied]);
    }

    /**
     * Issue 16: between two GPUs of one backend the router's copy is a peer copy, device to device in
     * the source's upstream, with no byte through host memory; the bytes and offsets are kept.
     */
    @Test
    void aCopyBetweenTwoPeersGoesDeviceToDeviceWithoutTouchingHostMemory() throws Exception {
        Device gpu1 = Device.cuda(1);
        Device gpu2 = Device.cuda(2);
        Map<Device, PooledMemoryManager> running = new ConcurrentHashMap<>();
        PoolSettings settings = PoolSettings.defaults().withPeers(running::get);
        MemoryManagerConfig config = MemoryManagerConfig.defaults().withAutoGc(false, 0.85);
        ArenaUpstream up1 = new ArenaUpstream(gpu1, 64 * MiB, false);
        ArenaUpstream up2 = new ArenaUpstream(gpu2, 64 * MiB, false);
        PooledMemoryManager g1 = PooledMemoryManager.create(up1, config, settings, null);
        toClose.add(g1);
        PooledMemoryManager g2 = PooledMemoryManager.create(up2, config, settings, null);
        toClose.add(g2);
        running.put(gpu1, g1);
        running.put(gpu2, g2);
        MemoryMonitor mon = monitor("");
        mon.addManager(g1, props(gpu1, 0));
        mon.addManager(g2, props(gpu2, 0));
        int n = (int) (2 * CrossDeviceCopier.BOUNCE_BYTES + 123); // three pieces, were it staged
        byte[] data = new byte[n];
        new java.util.SplittableRandom(11).nextBytes(data);
        MemoryHandle h1 = g1.allocate(n + 64, gpu1);
        MemoryHandle h2 = g2.allocate(n + 64, gpu2);
        g1.write(h1, 64, MemorySegment.ofArray(data));
        int hostBefore = up1.hostCopies.get() + up2.hostCopies.get();

        mon.copy(MemoryTransfer.of(h1, h2, n).withSrcOffset(64).withDstOffset(32));
        mon.copyAsync(MemoryTransfer.of(h2, h1, n).withSrcOffset(32), null).toCompletableFuture().get(30, TimeUnit.SECONDS);

        assertEquals(hostBefore, up1.hostCopies.get() + up2.hostCopies.get(), "no byte went through host memory");
        assertEquals(1, up1.deviceCopies.get(), "the first copy, in its source's upstream");
        assertEquals(1, up2.deviceCopies.get(), "the second copy, in its source's upstream");
        byte[] back = new byte[n];
        g1.read(h1, 0, MemorySegment.ofArray(back));
        assertArrayEquals(data, back);
    }

    /**
     * A GPU block its manager has mapped through a host staging copy, reached through the router: a
     * copy into it, a read and a write of it are refused, naming its handle, and change nothing (before,
     * the read returned the device's bytes and the copy and the write were lost to the unmap's
     * write-back); once unmapped, the router's copy goes through. Both routes: a peer copy (cuda:1 to
     * cuda:2) and one through host memory (cuda:3, which the backend's lookup does not answer).
     */
    @Test
    void theRouterIsRefusedABlockMappedThroughAStagingCopy() throws Exception {
        Device gpu1 = Device.cuda(1);
        Device gpu2 = Device.cuda(2);
        Map<Device, PooledMemoryManager> running = new ConcurrentHashMap<>();
        PoolSettings settings = PoolSettings.defaults().withPeers(running::get);
        MemoryManagerConfig config = MemoryManagerConfig.defaults().withAutoGc(false, 0.85);
        PooledMemoryManager g1 = PooledMemoryManager.create(new ArenaUpstream(gpu1, 64 * MiB, false), config, settings, null);
        toClose.add(g1);
        PooledMemoryManager g2 = PooledMemoryManager.create(new ArenaUpstream(gpu2, 64 * MiB, false), config, settings, null);
        toClose.add(g2);
        running.put(gpu1, g1);
        running.put(gpu2, g2);
        MemoryMonitor mon = monitor("");
        Device gpu3 = Device.cuda(3);
        PooledMemoryManager g3 = PooledMemoryManager.create(new ArenaUpstream(gpu3, 64 * MiB, false), config, settings, null);
        toClose.add(g3);
        mon.addManager(g1, props(gpu1, 0));
        mon.addManager(g2, props(gpu2, 0));
        mon.addManager(g3, props(gpu3, 0));
        MemoryHandle h1 = g1.allocate(4096, gpu1);
        MemoryHandle h2 = g2.allocate(4096, gpu2);
        MemoryHandle h3 = g3.allocate(4096, gpu3);
        byte[] threes = new byte[4096];
        java.util.Arrays.fill(threes, (byte) 3);
        mon.write(h1, 0, MemorySegment.ofArray(threes));
        g2.mapMemory(h2, MemoryAccess.READ_WRITE).fill((byte) 1);

        StagingConflictException copy = assertThrows(StagingConflictException.class,
                () -> mon.copy(MemoryTransfer.of(h1, h2, 4096)), "a router copy into the mapped block");
        assertEquals(h2, copy.handle(), copy.getMessage());
        StagingConflictException staged = assertThrows(StagingConflictException.class,
                () -> mon.copy(MemoryTransfer.of(h3, h2, 4096)), "a router copy through host memory into the mapped block");
        assertEquals(h2, staged.handle(), staged.getMessage());
        staged = assertThrows(StagingConflictException.class,
                () -> mon.copy(MemoryTransfer.of(h2, h3, 4096)), "a router copy through host memory out of the mapped block");
        assertEquals(h2, staged.handle(), staged.getMessage());
        assertThrows(StagingConflictException.class, () -> mon.read(h2, 0, MemorySegment.ofArray(new byte[1])),
                "a router read of the mapped block");
        assertThrows(StagingConflictException.class, () -> mon.write(h2, 0, MemorySegment.ofArray(new byte[] {9})),
                "a router write into the mapped block");
        g2.unmapMemory(h2);
        byte[] back = new byte[4096];
        mon.read(h2, 0, MemorySegment.ofArray(back));
        byte[] ones = new byte[4096];
        java.util.Arrays.fill(ones, (byte) 1);
        assertArrayEquals(ones, back, "a refused call changed the block, or the views' bytes were lost");
        mon.copy(MemoryTransfer.of(h1, h2, 4096));
        mon.read(h2, 0, MemorySegment.ofArray(back));
        assertArrayEquals(threes, back, "unmapped, the router's copy goes through");
        byte[] untouched = new byte[4096];
        mon.read(h3, 0, MemorySegment.ofArray(untouched));
        assertArrayEquals(new byte[4096], untouched, "a refused copy out of the mapped block wrote its destination");
    }

    /** Two managers of one backend (cpu:1, cpu:2) that know each other, so that a mapping may span them. */
    private TwoDevices twoPeers() {
        return twoPeers(CPU1, CPU2, 8 * MiB);
    }

    private TwoDevices twoPeers(Device d1, Device d2, long capacity) {
        return twoPeers(d1, d2, capacity, true);
    }

    /**
     * @param peerCopies false: the router sees the first manager through a proxy whose {@code
     *                   copyToPeer} answers false, so that copies from it go through host memory
     */
    private TwoDevices twoPeers(Device d1, Device d2, long capacity, boolean peerCopies) {
        Map<Device, PooledMemoryManager> running = new ConcurrentHashMap<>();
        PoolSettings settings = PoolSettings.defaults().withCapacity(capacity).withPeers(running::get);
        MemoryManagerConfig config = MemoryManagerConfig.defaults().withAutoGc(false, 0.85).withPoolConfig(MemoryType.GENERAL,
                MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).build());
        PooledMemoryManager a = PooledMemoryManager.create(new ArenaUpstream(d1, 64 * MiB, true), config, settings, null);
        toClose.add(a);
        PooledMemoryManager b = PooledMemoryManager.create(new ArenaUpstream(d2, 64 * MiB, true), config, settings, null);
        toClose.add(b);
        running.put(d1, a);
        running.put(d2, b);
        MemoryMonitor mon = monitor("");
        mon.addManager(peerCopies ? a : withoutPeerCopies(a), props(d1, 0));
        mon.addManager(b, props(d2, 0));
        return new TwoDevices(mon, a, b);
    }

    /** Two GPU-like managers (memory the CPU cannot address: a view is a staging copy), peers or not. */
    private TwoDevices twoGpus(boolean peerCopies) {
        Device gpu1 = Device.cuda(1);
        Device gpu2 = Device.cuda(2);
        Map<Device, PooledMemoryManager> running = new ConcurrentHashMap<>();
        PoolSettings settings = PoolSettings.defaults().withPeers(running::get);
        MemoryManagerConfig config = MemoryManagerConfig.defaults().withAutoGc(false, 0.85);
        PooledMemoryManager a = PooledMemoryManager.create(new ArenaUpstream(gpu1, 64 * MiB, false), config, settings, null);
        toClose.add(a);
        PooledMemoryManager b = PooledMemoryManager.create(new ArenaUpstream(gpu2, 64 * MiB, false), config, settings, null);
        toClose.add(b);
        running.put(gpu1, a);
        running.put(gpu2, b);
        MemoryMonitor mon = monitor("");
        mon.addManager(peerCopies ? a : withoutPeerCopies(a), props(gpu1, 0));
        mon.addManager(b, props(gpu2, 0));
        return new TwoDevices(mon, a, b);
    }

    /**
     * A router copy between two GPUs nested in a withMapped action of the calling thread on either
     * block: the action's view is a staging copy, which nested reads and writes use (the source's
     * bytes as the action left them; the destination's bytes kept by the action's write-back).
     */
    @ParameterizedTest(name = "peer copies {0}")
    @ValueSource(booleans = {true, false})
    void aRouterCopyNestedInAnActionOnAStagedBlockSeesAndKeepsTheActionsBytes(boolean peerCopies) {
        TwoDevices t = twoGpus(peerCopies);
        int n = 4096;
        MemoryHandle h1 = t.a().allocate(n, Device.cuda(1));
        MemoryHandle h2 = t.b().allocate(n, Device.cuda(2));
        byte[] ones = new byte[n];
        java.util.Arrays.fill(ones, (byte) 1);
        t.a().write(h1, 0, MemorySegment.ofArray(ones));

        // Into a block the action holds: the copied bytes must survive the action's write-back.
        t.b().withMapped(h2, MemoryAccess.READ_WRITE, view -> {
            t.mon().copy(MemoryTransfer.of(h1, h2, n));
            return null;
        });
        byte[] got = new byte[n];
        t.b().read(h2, 0, MemorySegment.ofArray(got));
        assertArrayEquals(ones, got, "the copy into the action's block was kept");

        // From a block the action holds: the bytes the action wrote, not the device's older ones.
        t.a().withMapped(h1, MemoryAccess.READ_WRITE, view -> {
            view.fill((byte) 7);
            t.mon().copy(MemoryTransfer.of(h1, h2, n));
            return null;
        });
        byte[] sevens = new byte[n];
        java.util.Arrays.fill(sevens, (byte) 7);
        t.b().read(h2, 0, MemorySegment.ofArray(got));
        assertArrayEquals(sevens, got, "the copy from the action's block took the action's bytes");
    }

    /**
     * A router copy between two blocks of one GPU nested in a withMapped action of the calling thread
     * on either of them, or within the block the action holds: the same manager's {@code copy}
     * refuses it (a device copy would neither read the action's copy nor survive its write-back),
     * where a copy between two GPUs goes through {@code read} and {@code write}, which share the
     * action's copy. Both work now, seeing and keeping the action's bytes; another thread's router
     * copy into a block an action holds is still refused, and changes nothing.
     */
    @Test
    void aRouterCopyBetweenTwoBlocksOfOneGpuNestedInAnActionSeesAndKeepsTheActionsBytes() throws Exception {
        Device gpu = Device.cuda(1);
        PooledMemoryManager g = PooledMemoryManager.create(new ArenaUpstream(gpu, 64 * MiB, false),
                MemoryManagerConfig.defaults().withAutoGc(false, 0.85), PoolSettings.defaults(), null);
        toClose.add(g);
        MemoryMonitor mon = monitor("");
        mon.addManager(g, props(gpu, 0));
        int n = 4096;
        MemoryHandle h1 = g.allocate(n, gpu);
        MemoryHandle h2 = g.allocate(n, gpu);
        byte[] ones = new byte[n];
        java.util.Arrays.fill(ones, (byte) 1);
        g.write(h1, 0, MemorySegment.ofArray(ones));
        byte[] got = new byte[n];

        // Into the block the action holds: the copied bytes must survive its write-back.
        g.withMapped(h2, MemoryAccess.READ_WRITE, view -> {
            mon.copy(MemoryTransfer.of(h1, h2, n));
            return null;
        });
        g.read(h2, 0, MemorySegment.ofArray(got));
        assertArrayEquals(ones, got, "the copy into the action's block was kept");

        // From the block the action holds: the action's bytes, not the device's older ones.
        g.withMapped(h1, MemoryAccess.READ_WRITE, view -> {
            view.fill((byte) 7);
            mon.copy(MemoryTransfer.of(h1, h2, n));
            return null;
        });
        byte[] sevens = new byte[n];
        java.util.Arrays.fill(sevens, (byte) 7);
        g.read(h2, 0, MemorySegment.ofArray(got));
        assertArrayEquals(sevens, got, "the copy from the action's block took the action's bytes");

        // Within the block the action holds, overlapping: a memmove of the action's bytes.
        g.withMapped(h1, MemoryAccess.READ_WRITE, view -> {
            for (int i = 0; i < n; i++) {
                view.set(java.lang.foreign.ValueLayout.JAVA_BYTE, i, (byte) i);
            }
            mon.copy(MemoryTransfer.of(h1, h1, n - 100).withSrcOffset(0).withDstOffset(100));
            return null;
        });
        g.read(h1, 0, MemorySegment.ofArray(got));
        for (int i = 100; i < n; i++) {
            assertEquals((byte) (i - 100), got[i], "byte " + i + " of the copy within the action's block");
        }

        // Another thread's router copy into a block an action holds: refused, nothing changed.
        java.util.concurrent.CountDownLatch inside = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CompletableFuture<Void> action = java.util.concurrent.CompletableFuture.runAsync(
                () -> g.withMapped(h2, MemoryAccess.READ_WRITE, view -> {
                    inside.countDown();
                    try {
                        go.await(30, java.util.concurrent.TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        throw new AssertionError(e);
                    }
                    return null;
                }));
        assertTrue(inside.await(30, java.util.concurrent.TimeUnit.SECONDS));
        StagingConflictException refused;
        try {
            refused = assertThrows(StagingConflictException.class, () -> mon.copy(MemoryTransfer.of(h1, h2, n)),
                    "another thread's router copy into the held block");
        } finally {
            go.countDown();
        }
        action.get(30, java.util.concurrent.TimeUnit.SECONDS);
        assertEquals(h2, refused.handle(), refused.getMessage());
        g.read(h2, 0, MemorySegment.ofArray(got));
        assertArrayEquals(sevens, got, "a refused copy changed the block");
    }

    /**
     * The two handles of one mapping between two GPUs name one block: a copy between them whose
     * ranges overlap must be a memmove, forwards and backwards, whether it is a peer copy (one copy in
     * the block's upstream) or, where the source's manager makes none, goes through the bounce buffer
     * piece by piece (a review saw 1,044,509 wrong bytes when the pieces always went front to back).
     */
    @ParameterizedTest(name = "peer copies {0}")
    @ValueSource(booleans = {true, false})
    void anOverlappingCopyBetweenTheTwoHandlesOfOneGpuMappingIsAMemmove(boolean peerCopies) {
        TwoDevices t = twoPeers(Device.cuda(1), Device.cuda(2), 64 * MiB, peerCopies);
        int n = (int) (2 * CrossDeviceCopier.BOUNCE_BYTES + 4096 + 7);
        int size = n + 3 * (int) MiB;
        for (long shift : new long[] {MiB + 5, -(MiB + 5)}) {
            MemoryMapping mapping = t.a().createMapping(Device.cuda(1), Device.cuda(2), size);
            byte[] before = new byte[size];
            new java.util.SplittableRandom(shift).nextBytes(before);
            t.a().write(mapping.source(), 0, MemorySegment.ofArray(before));
            long src = shift > 0 ? 0 : -shift;
            long dst = src + shift;
            t.mon().copy(MemoryTransfer.of(mapping.source(), mapping.target(), n).withSrcOffset(src).withDstOffset(dst));
            byte[] expected = before.clone();
            System.arraycopy(before, (int) src, expected, (int) dst, n);
            byte[] after = new byte[size];
            t.b().read(mapping.target(), 0, MemorySegment.ofArray(after));
            assertArrayEquals(expected, after, "shift " + shift);
            t.b().deallocate(mapping.target());
            t.a().deallocate(mapping.source());
        }
    }

    @Test
    void aCopyBetweenTheTwoHandlesOfOneMappingMovesTheBytesAndLeavesNeitherMapped() throws Exception {
        TwoDevices t = twoPeers();
        MemoryMonitor mon = t.mon();
        PooledMemoryManager a = t.a();
        PooledMemoryManager b = t.b();
        MemoryMapping mapping = a.createMapping(CPU1, CPU2, 4096);
        MemorySegment w = a.mapMemory(mapping.source(), MemoryAccess.WRITE_ONLY);
        for (long i = 0; i < 1024; i++) {
            w.set(ValueLayout.JAVA_BYTE, i, (byte) i);
        }
        a.unmapMemory(mapping.source());

        // The two handles belong to two managers of one backend: a peer copy, which maps nothing.
        mon.copy(MemoryTransfer.of(mapping.source(), mapping.target(), 1024).withDstOffset(1024));
        mon.copyAsync(MemoryTransfer.of(mapping.target(), mapping.source(), 1024).withDstOffset(2048), null)
                .toCompletableFuture().get(30, TimeUnit.SECONDS);
        assertFalse(a.handleInfo(mapping.source()).orElseThrow().mapped(), "the router's views are closed");
        assertFalse(b.handleInfo(mapping.target()).orElseThrow().mapped(), "the router's views are closed");
        MemorySegment r = b.mapMemory(mapping.target(), MemoryAccess.READ_ONLY);
        for (long i = 0; i < 1024; i++) {
            assertEquals((byte) i, r.get(ValueLayout.JAVA_BYTE, 1024 + i), "byte " + i + " of the first copy");
            assertEquals((byte) i, r.get(ValueLayout.JAVA_BYTE, 2048 + i), "byte " + i + " of the second copy");
        }

        // A view the caller holds stays open through the router's copy.
        mon.copy(MemoryTransfer.of(mapping.target(), mapping.source(), 1024).withDstOffset(3072));
        assertTrue(b.handleInfo(mapping.target()).orElseThrow().mapped(), "the caller's view stays open");
        assertTrue(a.handleInfo(mapping.source()).orElseThrow().mapped(), "one mapping, seen through both handles");
        assertEquals((byte) 7, r.get(ValueLayout.JAVA_BYTE, 3072 + 7), "the caller's view still reads");
        b.unmapMemory(mapping.target());
        assertFalse(a.handleInfo(mapping.source()).orElseThrow().mapped());
        b.deallocate(mapping.target());
        a.deallocate(mapping.source());
        assertEquals(0, a.memoryInfo().usedBytes());
    }

    @Test
    void observersSeeEachPressureCrossingOnceAndOnlyTheirDevice() throws Exception {
        MemoryMonitor mon = monitor("");
        List<String> all = new CopyOnWriteArrayList<>();
        List<String> onlyCpu2 = new CopyOnWriteArrayList<>();
        List<Map<Device, MemoryPressure>> global = new CopyOnWriteArrayList<>();
        MemoryObserver everything = new MemoryObserver() {
            @Override
            public void pressureChanged(Device d, MemoryPressure p, MemoryPressure c, MemoryInfo info) {
                all.add(d + ":" + p + ">" + c);
            }

            @Override
            public void deviceAdded(Device d, MemoryInfo info) {
                all.add("+" + d);
            }

            @Override
            public void deviceRemoved(Device d) {
                all.add("-" + d);
            }
        };
        MemoryObserver restricted = new MemoryObserver() {
            @Override
            public void pressureChanged(Device d, MemoryPressure p, MemoryPressure c, MemoryInfo info) {
                onlyCpu2.add(d + ":" + c);
            }
        };
        mon.setGlobalPressureCallback(global::add);
        // 100 blocks of 10240 bytes fill exactly 10 chunks of 102400 bytes: each block is 1 %.
        MemoryPoolConfig exact = MemoryPoolConfig.builder().initialSize(102_400).growthIncrement(102_400).build();
        PooledMemoryManager a = device(CPU1, 1_024_000, exact);
        mon.addManager(a, props(CPU1, 0));
        mon.addObserver(everything, Map.of());
        mon.addObserver(restricted, Map.of(DeviceMemoryManager.DEVICE_PROPERTY, "cpu:2"));
        List<MemoryHandle> hs = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            hs.add(a.allocate(10_240, CPU1));
        }
        for (int i = 99; i >= 60; i--) {
            a.deallocate(hs.get(i));
        }
        await(() -> all.size() >= 6, "six notifications");
        List<String> seen = List.copyOf(all); // one snapshot: the seventh may arrive while the assertion runs
        assertEquals(List.of("+cpu:1", "cpu:1:LOW>MEDIUM", "cpu:1:MEDIUM>HIGH", "cpu:1:HIGH>CRITICAL",
                "cpu:1:CRITICAL>HIGH", "cpu:1:HIGH>MEDIUM", "cpu:1:MEDIUM>LOW").subList(0, seen.size()), seen);
        await(() -> all.size() == 7, "the drop back to LOW");
        assertEquals(List.of(), onlyCpu2, "a cpu:2 observer hears nothing about cpu:1");
        await(() -> global.size() == 6, "six global callbacks");
        assertEquals(Map.of(CPU1, MemoryPressure.LOW), global.get(5));
        assertEquals(MemoryPressure.LOW, mon.globalMemoryPressure());

        mon.removeManager(a, props(CPU1, 0));
        await(() -> all.size() == 8, "the removal");
        assertEquals("-cpu:1", all.get(7));
    }

    @Test
    void samplesReachObserversPeriodically() throws Exception {
        MemoryMonitor mon = new MemoryMonitor(null, config("", 20), null);
        toClose.add(mon::deactivate);
        mon.addManager(device(CPU1, 8 * MiB), props(CPU1, 0));
        List<Map<Device, MemoryInfo>> samples = new CopyOnWriteArrayList<>();
        mon.addObserver(new MemoryObserver() {
            @Override
            public void sample(Map<Device, MemoryInfo> info) {
                samples.add(info);
            }
        }, Map.of());
        await(() -> samples.size() >= 2, "two samples");
        assertEquals(8 * MiB, samples.get(0).get(CPU1).totalBytes());
    }

    /**
     * A sample reads the devices, then each one's figures, then hands them to the observers: a device
     * removed meanwhile reached them in a sample after they heard it removed, its figures left
     * behind in whatever the observer shows. An observer now gets, in each sample, the devices it has
     * heard added and not removed. Forced: the sampler is held inside the device's memoryInfo while
     * the device is removed.
     */
    @Test
    void noObserverGetsASampleOfADeviceAfterHearingItRemoved() throws Exception {
        MemoryMonitor mon = new MemoryMonitor(null, config("", 20), null);
        toClose.add(mon::deactivate);
        CountDownLatch inside = new CountDownLatch(1);
        CountDownLatch go = new CountDownLatch(1);
        AtomicBoolean armed = new AtomicBoolean();
        StubManager m = new StubManager(CPU1, StubManager.poolSpace(1), false, 100, 10) {
            @Override
            public MemoryInfo memoryInfo(Device d) {
                MemoryInfo read = info;
                if (Thread.currentThread().getName().startsWith("ferrum-monitor-sampler") && armed.compareAndSet(true, false)) {
                    inside.countDown();
                    try {
                        assertTrue(go.await(30, TimeUnit.SECONDS));
                    } catch (InterruptedException e) {
                        throw new AssertionError(e);
                    }
                }
                return read;
            }
        };
        Map<String, Object> props = props(CPU1, 0);
        mon.addManager(m, props);
        List<String> heard = new CopyOnWriteArrayList<>();
        mon.addObserver(new MemoryObserver() {
            @Override
            public void deviceAdded(Device device, MemoryInfo info) {
                heard.add("+" + device);
            }

            @Override
            public void deviceRemoved(Device device) {
                heard.add("-" + device);
            }

            @Override
            public void sample(Map<Device, MemoryInfo> info) {
                heard.add("sample" + new java.util.TreeSet<>(info.keySet()));
            }
        }, Map.of());
        await(() -> heard.contains("sample[cpu:1]"), "a sample of cpu:1");
        armed.set(true);
        try {
            assertTrue(inside.await(30, TimeUnit.SECONDS), "the sampler read cpu:1");
            mon.removeManager(m, props);
        } finally {
            go.countDown();
        }
        await(() -> heard.indexOf("-cpu:1") >= 0 && heard.size() > heard.indexOf("-cpu:1") + 1, "a sample after the removal");
        List<String> after = heard.subList(heard.indexOf("-cpu:1"), heard.size());
        assertTrue(after.stream().noneMatch(h -> h.contains("cpu:1") && h.startsWith("sample")), heard.toString());
    }

    /**
     * An observer whose lane was full when a device left lost its departure: it kept the device for
     * good (and would never hear of it again). Once its lane has caught up after drops, an observer
     * now hears the arrivals and departures it missed. Forced: the observer is held in its first call
     * while the device's manager tells more changes than the lane holds, then the device goes.
     */
    @Test
    void anObserverWhoseLaneDroppedADepartureHearsItOnceItCatchesUp() throws Exception {
        MemoryMonitor mon = monitor("");
        StubManager m = new StubManager(CPU1, StubManager.poolSpace(1), true, 100, 10);
        Map<String, Object> props = props(CPU1, 0);
        mon.addManager(m, props);
        CountDownLatch inside = new CountDownLatch(1);
        CountDownLatch go = new CountDownLatch(1);
        List<String> heard = new CopyOnWriteArrayList<>();
        mon.addObserver(new MemoryObserver() {
            @Override
            public void deviceAdded(Device device, MemoryInfo info) {
                heard.add("+" + device);
            }

            @Override
            public void deviceRemoved(Device device) {
                heard.add("-" + device);
            }

            @Override
            public void pressureChanged(Device device, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
                if (inside.getCount() > 0) {
                    inside.countDown();
                    try {
                        assertTrue(go.await(30, TimeUnit.SECONDS));
                    } catch (InterruptedException e) {
                        throw new AssertionError(e);
                    }
                }
            }
        }, Map.of());
        await(() -> heard.contains("+cpu:1"), "the observer heard cpu:1 added");
        try {
            MemoryPressure level = MemoryPressure.LOW;
            for (int i = 0; i <= MemoryMonitor.LANE_CAPACITY + 1; i++) {
                MemoryPressure next = level == MemoryPressure.LOW ? MemoryPressure.HIGH : MemoryPressure.LOW;
                m.observer.pressureChanged(CPU1, level, next, null);
                level = next;
                if (i == 0) {
                    assertTrue(inside.await(30, TimeUnit.SECONDS), "the observer was held");
                }
            }
            mon.removeManager(m, props); // its departure finds the lane full
        } finally {
            go.countDown();
        }
        await(() -> heard.contains("-cpu:1"), "the observer heard cpu:1 removed");
        assertEquals(List.of("+cpu:1", "-cpu:1"), heard);
    }

    @Test
    void globalGcDefragmentsEveryDeviceAndReportsAFailingOneApart() throws Exception {
        MemoryMonitor mon = monitor("");
        PooledMemoryManager a = device(CPU1, 64 * MiB);
        PooledMemoryManager b = device(CPU2, 64 * MiB);
        mon.addManager(a, props(CPU1, 0));
        mon.addManager(b, props(CPU2, 0));
        List<MemoryHandle> hs = new ArrayList<>();
        for (int i = 0; i < 32; i++) {
            hs.add(a.allocate(64 * 1024, CPU1));
        }
        for (int i = 0; i < 32; i += 2) {
            a.deallocate(hs.get(i));
        }
        b.close(); // still registered, but failing
        Map<Device, DefragmentationStats> result = mon.globalGc().toCompletableFuture().get(30, TimeUnit.SECONDS);
        assertEquals(List.of(CPU1), List.copyOf(result.keySet()));
        assertTrue(result.get(CPU1).blocksMoved() > 0);
        assertTrue(result.get(CPU1).fragmentationAfter() < result.get(CPU1).fragmentationBefore());
    }

    /**
     * Another manager takes over a device (a higher service ranking) at another pressure level: the
     * monitor's level of the device becomes the newcomer's, and observers must hear that change, or
     * the newcomer's next change reaches them from a level they were never told (here "HIGH>LOW"
     * after nothing but LOW), and the global callback never hears the device at HIGH.
     */
    @Test
    void observersHearTheLevelChangeWhenAnotherManagerTakesOverADevice() throws Exception {
        MemoryMonitor mon = monitor("best-fit");
        List<String> heard = new CopyOnWriteArrayList<>();
        mon.addObserver(new MemoryObserver() {
            @Override
            public void pressureChanged(Device d, MemoryPressure p, MemoryPressure c, MemoryInfo info) {
                heard.add(d + " " + p + ">" + c);
            }
        }, Map.of());
        PooledMemoryManager first = device(CPU1, 8 * MiB);
        PooledMemoryManager next = device(CPU1, 8 * MiB);
        MemoryHandle h = next.allocate(7 * MiB, CPU1); // 87.5 %: HIGH before it serves
        mon.addManager(first, props(CPU1, 0));
        mon.addManager(next, props(CPU1, 10)); // takes over cpu:1
        assertSame(next, mon.manager(CPU1).orElseThrow());
        next.deallocate(h); // its own change, told by it
        await(() -> heard.contains("cpu:1 HIGH>LOW"), "the newcomer's change");
        assertEquals(List.of("cpu:1 LOW>HIGH", "cpu:1 HIGH>LOW"), heard, "each change from the level told before it");
    }
}
