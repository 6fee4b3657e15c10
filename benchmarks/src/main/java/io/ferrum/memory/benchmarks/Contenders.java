package io.ferrum.memory.benchmarks;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.Random;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.AllocationStrategy;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.cpu.CpuMemoryManagerFactory;
import io.ferrum.memory.monitor.MonitorBuilder;
import io.ferrum.memory.strategy.bestfit.BestFitStrategy;
import io.netty.buffer.PooledByteBufAllocator;

/** The contenders, built the way a user would build them, and the workloads' size sequences. */
final class Contenders {
    static final Device CPU = Device.cpu();
    private Contenders() {
    }

    /** @return a CPU manager from the cpu bundle's own factory: pools of 256 MiB chunks, statistics as given */
    static AdvancedMemoryManager ferrum(boolean stats) {
        return ferrum(MemoryPoolConfig.builder().initialSize(256L << 20).growthIncrement(256L << 20).stats(stats).build());
    }

    /** @return a CPU manager from the cpu bundle's own factory with that GENERAL pool */
    static AdvancedMemoryManager ferrum(MemoryPoolConfig pool) {
        boolean stats = pool.enableStats();
        MemoryManagerConfig cfg = MemoryManagerConfig.defaults().withTracking(stats, false)
                .withPoolConfig(MemoryType.GENERAL, pool);
        return new CpuMemoryManagerFactory(null).createAdvancedMemoryManager(CPU, cfg);
    }

    /** @return a monitor + router over {@code manager} with best-fit, as DS would wire it; close it when done */
    static MonitorBuilder.Standalone router(AdvancedMemoryManager manager) {
        return router(manager, new BestFitStrategy());
    }

    /** @return a monitor + router over {@code manager} with {@code strategy} as its only strategy */
    static MonitorBuilder.Standalone router(AdvancedMemoryManager manager, AllocationStrategy strategy) {
        return new MonitorBuilder().manager(manager).strategy(strategy).build();
    }

    /** @return a direct {@code PooledByteBufAllocator} with thread caches for every thread (non-Netty threads included) */
    static PooledByteBufAllocator nettyPooled() {
        return new PooledByteBufAllocator(true, 0, PooledByteBufAllocator.defaultNumDirectArena(),
                PooledByteBufAllocator.defaultPageSize(), PooledByteBufAllocator.defaultMaxOrder(),
                PooledByteBufAllocator.defaultSmallCacheSize(), PooledByteBufAllocator.defaultNormalCacheSize(), true);
    }

    static final MethodHandle MALLOC = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().find("malloc").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
    static final MethodHandle FREE = Linker.nativeLinker().downcallHandle(
            Linker.nativeLinker().defaultLookup().find("free").orElseThrow(),
            FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));

    static MemorySegment malloc(long size) {
        try {
            return (MemorySegment) MALLOC.invokeExact(size);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    static void free(MemorySegment p) {
        try {
            FREE.invokeExact(p);
        } catch (Throwable t) {
            throw new IllegalStateException(t);
        }
    }

    /**
     * @param spec a fixed size in bytes, or {@code mixed}: log-uniform 64 B - 1 MiB (seed 42)
     * @return 4096 sizes to cycle through
     */
    static long[] sizes(String spec) {
        long[] out = new long[4096];
        if (!"mixed".equals(spec)) {
            java.util.Arrays.fill(out, Long.parseLong(spec));
            return out;
        }
        Random r = new Random(42);
        double lo = Math.log(64);
        double hi = Math.log(1 << 20);
        for (int i = 0; i < out.length; i++) {
            out[i] = (long) Math.exp(lo + r.nextDouble() * (hi - lo));
        }
        return out;
    }
}
