package io.ferrum.memory.benchmarks;

import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.AllocationStrategy;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryRouter;
import io.ferrum.memory.monitor.MonitorBuilder;
import io.ferrum.memory.pool.PooledMemoryManager;
import io.ferrum.memory.strategy.bestfit.BestFitStrategy;

/**
 * The parts of a routed allocation, to read the router's overhead against: the best-fit choice
 * among one device's figures, the lock-free figures the router refreshes about once in 64 calls,
 * and one 4 KiB allocate + free direct, routed with best-fit, and routed with a strategy that
 * takes the first device it is offered (the router's own cost without a strategy's).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow", "-Xms2g", "-Xmx2g", "-XX:+AlwaysPreTouch"})
public class RouterPartsBenchmark {
    AdvancedMemoryManager manager;
    BestFitStrategy bestFit;
    List<Device> devices;
    Map<Device, MemoryInfo> infos;
    AllocationRequirements requirements;
    AdvancedMemoryManager routedManager;
    MonitorBuilder.Standalone routing;
    MemoryRouter router;
    AdvancedMemoryManager firstManager;
    MonitorBuilder.Standalone firstRouting;
    MemoryRouter firstRouter;

    /** Takes the first device offered: no figures read. */
    static final class FirstDevice implements AllocationStrategy {
        @Override
        public Optional<Device> selectDevice(long size, AllocationRequirements req, List<Device> available,
                                             Map<Device, MemoryInfo> memoryInfo) {
            return available.isEmpty() ? Optional.empty() : Optional.of(available.get(0));
        }

        @Override
        public String name() {
            return "first";
        }
    }

    @Setup
    public void setUp() {
        manager = Contenders.ferrum(true);
        bestFit = new BestFitStrategy();
        devices = List.copyOf(List.of(Contenders.CPU));
        infos = Map.copyOf(Map.of(Contenders.CPU, ((PooledMemoryManager) manager).quickInfo()));
        requirements = AllocationRequirements.defaults();
        routedManager = Contenders.ferrum(true);
        routing = Contenders.router(routedManager);
        router = routing.router();
        firstManager = Contenders.ferrum(true);
        firstRouting = Contenders.router(firstManager, new FirstDevice());
        firstRouter = firstRouting.router();
    }

    @TearDown
    public void tearDown() {
        routing.close();
        firstRouting.close();
        manager.close();
        routedManager.close();
        firstManager.close();
    }

    @Benchmark
    public long direct4k() {
        MemoryHandle h = manager.allocate(4096, Contenders.CPU);
        manager.deallocate(h);
        return h.id();
    }

    @Benchmark
    public long routedBestFit4k() {
        MemoryHandle h = router.allocate(4096, requirements);
        router.deallocate(h);
        return h.id();
    }

    @Benchmark
    public long routedFirstDevice4k() {
        MemoryHandle h = firstRouter.allocate(4096, requirements);
        firstRouter.deallocate(h);
        return h.id();
    }

    @Benchmark
    public Optional<Device> bestFitChoice() {
        return bestFit.selectDevice(4096, requirements, devices, infos);
    }

    @Benchmark
    public MemoryInfo quickInfo() {
        return ((PooledMemoryManager) manager).quickInfo();
    }
}
