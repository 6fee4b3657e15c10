package io.ferrum.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import jcuda.driver.CUstream;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.pool.HostStreamManager;

/**
 * The order of {@link CudaStreams}' driver calls when streams and the manager end while work is in
 * flight: a {@code CUstream} is destroyed only after the last work accepted on it, and the context
 * retain is released only after the last {@code CUstream}. The driver is a fake that records its
 * calls; {@link CudaStreams} and its {@link HostStreamManager} are the real ones. {@code close()}'s
 * wait for accepted work is cut short by interrupting the closing thread (its documented behaviour),
 * which stands for the 10 s limit running out.
 */
class CudaStreamsLifecycleTest {
    private final RecordingDriver driver = new RecordingDriver();
    private final CudaStreams streams = new CudaStreams(driver, new HostStreamManager(Device.cuda(0)));
    private final CountDownLatch started = new CountDownLatch(1);
    private final CountDownLatch go = new CountDownLatch(1);

    @AfterEach
    void end() {
        go.countDown();
        Thread.interrupted();
    }

    /** Records the driver calls in order; a call after the release is recorded as a failure. */
    static final class RecordingDriver implements StreamDriver {
        final List<String> calls = Collections.synchronizedList(new ArrayList<>());
        private final Map<CUstream, String> names = Collections.synchronizedMap(new IdentityHashMap<>());
        private volatile boolean released;
        /** Runs inside the next create, after it is recorded. */
        volatile Runnable duringCreate;

        @Override
        public Device device() {
            return Device.cuda(0);
        }

        @Override
        public void create(CUstream stream) {
            names.put(stream, "s" + (names.size() + 1));
            record("create " + names.get(stream));
            Runnable r = duringCreate;
            duringCreate = null;
            if (r != null) {
                r.run();
            }
        }

        @Override
        public void destroy(CUstream stream) {
            record("destroy " + names.get(stream));
        }

        @Override
        public void release() {
            record("release");
            released = true;
        }

        void note(String what) {
            calls.add(what);
        }

        private void record(String call) {
            calls.add(released ? "AFTER RELEASE: " + call : call);
        }
    }

    private CompletableFuture<Void> blockOn(StreamHandle s) {
        return streams.submit(s, () -> {
            started.countDown();
            try {
                go.await();
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        }).toCompletableFuture();
    }

    /** close() with its wait cut short: returns with the blocked work still running. */
    private void closeWithoutWaiting() {
        Thread.currentThread().interrupt();
        streams.close();
        assertTrue(Thread.interrupted(), "close keeps the interrupt flag");
    }

    /**
     * Review defect: close() destroyed every CUstream and released the context as soon as its wait for
     * accepted work ended, also while work on a stream still ran; that work then enqueued on a destroyed
     * stream in a context this manager no longer held.
     */
    @Test
    void aStreamWhoseWorkOutlivesCloseIsDestroyedWhenItEndsAndTheContextAfterIt() throws Exception {
        StreamHandle busy = streams.createStream(Device.cuda(0));
        streams.createStream(Device.cuda(0));
        CompletableFuture<Void> work = blockOn(busy);
        assertTrue(started.await(30, TimeUnit.SECONDS));

        closeWithoutWaiting();
        assertEquals(List.of("create s1", "create s2", "destroy s2"), driver.calls,
                "the idle stream is destroyed at once; the busy one and the context stay");

        go.countDown();
        work.get(30, TimeUnit.SECONDS);
        assertEquals(List.of("create s1", "create s2", "destroy s2", "destroy s1", "release"), driver.calls);
    }

    /**
     * Review defect: a stream destroyed with work still running was destroyed when that work ended,
     * also after close() had released the context retain (a call on a released context: the stream
     * leaked, or was destroyed in a context nobody held).
     */
    @Test
    void aStreamDestroyedWithWorkRunningIsDestroyedBeforeTheContextIsReleased() throws Exception {
        StreamHandle busy = streams.createStream(Device.cuda(0));
        CompletableFuture<Void> work = blockOn(busy);
        assertTrue(started.await(30, TimeUnit.SECONDS));
        streams.destroyStream(busy);
        assertEquals(List.of("create s1"), driver.calls, "not destroyed while its work runs");

        closeWithoutWaiting();
        assertEquals(List.of("create s1"), driver.calls, "the context stays while a stream lives");

        go.countDown();
        work.get(30, TimeUnit.SECONDS);
        assertEquals(List.of("create s1", "destroy s1", "release"), driver.calls);
    }

    /**
     * Review defect: close() called from inside stream work (a callback that stops the backend) does
     * not wait for that work, and destroyed its CUstream and released the context under it.
     */
    @Test
    void closeFromInsideStreamWorkDestroysThatStreamAfterTheWork() throws Exception {
        StreamHandle s = streams.createStream(Device.cuda(0));
        streams.submit(s, () -> {
            streams.close();
            driver.note("work goes on after close");
        }).toCompletableFuture().get(30, TimeUnit.SECONDS);
        assertEquals(List.of("create s1", "work goes on after close", "destroy s1", "release"), driver.calls);
    }

    /**
     * Review defect: a stream whose cuStreamCreate ran while close() swept the streams was handed out
     * after close and never destroyed (its context retain already released).
     */
    @Test
    void aStreamCreatedWhileCloseRunsIsDestroyedBeforeTheContextIsReleased() {
        streams.createStream(Device.cuda(0));
        driver.duringCreate = streams::close;
        assertThrows(DeviceUnavailableException.class, () -> streams.createStream(Device.cuda(0)));
        assertEquals(List.of("create s1", "create s2", "destroy s1", "destroy s2", "release"), driver.calls);
    }

    @Test
    void closeWithNoWorkDestroysEveryStreamThenReleasesOnce() {
        StreamHandle a = streams.createStream(Device.cuda(0));
        streams.createStream(Device.cuda(0));
        streams.destroyStream(a);
        streams.close();
        streams.close();
        assertEquals(List.of("create s1", "create s2", "destroy s1", "destroy s2", "release"), driver.calls);
        assertThrows(DeviceUnavailableException.class, () -> streams.createStream(Device.cuda(0)));
        assertEquals(5, driver.calls.size(), "nothing created after close");
    }
}
