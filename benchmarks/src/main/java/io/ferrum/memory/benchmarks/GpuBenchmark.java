package io.ferrum.memory.benchmarks;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;

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

import jcuda.Pointer;
import jcuda.driver.CUcontext;
import jcuda.driver.CUdevice;
import jcuda.driver.CUdeviceptr;
import jcuda.driver.JCudaDriver;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.cuda.CudaMemoryManagerFactory;

/**
 * Issue 16's GPU benchmark, run by {@code cuda-bundle/gpu-check.sh} on a machine with a GPU (never
 * run yet: no GPU has been lent). Two parts, each contender doing the same work on the same buffers:
 * <ul>
 * <li><b>Allocation</b> ({@link Alloc}): a {@code cuda:0} manager's allocate + free against {@code
 * cuMemAlloc} + {@code cuMemFree}, at 256 B, 64 KiB, 2 MiB and 64 MiB (target: the pool at least 100x
 * faster up to 2 MiB).
 * <li><b>Copies</b> ({@link Copy}): host to device and device to host of 64 KiB to 1 GiB, from and
 * into page-locked memory (a PINNED block of the manager, {@code cuMemHostAlloc} memory), pageable
 * native memory (an arena's) and a heap array: {@code write}/{@code read} of the manager against
 * JCuda's {@code cuMemcpyHtoD}/{@code cuMemcpyDtoH} between the same host buffer and a raw {@code
 * cuMemAlloc} buffer (targets: pinned at least 0.95x raw; heap to device at 64 MiB at least 0.8x the
 * pinned figure). Ferrum copies from and into its PINNED block through a {@code withMapped} view,
 * the view a DMA goes straight from (a shared {@code mapMemory} view takes the staging ring, see
 * {@code PinnedRanges}); JCuda uses the same bytes through the block's {@code mapMemory} view.
 * </ul>
 * Ns per operation; bandwidth is size / time.
 */
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Warmup(iterations = 1, time = 1)
@Measurement(iterations = 3, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow", "-Xmx6g"})
public class GpuBenchmark {
    static final Device GPU = Device.cuda(0);

    /** The driver, the device's primary context current on the calling thread, and a manager of cuda:0. */
    public abstract static class Gpu {
        CUcontext context;
        CudaMemoryManagerFactory factory;
        AdvancedMemoryManager ferrum;

        void open(long growth) {
            JCudaDriver.setExceptionsEnabled(true);
            JCudaDriver.cuInit(0);
            CUdevice d = new CUdevice();
            JCudaDriver.cuDeviceGet(d, 0);
            context = new CUcontext();
            JCudaDriver.cuDevicePrimaryCtxRetain(context, d);
            JCudaDriver.cuCtxSetCurrent(context);
            factory = new CudaMemoryManagerFactory(null);
            MemoryPoolConfig pool = MemoryPoolConfig.builder().initialSize(64L << 20).growthIncrement(growth).build();
            ferrum = factory.createAdvancedMemoryManager(GPU, MemoryManagerConfig.defaults().withTracking(false, false)
                    .withPoolConfig(MemoryType.GENERAL, pool).withPoolConfig(MemoryType.PINNED, pool));
        }

        void close() {
            ferrum.close();
            CUdevice d = new CUdevice();
            JCudaDriver.cuDeviceGet(d, 0);
            JCudaDriver.cuDevicePrimaryCtxRelease(d);
        }
    }

    @State(Scope.Thread)
    public static class Alloc extends Gpu {
        @Param({"256", "65536", "2097152", "67108864"})
        public long size;

        @Setup(Level.Trial)
        public void setup() {
            open(256L << 20);
        }

        @TearDown(Level.Trial)
        public void tearDown() {
            close();
        }
    }

    @State(Scope.Thread)
    public static class Copy extends Gpu {
        @Param({"65536", "1048576", "67108864", "1073741824"})
        public int size;

        /** Where the host bytes are: pinned (a PINNED block), pageable (native, an arena's) or heap. */
        @Param({"pinned", "pageable", "heap"})
        public String host;

        Arena arena;
        MemoryHandle pinnedBlock;
        MemoryHandle device;
        CUdeviceptr raw;
        /** The host buffer as Ferrum takes it, and the same bytes as JCuda takes them. */
        MemorySegment segment;
        Pointer pointer;
        /** For a PINNED block: write and read through a view of it, made by withMapped around them. */
        Function<MemorySegment, Object> toDevice;
        Function<MemorySegment, Object> fromDevice;

        @Setup(Level.Trial)
        public void setup() {
            open(2L << 30);
            arena = Arena.ofShared();
            device = ferrum.allocate(size, MemoryType.GENERAL, GPU);
            raw = new CUdeviceptr();
            JCudaDriver.cuMemAlloc(raw, size);
            switch (host) {
                case "pinned" -> {
                    pinnedBlock = ferrum.allocate(size, MemoryType.PINNED, GPU);
                    segment = ferrum.mapMemory(pinnedBlock, MemoryAccess.READ_WRITE);
                    pointer = Pointer.to(segment.asByteBuffer());
                    toDevice = view -> {
                        ferrum.write(device, 0, view);
                        return null;
                    };
                    fromDevice = view -> {
                        ferrum.read(device, 0, view);
                        return null;
                    };
                }
                case "pageable" -> {
                    segment = arena.allocate(size, 4096);
                    pointer = Pointer.to(segment.asByteBuffer());
                }
                case "heap" -> {
                    byte[] array = new byte[size];
                    segment = MemorySegment.ofArray(array);
                    pointer = Pointer.to(array);
                }
                default -> throw new IllegalArgumentException("host: pinned, pageable or heap, not " + host);
            }
            segment.fill((byte) 7);
        }

        @TearDown(Level.Trial)
        public void tearDown() {
            JCudaDriver.cuMemFree(raw);
            if (pinnedBlock != null) {
                ferrum.unmapMemory(pinnedBlock);
            }
            close();
            arena.close();
        }
    }

    @Benchmark
    public MemoryHandle ferrumAllocFree(Alloc s) {
        MemoryHandle h = s.ferrum.allocate(s.size, MemoryType.GENERAL, GPU);
        s.ferrum.deallocate(h);
        return h;
    }

    @Benchmark
    public CUdeviceptr cuMemAllocFree(Alloc s) {
        CUdeviceptr p = new CUdeviceptr();
        JCudaDriver.cuMemAlloc(p, s.size);
        JCudaDriver.cuMemFree(p);
        return p;
    }

    @Benchmark
    public void ferrumHostToDevice(Copy s) {
        if (s.pinnedBlock != null) {
            s.ferrum.withMapped(s.pinnedBlock, MemoryAccess.READ_ONLY, s.toDevice);
        } else {
            s.ferrum.write(s.device, 0, s.segment);
        }
    }

    @Benchmark
    public void rawHostToDevice(Copy s) {
        JCudaDriver.cuMemcpyHtoD(s.raw, s.pointer, s.size);
    }

    @Benchmark
    public void ferrumDeviceToHost(Copy s) {
        if (s.pinnedBlock != null) {
            s.ferrum.withMapped(s.pinnedBlock, MemoryAccess.READ_WRITE, s.fromDevice);
        } else {
            s.ferrum.read(s.device, 0, s.segment);
        }
    }

    @Benchmark
    public void rawDeviceToHost(Copy s) {
        JCudaDriver.cuMemcpyDtoH(s.pointer, s.raw, s.size);
    }
}
