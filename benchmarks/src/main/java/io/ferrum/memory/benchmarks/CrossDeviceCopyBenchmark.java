package io.ferrum.memory.benchmarks;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Warmup;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryRouter;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.cpu.CpuMemoryManagerFactory;
import io.ferrum.memory.monitor.MonitorBuilder;

/**
 * A copy between blocks of two devices through the router ({@code cpu:0} to {@code cpu:1}, two
 * managers of the cpu bundle's own factory), against {@code MemorySegment.copy} between two native
 * segments of an arena (the floor): what the router adds to a cross-device copy (PERFORMANCE item
 * 20). Neither block is mapped by the benchmark, so the router's path is the one any caller gets.
 * Ns per copy.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 3, time = 1)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow", "-Xmx2g"})
public class CrossDeviceCopyBenchmark {
    @Param({"4096", "1048576", "67108864"})
    public long size;

    AdvancedMemoryManager a;
    AdvancedMemoryManager b;
    MonitorBuilder.Standalone routing;
    MemoryRouter router;
    MemoryHandle src;
    MemoryHandle dst;
    MemorySegment srcView;
    MemorySegment dstView;
    Arena arena;

    @Setup(Level.Trial)
    public void setup() {
        MemoryPoolConfig pool = MemoryPoolConfig.builder().initialSize(256L << 20).growthIncrement(256L << 20).build();
        MemoryManagerConfig cfg = MemoryManagerConfig.defaults().withPoolConfig(MemoryType.GENERAL, pool);
        CpuMemoryManagerFactory factory = new CpuMemoryManagerFactory(null);
        a = factory.createAdvancedMemoryManager(Device.cpu(0), cfg);
        b = factory.createAdvancedMemoryManager(Device.cpu(1), cfg);
        routing = new MonitorBuilder().manager(a).manager(b).build();
        router = routing.router();
        src = a.allocate(size, Device.cpu(0));
        dst = b.allocate(size, Device.cpu(1));
        arena = Arena.ofShared();
        srcView = arena.allocate(size, 64).fill((byte) 3);
        dstView = arena.allocate(size, 64).fill((byte) 4);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        routing.close();
        a.close();
        b.close();
        arena.close();
    }

    @Benchmark
    public void routerCopyAcrossDevices() {
        router.copy(MemoryTransfer.of(src, dst, size));
    }

    @Benchmark
    public void rawSegmentCopy() {
        MemorySegment.copy(srcView, 0, dstView, 0, size);
    }
}
