package io.ferrum.memory.benchmarks;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.Arrays;
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

/**
 * The 1 MiB copy from a heap array (PERFORMANCE item 23): does the destination's address, relative
 * to the array's bytes, decide the copy's speed? A {@code byte[]}'s bytes start 16 bytes past a
 * 64-byte boundary or so (the object header); the destination is a page-aligned native segment
 * shifted by {@code shift} bytes. {@code MemorySegment.copy} from the array in both directions, ns
 * per copy; no pool involved.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 2, time = 1)
@Measurement(iterations = 3, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "-Xms2g", "-Xmx2g", "-XX:+AlwaysPreTouch"})
public class HeapCopyAlignmentBenchmark {

    @Param({"1048576"})
    public int size;

    /** Bytes the destination starts past a page boundary. */
    @Param({"0", "16", "32", "48"})
    public int shift;

    Arena arena;
    byte[] heap;
    MemorySegment heapSeg;
    MemorySegment dst;

    @Setup(Level.Trial)
    public void setup() {
        arena = Arena.ofShared();
        heap = new byte[size];
        Arrays.fill(heap, (byte) 1);
        heapSeg = MemorySegment.ofArray(heap);
        dst = arena.allocate(size + 4096L, 4096).asSlice(shift, size);
        dst.fill((byte) 2);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        arena.close();
    }

    @Benchmark
    public void heapToNative() {
        MemorySegment.copy(heapSeg, 0, dst, 0, size);
    }

    @Benchmark
    public void nativeToHeap() {
        MemorySegment.copy(dst, 0, heapSeg, 0, size);
    }
}
