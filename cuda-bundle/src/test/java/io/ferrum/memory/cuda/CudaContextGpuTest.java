package io.ferrum.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;

import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;

import jcuda.driver.CUcontext;
import jcuda.driver.JCudaDriver;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryType;

/**
 * GPU suite: a driver context is current per OS thread, and a virtual thread that parks goes on on
 * whichever carrier thread is free. A copy whose caller parked on the staging ring's lock still runs
 * in its device's context, on a carrier where no context is current. Skips without a GPU.
 */
@Tag("gpu")
class CudaContextGpuTest {
    private static final Device GPU = Device.cuda(0);
    private static final int BYTES = 1 << 20;

    @Test
    void aVirtualThreadThatParkedOnTheStagingRingCopiesInItsDevicesContext() throws Exception {
        Gpu.assumePresent();
        CudaUpstream upstream = new CudaUpstream(PrimaryContext.retain(GPU), CudaSettings.DEFAULTS, new PinnedRanges());
        CudaChunk chunk = (CudaChunk) upstream.reserve(BYTES, MemoryType.GENERAL);
        try {
            upstream.copyFromHost(MemorySegment.ofArray(new byte[BYTES]), chunk, 0, BYTES); // the ring is made
            byte[] data = new byte[BYTES];
            new SplittableRandom(9).nextBytes(data);
            ReentrantLock ring = stagingLock(upstream);
            CompletableFuture<Void> copied = new CompletableFuture<>();
            ring.lock();
            Thread caller;
            try {
                caller = Thread.ofVirtual().start(() -> {
                    try {
                        upstream.copyFromHost(MemorySegment.ofArray(data), chunk, 0, BYTES);
                        copied.complete(null);
                    } catch (Throwable e) {
                        copied.completeExceptionally(e);
                    }
                });
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (!ring.hasQueuedThread(caller)) {
                    assertTrue(System.nanoTime() < deadline, "the copy never waited for the ring");
                    Thread.onSpinWait();
                }
                unbindEveryCarrier(); // the caller is parked: it goes on on a carrier without a context
            } finally {
                ring.unlock();
            }
            copied.get(30, TimeUnit.SECONDS);
            byte[] back = new byte[BYTES];
            upstream.copyToHost(chunk, 0, MemorySegment.ofArray(back), BYTES);
            assertArrayEquals(data, back);
        } finally {
            upstream.release(chunk);
            upstream.close();
        }
    }

    private static ReentrantLock stagingLock(CudaUpstream upstream) throws ReflectiveOperationException {
        Field staging = CudaUpstream.class.getDeclaredField("staging");
        staging.setAccessible(true);
        Field lock = CudaStaging.class.getDeclaredField("lock");
        lock.setAccessible(true);
        return (ReentrantLock) lock.get(staging.get(upstream));
    }

    /**
     * Leaves no context current on any carrier thread of the virtual thread scheduler: as many
     * virtual threads as it has carriers each unbind their carrier's context, then spin (keeping
     * their carrier) until all have, so each ran on a carrier of its own.
     */
    private static void unbindEveryCarrier() throws InterruptedException {
        int carriers = Integer.getInteger("jdk.virtualThreadScheduler.parallelism",
                Runtime.getRuntime().availableProcessors());
        AtomicInteger unbound = new AtomicInteger();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < carriers; i++) {
            threads.add(Thread.ofVirtual().start(() -> {
                JCudaDriver.cuCtxSetCurrent(new CUcontext()); // NULL: unbinds this OS thread's context
                unbound.incrementAndGet();
                while (unbound.get() < carriers && System.nanoTime() < deadline) {
                    Thread.onSpinWait();
                }
            }));
        }
        for (Thread t : threads) {
            t.join();
        }
        assertTrue(unbound.get() == carriers, "only " + unbound.get() + " of " + carriers + " carriers unbound");
    }
}
