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
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;

/**
 * Workload 5: copy bandwidth, handle to handle, against a raw {@code MemorySegment.copy} between two
 * native segments, Netty {@code setBytes} and Arrow {@code setBytes}. Ns per copy; GB/s = size / ns.
 * Also the cost of one {@code mapMemory}+{@code unmapMemory} pair. Every buffer is written whole
 * before timing, so every contender copies between resident pages.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow",
    "--add-opens=java.base/java.nio=ALL-UNNAMED", "-Dio.netty.tryReflectionSetAccessible=true",
    "-Darrow.allocation.manager.type=Unsafe", "-Dio.netty.leakDetection.level=disabled", "-Xms2g", "-Xmx2g", "-XX:+AlwaysPreTouch"})
public class CopyBenchmark {

    @Param({"4096", "262144", "1048576", "16777216", "268435456"})
    public int size;

    AdvancedMemoryManager ferrum;
    MemoryHandle src;
    MemoryHandle dst;
    Arena arena;
    MemorySegment rawSrc;
    MemorySegment rawDst;
    PooledByteBufAllocator netty;
    ByteBuf nettySrc;
    ByteBuf nettyDst;
    BufferAllocator arrow;
    ArrowBuf arrowSrc;
    ArrowBuf arrowDst;

    @Setup(Level.Trial)
    public void setup() {
        ferrum = Contenders.ferrum(true);
        src = ferrum.allocate(size, Contenders.CPU);
        dst = ferrum.allocate(size, Contenders.CPU);
        // Every buffer, source and destination, is written before timing: a source never written
        // reads the kernel's zero page and copies about twice as fast (PERFORMANCE item 18).
        ferrum.withMapped(src, MemoryAccess.WRITE_ONLY, v -> v.fill((byte) 1));
        ferrum.withMapped(dst, MemoryAccess.WRITE_ONLY, v -> v.fill((byte) 2));
        arena = Arena.ofShared();
        rawSrc = arena.allocate(size, 256);
        rawDst = arena.allocate(size, 256);
        rawSrc.fill((byte) 1);
        netty = PooledByteBufAllocator.DEFAULT;
        nettySrc = netty.directBuffer(size, size).writerIndex(size);
        nettyDst = netty.directBuffer(size, size);
        nettySrc.setBytes(0, rawSrc.asByteBuffer());
        nettyDst.setZero(0, size);
        arrow = new RootAllocator(Long.MAX_VALUE);
        arrowSrc = arrow.buffer(size);
        arrowDst = arrow.buffer(size);
        arrowSrc.setOne(0, size);
        arrowDst.setZero(0, size);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        ferrum.close();
        arena.close();
        nettySrc.release();
        nettyDst.release();
        arrowSrc.close();
        arrowDst.close();
        arrow.close();
    }

    @Benchmark
    public void ferrumCopy() {
        ferrum.copy(src, dst, size, 0, 0);
    }

    @Benchmark
    public void rawSegmentCopy() {
        MemorySegment.copy(rawSrc, 0, rawDst, 0, size);
    }

    @Benchmark
    public void nettySetBytes() {
        nettyDst.setBytes(0, nettySrc, 0, size);
    }

    @Benchmark
    public void arrowSetBytes() {
        arrowDst.setBytes(0, arrowSrc, 0, size);
    }

    @Benchmark
    public long ferrumMapUnmap() {
        long a = ferrum.mapMemory(src, MemoryAccess.READ_ONLY).address();
        ferrum.unmapMemory(src);
        return a;
    }
}
