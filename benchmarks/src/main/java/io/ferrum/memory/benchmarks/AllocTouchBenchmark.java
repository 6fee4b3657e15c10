package io.ferrum.memory.benchmarks;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

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
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryRouter;
import io.ferrum.memory.monitor.MonitorBuilder;
import io.netty.buffer.AdaptiveByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;

/**
 * Workloads 1 and 6 as a user runs them (issue 15): allocate, touch one byte per 4 KiB page (a
 * one-byte write at offsets 0, 4096, 8192, ... below the size), free. Fixed sizes and mixed sizes
 * (log-uniform 64 B - 1 MiB, {@link Contenders#sizes}); run with {@code -t 1} and {@code -t 2}. Ns
 * per allocate + touch + free. The headline rows are {@code ferrumDirect} (touch through {@code
 * withMapped}), {@code ferrumRouted}, {@code nettyAdaptive}, {@code nettyPooled}, {@code arrowUnsafe}
 * and {@code malloc}; {@code ferrumDirectNoStats} is workload 6 (statistics off); {@code
 * ferrumDirectWrite} and {@code ferrumDirectMapUnmap} are extra rows touching through {@code write}
 * of one byte per page and through {@code mapMemory}/{@code unmapMemory}. The allocate + free rows
 * without the touch are {@link AllocFreeBenchmark}'s.
 *
 * <p>{@code ferrumRouted} allocates and frees through the {@link MemoryRouter} and touches through
 * the owning manager's {@code withMapped} (the router has no {@code withMapped}: a user who maps
 * holds the manager).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 4, time = 2)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow",
    "--add-opens=java.base/java.nio=ALL-UNNAMED", "-Dio.netty.tryReflectionSetAccessible=true",
    "-Darrow.allocation.manager.type=Unsafe", "-Dio.netty.leakDetection.level=disabled", "-Xms2g", "-Xmx2g", "-XX:+AlwaysPreTouch"})
public class AllocTouchBenchmark {
    private static final AllocationRequirements ANY = AllocationRequirements.defaults();
    /** The touch's stride: one byte per page. */
    static final int PAGE = 4096;
    /** Every address, for touching memory known only by its address (malloc). */
    private static final MemorySegment ALL = MemorySegment.NULL.reinterpret(Long.MAX_VALUE);
    /** Touches one byte per page of a view; non-capturing, so no allocation per call. */
    static final Function<MemorySegment, Object> TOUCH = view -> {
        touch(view);
        return null;
    };

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

    /** Each thread walks the size sequence on its own, and keeps a one-byte source for {@code write}. */
    @State(Scope.Thread)
    public static class Cursor {
        int i;
        final MemorySegment one = Arena.ofAuto().allocate(1).fill((byte) 1);

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
        nettyPooled = Contenders.nettyPooled();
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

    /** Writes one byte per page of {@code view}. */
    static void touch(MemorySegment view) {
        long n = view.byteSize();
        for (long o = 0; o < n; o += PAGE) {
            view.set(ValueLayout.JAVA_BYTE, o, (byte) 1);
        }
    }

    /** Writes one byte per page of the {@code n} bytes at {@code address}. */
    static void touch(long address, long n) {
        for (long o = 0; o < n; o += PAGE) {
            ALL.set(ValueLayout.JAVA_BYTE, address + o, (byte) 1);
        }
    }

    static void touch(ByteBuf b, int n) {
        for (int o = 0; o < n; o += PAGE) {
            b.setByte(o, 1);
        }
    }

    static void touch(ArrowBuf b, long n) {
        for (long o = 0; o < n; o += PAGE) {
            b.setByte(o, 1);
        }
    }

    @Benchmark
    public long ferrumDirect(Cursor c) {
        MemoryHandle h = ferrum.allocate(c.next(sizes), Contenders.CPU);
        ferrum.withMapped(h, MemoryAccess.WRITE_ONLY, TOUCH);
        ferrum.deallocate(h);
        return h.id();
    }

    @Benchmark
    public long ferrumDirectNoStats(Cursor c) {
        MemoryHandle h = ferrumNoStats.allocate(c.next(sizes), Contenders.CPU);
        ferrumNoStats.withMapped(h, MemoryAccess.WRITE_ONLY, TOUCH);
        ferrumNoStats.deallocate(h);
        return h.id();
    }

    @Benchmark
    public long ferrumRouted(Cursor c) {
        MemoryHandle h = router.allocate(c.next(sizes), ANY);
        routed.withMapped(h, MemoryAccess.WRITE_ONLY, TOUCH);
        router.deallocate(h);
        return h.id();
    }

    /** Extra row: the touch as one {@code write} of one byte per page. */
    @Benchmark
    public long ferrumDirectWrite(Cursor c) {
        long n = c.next(sizes);
        MemoryHandle h = ferrum.allocate(n, Contenders.CPU);
        for (long o = 0; o < n; o += PAGE) {
            ferrum.write(h, o, c.one);
        }
        ferrum.deallocate(h);
        return h.id();
    }

    /** Extra row: the touch through a shared view, {@code mapMemory} then {@code unmapMemory}. */
    @Benchmark
    public long ferrumDirectMapUnmap(Cursor c) {
        MemoryHandle h = ferrum.allocate(c.next(sizes), Contenders.CPU);
        touch(ferrum.mapMemory(h, MemoryAccess.WRITE_ONLY));
        ferrum.unmapMemory(h);
        ferrum.deallocate(h);
        return h.id();
    }

    @Benchmark
    public int nettyPooled(Cursor c) {
        int n = (int) c.next(sizes);
        ByteBuf b = nettyPooled.directBuffer(n);
        touch(b, n);
        b.release();
        return n;
    }

    @Benchmark
    public int nettyAdaptive(Cursor c) {
        int n = (int) c.next(sizes);
        ByteBuf b = nettyAdaptive.directBuffer(n);
        touch(b, n);
        b.release();
        return n;
    }

    @Benchmark
    public long arrowUnsafe(Cursor c) {
        long n = c.next(sizes);
        ArrowBuf b = arrow.buffer(n);
        touch(b, n);
        b.close();
        return n;
    }

    @Benchmark
    public long malloc(Cursor c) {
        long n = c.next(sizes);
        MemorySegment p = Contenders.malloc(n);
        touch(p.address(), n);
        Contenders.free(p);
        return p.address();
    }
}
