package io.ferrum.memory.benchmarks;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
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
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;
import io.netty.buffer.Unpooled;

/**
 * Transfers (issue 15): bytes into and out of a block, from and to a heap array ({@code
 * MemorySegment.ofArray}) and native memory, against the same copies done raw and by the peers. Ns
 * per copy; GB/s = size / ns.
 *
 * <ul>
 * <li>{@code ferrumWrite*}/{@code ferrumRead*}: {@code write}/{@code read} of the whole block.</li>
 * <li>{@code raw*}: {@code MemorySegment.copy} between the same memory: the same source and the
 *     same block, reached through a view that {@code mapMemory} opened once in the setup. The
 *     difference to the Ferrum row is the data path's own cost (lookup, checks, scope, figures).</li>
 * <li>{@code netty*}: {@code setBytes}/{@code getBytes} between a pooled direct buffer and the
 *     heap array, or a buffer wrapping the same native source.</li>
 * <li>{@code arrowSetBytes*}: {@code ArrowBuf.setBytes} from the heap array, or from a direct
 *     {@code ByteBuffer} over the same native source.</li>
 * <li>{@code ferrumCopyHandles}/{@code rawCopyViews}: handle-to-handle {@code copy} between two
 *     blocks against {@code MemorySegment.copy} between their views.</li>
 * <li>{@code withMappedEmpty}: {@code withMapped} around an action that does nothing, against
 *     {@code arenaConfinedEmpty}, a confined arena opened and closed (the yardstick).</li>
 * </ul>
 * Every buffer is written whole in the setup, so every row copies between resident pages (see
 * PERFORMANCE item 18 on the 256 MiB copies and first touches).
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 4, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow",
    "--add-opens=java.base/java.nio=ALL-UNNAMED", "-Dio.netty.tryReflectionSetAccessible=true",
    "-Darrow.allocation.manager.type=Unsafe", "-Dio.netty.leakDetection.level=disabled", "-Xms2g", "-Xmx2g", "-XX:+AlwaysPreTouch"})
public class TransferBenchmark {
    /** An action that does nothing with its view; non-capturing, so no allocation per call. */
    private static final Function<MemorySegment, Object> EMPTY = view -> null;

    @Param({"64", "4096", "1048576", "268435456"})
    public int size;

    /** Access statistics on the Ferrum manager (on in the rows; off shows what they cost). */
    @Param({"true"})
    public boolean stats;

    /**
     * The Ferrum pool's chunk size (initial size and growth), MiB. The rows use 256; a run
     * with 4 (Netty's chunk size) shows what the destination's place costs a copy (PERFORMANCE item 28).
     */
    @Param({"256"})
    public int chunkMiB;

    AdvancedMemoryManager ferrum;
    MemoryHandle block;
    MemoryHandle block2;
    MemorySegment view;
    MemorySegment view2;
    byte[] heap;
    MemorySegment heapSeg;
    Arena arena;
    MemorySegment nativeSrc;
    ByteBuffer nativeBuffer;
    ByteBuf nettyNative;
    ByteBuf nettyDst;
    BufferAllocator arrow;
    ArrowBuf arrowDst;

    @Setup(Level.Trial)
    public void setup() {
        long chunk = (long) chunkMiB << 20;
        ferrum = Contenders.ferrum(MemoryPoolConfig.builder().initialSize(chunk).growthIncrement(chunk).stats(stats).build());
        block = ferrum.allocate(size, Contenders.CPU);
        block2 = ferrum.allocate(size, Contenders.CPU);
        view = ferrum.mapMemory(block, MemoryAccess.READ_WRITE);
        view2 = ferrum.mapMemory(block2, MemoryAccess.READ_WRITE);
        view.fill((byte) 2);
        view2.fill((byte) 2);
        heap = new byte[size];
        java.util.Arrays.fill(heap, (byte) 1);
        heapSeg = MemorySegment.ofArray(heap);
        arena = Arena.ofShared();
        nativeSrc = arena.allocate(size, 256).fill((byte) 1);
        nativeBuffer = nativeSrc.asByteBuffer();
        nettyNative = Unpooled.wrappedBuffer(nativeBuffer.duplicate());
        nettyDst = Contenders.nettyPooled().directBuffer(size, size);
        nettyDst.setZero(0, size);
        arrow = new RootAllocator(Long.MAX_VALUE);
        arrowDst = arrow.buffer(size);
        arrowDst.setZero(0, size);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        ferrum.close();
        nettyDst.release();
        arrowDst.close();
        arrow.close();
        arena.close();
    }

    @Benchmark
    public void ferrumWriteHeap() {
        ferrum.write(block, 0, heapSeg);
    }

    @Benchmark
    public void ferrumReadHeap() {
        ferrum.read(block, 0, heapSeg);
    }

    @Benchmark
    public void ferrumWriteNative() {
        ferrum.write(block, 0, nativeSrc);
    }

    @Benchmark
    public void ferrumReadNative() {
        ferrum.read(block, 0, nativeSrc);
    }

    @Benchmark
    public void rawWriteHeap() {
        MemorySegment.copy(heapSeg, 0, view, 0, size);
    }

    @Benchmark
    public void rawReadHeap() {
        MemorySegment.copy(view, 0, heapSeg, 0, size);
    }

    @Benchmark
    public void rawWriteNative() {
        MemorySegment.copy(nativeSrc, 0, view, 0, size);
    }

    @Benchmark
    public void rawReadNative() {
        MemorySegment.copy(view, 0, nativeSrc, 0, size);
    }

    @Benchmark
    public ByteBuf nettySetBytesHeap() {
        return nettyDst.setBytes(0, heap, 0, size);
    }

    @Benchmark
    public ByteBuf nettyGetBytesHeap() {
        return nettyDst.getBytes(0, heap, 0, size);
    }

    @Benchmark
    public ByteBuf nettySetBytesNative() {
        return nettyDst.setBytes(0, nettyNative, 0, size);
    }

    @Benchmark
    public ByteBuf nettyGetBytesNative() {
        return nettyDst.getBytes(0, nettyNative, 0, size);
    }

    @Benchmark
    public void arrowSetBytesHeap() {
        arrowDst.setBytes(0, heap, 0, size);
    }

    @Benchmark
    public void arrowSetBytesNative() {
        arrowDst.setBytes(0, nativeBuffer, 0, size);
    }

    @Benchmark
    public void ferrumCopyHandles() {
        ferrum.copy(block, block2, size, 0, 0);
    }

    @Benchmark
    public void rawCopyViews() {
        MemorySegment.copy(view, 0, view2, 0, size);
    }

    @Benchmark
    public Object withMappedEmpty() {
        return ferrum.withMapped(block, MemoryAccess.READ_WRITE, EMPTY);
    }

    @Benchmark
    public Arena arenaConfinedEmpty() {
        Arena a = Arena.ofConfined();
        a.close();
        return a;
    }
}
