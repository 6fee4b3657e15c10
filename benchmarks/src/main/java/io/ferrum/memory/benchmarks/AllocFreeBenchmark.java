package io.ferrum.memory.benchmarks;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;

import org.apache.arrow.memory.ArrowBuf;
import org.apache.arrow.memory.BufferAllocator;
import org.apache.arrow.memory.RootAllocator;
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
import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryRouter;
import io.ferrum.memory.monitor.MonitorBuilder;
import io.netty.buffer.AdaptiveByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;

/**
 * Workloads 1 and 6: allocate then free at once (churn), fixed sizes and mixed sizes
 * (log-uniform 64 B - 1 MiB), for every contender; Ferrum with statistics on and off. Run with
 * {@code -t 1} and {@code -t 2}. Ns per allocate+free pair.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow",
    "--add-opens=java.base/java.nio=ALL-UNNAMED", "-Dio.netty.tryReflectionSetAccessible=true",
    "-Darrow.allocation.manager.type=Unsafe", "-Dio.netty.leakDetection.level=disabled", "-Xms2g", "-Xmx2g", "-XX:+AlwaysPreTouch"})
public class AllocFreeBenchmark {
    private static final AllocationRequirements ANY = AllocationRequirements.defaults();

    @Param({"64", "4096", "65536", "2097152", "mixed"})
    public String size;

    long[] sizes;
    AdvancedMemoryManager ferrum;
    AdvancedMemoryManager ferrumNoStats;
    AdvancedMemoryManager routed;
    MonitorBuilder.Standalone routing;
    MemoryRouter router;
    PooledByteBufAllocator nettyPooled;
    AdaptiveByteBufAllocator nettyAdaptive;
    BufferAllocator arrow;

    /** Each thread walks the size sequence on its own. */
    @State(Scope.Thread)
    public static class Cursor {
        int i;

        long next(long[] sizes) {
            return sizes[(i++) & (sizes.length - 1)];
        }
    }

    @Setup(Level.Trial)
    public void setup() {
        sizes = Contenders.sizes(size);
        ferrum = Contenders.ferrum(true);
        ferrumNoStats = Contenders.ferrum(false);
        routed = Contenders.ferrum(true);
        routing = Contenders.router(routed);
        router = routing.router();
        nettyPooled = new PooledByteBufAllocator(true, 0, PooledByteBufAllocator.defaultNumDirectArena(),
                PooledByteBufAllocator.defaultPageSize(), PooledByteBufAllocator.defaultMaxOrder(),
                PooledByteBufAllocator.defaultSmallCacheSize(), PooledByteBufAllocator.defaultNormalCacheSize(), true);
        nettyAdaptive = new AdaptiveByteBufAllocator(true, true);
        arrow = new RootAllocator(Long.MAX_VALUE);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        routing.close();
        ferrum.close();
        ferrumNoStats.close();
        routed.close();
        arrow.close();
    }

    @Benchmark
    public long ferrumDirect(Cursor c) {
        MemoryHandle h = ferrum.allocate(c.next(sizes), Contenders.CPU);
        ferrum.deallocate(h);
        return h.id();
    }

    @Benchmark
    public long ferrumDirectNoStats(Cursor c) {
        MemoryHandle h = ferrumNoStats.allocate(c.next(sizes), Contenders.CPU);
        ferrumNoStats.deallocate(h);
        return h.id();
    }

    @Benchmark
    public long ferrumRouter(Cursor c) {
        MemoryHandle h = router.allocate(c.next(sizes), ANY);
        router.deallocate(h);
        return h.id();
    }

    @Benchmark
    public int nettyPooled(Cursor c) {
        ByteBuf b = nettyPooled.directBuffer((int) c.next(sizes));
        int cap = b.capacity();
        b.release();
        return cap;
    }

    @Benchmark
    public int nettyAdaptive(Cursor c) {
        ByteBuf b = nettyAdaptive.directBuffer((int) c.next(sizes));
        int cap = b.capacity();
        b.release();
        return cap;
    }

    @Benchmark
    public long arrowUnsafe(Cursor c) {
        ArrowBuf b = arrow.buffer(c.next(sizes));
        long cap = b.capacity();
        b.close();
        return cap;
    }

    @Benchmark
    public long arenaShared(Cursor c) {
        try (Arena a = Arena.ofShared()) {
            return a.allocate(c.next(sizes)).address();
        }
    }

    @Benchmark
    public long arenaConfined(Cursor c) {
        try (Arena a = Arena.ofConfined()) {
            return a.allocate(c.next(sizes)).address();
        }
    }

    @Benchmark
    public long malloc(Cursor c) {
        MemorySegment p = Contenders.malloc(c.next(sizes));
        Contenders.free(p);
        return p.address();
    }
}
