package io.ferrum.memory.benchmarks;

import java.util.concurrent.TimeUnit;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Virtual threads (issue 15): mixed sizes ({@link Contenders#sizes}), allocate + touch one byte per
 * 4 KiB page + free, on {@value #THREADS} virtual threads of the default scheduler. One benchmark
 * invocation starts {@value #THREADS} new virtual threads, each doing {@value #PER_THREAD} allocate +
 * touch + free in a row from its own place in the size sequence, and joins them all; the score is
 * per allocate + touch + free ({@link OperationsPerInvocation}), so it includes 1/{@value #PER_THREAD}
 * of a virtual thread's start and join, the same for every contender. With {@code yield=true} each
 * thread yields after every free, so that virtual threads interleave on the carriers (and a thread
 * may resume on another carrier) the way threads that block on I/O do.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
@Threads(1)
@Warmup(iterations = 4, time = 2)
@Measurement(iterations = 5, time = 1)
@Fork(value = 1, jvmArgsAppend = {"--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow",
    "--add-opens=java.base/java.nio=ALL-UNNAMED", "-Dio.netty.tryReflectionSetAccessible=true",
    "-Darrow.allocation.manager.type=Unsafe", "-Dio.netty.leakDetection.level=disabled", "-Xms2g", "-Xmx2g", "-XX:+AlwaysPreTouch"})
public class VirtualThreadBenchmark {
    static final int THREADS = 64;
    static final int PER_THREAD = 64;

    @Param({"ferrumDirect", "ferrumRouted", "nettyAdaptive", "nettyPooled", "malloc"})
    public String contender;

    @Param({"false"})
    public boolean yield;

    /** {@code mixed} (the row) or a fixed size in bytes (extra rows, to see where the time goes). */
    @Param({"mixed"})
    public String size;

    Churner churner;
    long[] sizes;
    final Thread[] threads = new Thread[THREADS];
    volatile Throwable failure;

    @Setup(Level.Trial)
    public void setup() {
        churner = Churner.of(contender);
        sizes = Contenders.sizes(size);
    }

    @TearDown(Level.Trial)
    public void tearDown() {
        churner.close();
    }

    @Benchmark
    @OperationsPerInvocation(THREADS * PER_THREAD)
    public void mixed() throws InterruptedException {
        for (int t = 0; t < THREADS; t++) {
            int from = t * PER_THREAD;
            threads[t] = Thread.ofVirtual().start(() -> churn(from));
        }
        for (Thread t : threads) {
            t.join();
        }
        if (failure != null) {
            throw new IllegalStateException("a virtual thread failed", failure);
        }
    }

    private void churn(int from) {
        try {
            Churner c = churner;
            for (int i = 0; i < PER_THREAD; i++) {
                long n = sizes[(from + i) & (sizes.length - 1)];
                Object b = c.allocate(n);
                c.touch(b, n);
                c.free(b);
                if (yield) {
                    Thread.yield();
                }
            }
        } catch (Throwable e) {
            failure = e;
        }
    }
}
