package io.ferrum.memory.benchmarks;

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
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.netty.buffer.ByteBuf;
import io.netty.util.internal.PlatformDependent;

/**
 * The 256 MiB copy investigation (PERFORMANCE item 18): does the source's first touch decide the
 * copy's speed? {@code source=untouched} leaves every source as its allocator returned it (never
 * written: on Linux its pages are not yet backed, and reading them maps the kernel's shared zero
 * page); {@code source=written} writes every source byte first. Destinations are always written
 * first. Rows: {@code MemorySegment.copy} between malloc'd segments, the same bytes through Netty's
 * chunked {@code PlatformDependent.copyMemory}, Netty and Arrow {@code setBytes} between their own
 * buffers, and Ferrum's handle-to-handle {@code copy}. Ms per copy.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.MILLISECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 4, time = 2)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow",
    "--add-opens=java.base/java.nio=ALL-UNNAMED", "-Dio.netty.tryReflectionSetAccessible=true",
    "-Darrow.allocation.manager.type=Unsafe", "-Dio.netty.leakDetection.level=disabled", "-Xms2g", "-Xmx2g", "-XX:+AlwaysPreTouch"})
public class LargeCopyBenchmark {

    @Param({"268435456"})
    public int size;

    @Param({"untouched", "written"})
    public String source;

    MemorySegment rawSrc;
    MemorySegment rawDst;
    ByteBuf nettySrc;
    ByteBuf nettyDst;
    BufferAllocator arrow;
    ArrowBuf arrowSrc;
    ArrowBuf arrowDst;
    AdvancedMemoryManager ferrum;
    MemoryHandle ferrumSrc;
    MemoryHandle ferrumDst;

    @Setup(Level.Trial)
    public void setup() {
        boolean write = "written".equals(source);
        rawSrc = Contenders.malloc(size).reinterpret(size);
        rawDst = Contenders.malloc(size).reinterpret(size).fill((byte) 2);
        nettySrc = Contenders.nettyPooled().directBuffer(size, size).writerIndex(size);
        nettyDst = Contenders.nettyPooled().directBuffer(size, size).setZero(0, size);
        arrow = new RootAllocator(Long.MAX_VALUE);
        arrowSrc = arrow.buffer(size);
        arrowDst = arrow.buffer(size);
        arrowDst.setZero(0, size);
        ferrum = Contenders.ferrum(true);
        ferrumSrc = ferrum.allocate(size, Contenders.CPU);
        ferrumDst = ferrum.allocate(size, Contenders.CPU);
        ferrum.withMapped(ferrumDst, MemoryAccess.WRITE_ONLY, v -> v.fill((byte) 2));
        if (write) {
            rawSrc.fill((byte) 1);
            nettySrc.setZero(0, size);
            arrowSrc.setOne(0, size);
            ferrum.withMapped(ferrumSrc, MemoryAccess.WRITE_ONLY, v -> v.fill((byte) 1));
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        Contenders.free(rawSrc);
        Contenders.free(rawDst);
        nettySrc.release();
        nettyDst.release();
        arrowSrc.close();
        arrowDst.close();
        arrow.close();
        ferrum.close();
    }

    @Benchmark
    public void segmentCopy() {
        MemorySegment.copy(rawSrc, 0, rawDst, 0, size);
    }

    /** The same malloc'd memory as {@link #segmentCopy}, copied the way Netty copies (Unsafe, in 1 MiB steps). */
    @Benchmark
    public void nettyCopyMemory() {
        PlatformDependent.copyMemory(rawSrc.address(), rawDst.address(), size);
    }

    @Benchmark
    public ByteBuf nettySetBytes() {
        return nettyDst.setBytes(0, nettySrc, 0, size);
    }

    @Benchmark
    public void arrowSetBytes() {
        arrowDst.setBytes(0, arrowSrc, 0, size);
    }

    @Benchmark
    public void ferrumCopy() {
        ferrum.copy(ferrumSrc, ferrumDst, size, 0, 0);
    }
}
