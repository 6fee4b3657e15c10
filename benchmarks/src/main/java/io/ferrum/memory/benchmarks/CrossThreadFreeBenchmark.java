package io.ferrum.memory.benchmarks;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
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
import org.openjdk.jmh.annotations.Threads;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Cross-thread free (issue 15): a pipeline. The benchmark thread allocates a buffer, touches one
 * byte per 4 KiB page and puts it into a ring of {@value #SLOTS} slots; a second platform thread,
 * started with the trial, takes buffers out of the ring and frees them. One op is one buffer
 * through the pipeline: in the steady state the producer waits for a free slot whenever the freer
 * is the slower side, so ns/op is the pipeline's time per buffer, whichever side limits it. Between
 * iterations the freer empties the ring, so every buffer allocated is freed by the other thread.
 *
 * <p>The ring is single-producer single-consumer: the producer writes a slot then publishes its
 * tail with a release store; the freer reads the tail with an acquire load, takes the slot and
 * publishes its head the same way. A side that must wait spins ({@link Thread#onSpinWait}) and
 * yields its core every {@value #SPINS} spins: on a machine with as many busy threads as cores, a
 * waiter that only spins keeps the other side from running.
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
public class CrossThreadFreeBenchmark {
    static final int SLOTS = 1024;
    static final int SPINS = 64;
    private static final VarHandle HEAD;
    private static final VarHandle TAIL;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            HEAD = l.findVarHandle(CrossThreadFreeBenchmark.class, "head", long.class);
            TAIL = l.findVarHandle(CrossThreadFreeBenchmark.class, "tail", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    @Param({"ferrumDirect", "ferrumRouted", "nettyAdaptive", "nettyPooled", "arrowUnsafe", "malloc"})
    public String contender;

    @Param({"4096", "65536"})
    public long size;

    /** {@code false} leaves the touch out (the first measurement did). */
    @Param({"true"})
    public boolean touch;

    Churner churner;
    final Object[] ring = new Object[SLOTS];
    // Head and tail far apart: the producer writes one, the freer the other.
    long p01, p02, p03, p04, p05, p06, p07, p08;
    /** Slots taken by the freer so far; written by the freer only. */
    volatile long head;
    long q01, q02, q03, q04, q05, q06, q07, q08;
    /** Slots filled by the producer so far; written by the producer only. */
    volatile long tail;
    long r01, r02, r03, r04, r05, r06, r07, r08;
    volatile boolean stop;
    Thread freer;
    volatile Throwable failure;

    @Setup(Level.Trial)
    public void setup() {
        churner = Churner.of(contender);
        stop = false;
        freer = new Thread(this::freeLoop, "freer");
        freer.setDaemon(true);
        freer.start();
    }

    private void freeLoop() {
        try {
            long h = (long) HEAD.getOpaque(this);
            int spins = 0;
            while (true) {
                long t = (long) TAIL.getAcquire(this);
                if (h == t) {
                    if (stop) {
                        return;
                    }
                    pause(++spins);
                    continue;
                }
                while (h < t) {
                    int i = (int) (h & (SLOTS - 1));
                    Object b = ring[i];
                    ring[i] = null;
                    churner.free(b);
                    h++;
                    HEAD.setRelease(this, h);
                }
            }
        } catch (Throwable e) {
            failure = e;
        }
    }

    @Benchmark
    public Object pipeline() {
        Object b = churner.allocate(size);
        if (touch) {
            churner.touch(b, size);
        }
        long t = (long) TAIL.getOpaque(this);
        int spins = 0;
        while (t - (long) HEAD.getAcquire(this) == SLOTS) {
            if (failure != null) {
                throw new IllegalStateException("the freer failed", failure);
            }
            pause(++spins);
        }
        ring[(int) (t & (SLOTS - 1))] = b;
        TAIL.setRelease(this, t + 1);
        return b;
    }

    /** One wait step: a spin, and every {@value #SPINS}th a yield. */
    private static void pause(int spins) {
        if (spins % SPINS == 0) {
            Thread.yield();
        } else {
            Thread.onSpinWait();
        }
    }

    /** Between iterations: the freer empties the ring, so no buffer outlives the iteration that made it. */
    @TearDown(Level.Iteration)
    public void drained() {
        while ((long) HEAD.getAcquire(this) != tail) {
            if (failure != null) {
                throw new IllegalStateException("the freer failed", failure);
            }
            Thread.yield();
        }
    }

    @TearDown(Level.Trial)
    public void tearDown() throws InterruptedException {
        stop = true;
        freer.join();
        churner.close();
        if (failure != null) {
            throw new IllegalStateException("the freer failed", failure);
        }
    }
}
