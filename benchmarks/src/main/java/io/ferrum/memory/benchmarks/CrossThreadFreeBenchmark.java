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
 * <p>{@code freeBy=owner} is the control experiment (PERFORMANCE item 18): the second thread does
 * not free but hands each buffer back through a second ring, and the producer frees it, so the
 * same buffers cross the same rings and every free runs on the thread that allocated. The
 * difference between the two rows is what freeing on another thread costs.
 *
 * <p>A ring is single-producer single-consumer: the writer fills a slot then publishes its tail
 * with a release store; the reader reads the tail with an acquire load, takes the slot and
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

    @Param({"ferrumDirect", "ferrumRouted", "nettyAdaptive", "nettyPooled", "arrowUnsafe", "malloc"})
    public String contender;

    @Param({"4096", "65536"})
    public long size;

    /** {@code false} leaves the touch out (the first measurement did). */
    @Param({"true"})
    public boolean touch;

    /** {@code freer}: the second thread frees; {@code owner}: it hands the buffer back and the producer frees. */
    @Param({"freer"})
    public String freeBy;

    Churner churner;
    final Ring forth = new Ring();
    final Ring back = new Ring();
    boolean ownerFrees;
    volatile boolean stop;
    Thread freer;
    volatile Throwable failure;

    /**
     * A single-producer single-consumer ring of {@value #SLOTS} slots. Head and tail lie on lines
     * of their own: the writer writes one, the reader the other.
     */
    static final class Ring {
        private static final VarHandle HEAD;
        private static final VarHandle TAIL;

        static {
            try {
                MethodHandles.Lookup l = MethodHandles.lookup();
                HEAD = l.findVarHandle(Ring.class, "head", long.class);
                TAIL = l.findVarHandle(Ring.class, "tail", long.class);
            } catch (ReflectiveOperationException e) {
                throw new ExceptionInInitializerError(e);
            }
        }

        final Object[] slots = new Object[SLOTS];
        long p01, p02, p03, p04, p05, p06, p07, p08;
        /** Slots taken so far; written by the reader only. */
        volatile long head;
        long q01, q02, q03, q04, q05, q06, q07, q08;
        /** Slots filled so far; written by the writer only. */
        volatile long tail;
        long r01, r02, r03, r04, r05, r06, r07, r08;

        /** Writer only. @return false when full */
        boolean offer(Object o) {
            long t = (long) TAIL.getOpaque(this);
            if (t - (long) HEAD.getAcquire(this) == SLOTS) {
                return false;
            }
            slots[(int) (t & (SLOTS - 1))] = o;
            TAIL.setRelease(this, t + 1);
            return true;
        }

        /** Reader only. @return the oldest element, or null when empty */
        Object poll() {
            long h = (long) HEAD.getOpaque(this);
            if (h == (long) TAIL.getAcquire(this)) {
                return null;
            }
            int i = (int) (h & (SLOTS - 1));
            Object o = slots[i];
            slots[i] = null;
            HEAD.setRelease(this, h + 1);
            return o;
        }

        boolean isEmpty() {
            return head == tail;
        }
    }

    @Setup(Level.Trial)
    public void setup() {
        churner = Churner.of(contender);
        ownerFrees = "owner".equals(freeBy);
        stop = false;
        freer = new Thread(this::freeLoop, "freer");
        freer.setDaemon(true);
        freer.start();
    }

    private void freeLoop() {
        try {
            int spins = 0;
            while (true) {
                Object b = forth.poll();
                if (b == null) {
                    if (stop) {
                        return;
                    }
                    pause(++spins);
                    continue;
                }
                if (ownerFrees) {
                    while (!back.offer(b)) {
                        pause(++spins);
                    }
                } else {
                    churner.free(b);
                }
            }
        } catch (Throwable e) {
            failure = e;
        }
    }

    /** Producer: frees what came back (freeBy=owner). */
    private void freeReturned() {
        for (Object b; (b = back.poll()) != null; ) {
            churner.free(b);
        }
    }

    @Benchmark
    public Object pipeline() {
        if (ownerFrees) {
            freeReturned();
        }
        Object b = churner.allocate(size);
        if (touch) {
            churner.touch(b, size);
        }
        int spins = 0;
        while (!forth.offer(b)) {
            if (failure != null) {
                throw new IllegalStateException("the freer failed", failure);
            }
            if (ownerFrees) {
                freeReturned();
            }
            pause(++spins);
        }
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

    /** Between iterations: the ring is emptied, so no buffer outlives the iteration that made it. */
    @TearDown(Level.Iteration)
    public void drained() {
        while (!forth.isEmpty() || ownerFrees && !back.isEmpty()) {
            if (failure != null) {
                throw new IllegalStateException("the freer failed", failure);
            }
            if (ownerFrees) {
                freeReturned();
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
