package io.ferrum.memory.monitor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Proxy;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.osgi.service.log.Logger;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryObserver;
import io.ferrum.memory.api.MemoryPressure;

/**
 * The notifier's lanes in use: a blocked observer delays nobody else, a full lane's drops make two
 * log lines per episode, a removed observer hears nothing more. Each test holds an observer inside a
 * call with a latch, so every interleaving is forced; the waits only bound a hang.
 */
class ObserverNotifierTest {
    static final Device CPU1 = Device.cpu(1);

    /** The warnings logged, as text. */
    private final List<String> warnings = new CopyOnWriteArrayList<>();
    private final Logger logger = (Logger) Proxy.newProxyInstance(Logger.class.getClassLoader(), new Class<?>[] {Logger.class},
            (proxy, method, args) -> {
                if (method.getName().equals("warn") && args != null && args.length > 0) {
                    warnings.add(String.valueOf(args[0]));
                }
                return method.getReturnType() == boolean.class ? Boolean.TRUE : null;
            });
    private ObserverNotifier notifier;

    @AfterEach
    void stop() {
        if (notifier != null) {
            notifier.stop();
        }
    }

    /** Blocks in its first deviceAdded until released; counts every call. */
    static final class HeldObserver implements MemoryObserver {
        final CountDownLatch entered = new CountDownLatch(1);
        final CountDownLatch release = new CountDownLatch(1);
        final AtomicInteger calls = new AtomicInteger();
        final CountDownLatch threeCalls = new CountDownLatch(3);

        @Override
        public void deviceAdded(Device device, MemoryInfo info) {
            threeCalls.countDown();
            if (calls.incrementAndGet() == 1) {
                entered.countDown();
                try {
                    release.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }

        void awaitEntered() throws InterruptedException {
            assertTrue(entered.await(30, TimeUnit.SECONDS), "the held observer was never called");
        }
    }

    @Test
    void aBlockedObserverHoldsUpNoOtherObserver() throws Exception {
        notifier = new ObserverNotifier(16, Map::of, new MonitorLog(logger));
        HeldObserver held = new HeldObserver();
        CountDownLatch otherHeard = new CountDownLatch(2);
        notifier.add(held, null);
        notifier.add(new MemoryObserver() {
            @Override
            public void deviceAdded(Device device, MemoryInfo info) {
                otherHeard.countDown();
            }
        }, null);

        notifier.deviceAdded(CPU1, null);
        held.awaitEntered();
        notifier.deviceAdded(Device.cpu(2), null);

        assertTrue(otherHeard.await(30, TimeUnit.SECONDS), "the other observer waited for the blocked one");
        held.release.countDown();
    }

    @Test
    void aFullLaneDropsAndLogsOnceWhenItStartsAndOnceWithTheCountWhenItCatchesUp() throws Exception {
        notifier = new ObserverNotifier(2, Map::of, new MonitorLog(logger));
        HeldObserver held = new HeldObserver();
        notifier.add(held, null);

        notifier.deviceAdded(CPU1, null);
        held.awaitEntered();          // the lane's first call is running: its queue is empty
        for (int i = 0; i < 5; i++) { // 2 fit, 3 are dropped
            notifier.deviceAdded(CPU1, null);
        }
        assertEquals(1, warnings.size(), "one line when the drops start: " + warnings);
        assertTrue(warnings.get(0).contains("is 2 notifications behind"), warnings.get(0));

        held.release.countDown();
        assertTrue(held.threeCalls.await(30, TimeUnit.SECONDS), "the 2 calls that fitted never ran");
        notifier.stop();              // waits for the lane to finish (a few seconds at most)
        MemoryMonitorTest.await(() -> held.calls.get() >= 3, "the third call");

        assertEquals(3, held.calls.get(), "the running call and the 2 that fitted, not the dropped ones");
        assertEquals(2, warnings.size(), "one line when it caught up: " + warnings);
        assertTrue(warnings.get(1).contains("caught up; 3 notifications for it were dropped"), warnings.get(1));
    }

    /**
     * Pressure changes are edge-triggered: an observer whose lane dropped the last of a flood (the
     * device going back to LOW) kept the last level that fitted, HIGH, for as long as the device
     * stayed LOW, and its next change came from a level it was never told. An observer now hears
     * each change from the level it heard last, and once its lane has caught up after drops, the
     * level each device it missed a change of is at now. Forced: the observer is held in its first
     * call while six changes arrive for a lane of two.
     */
    @Test
    void anObserverWhoseLaneDroppedChangesHearsTheLevelTheDeviceIsAtOnceItCatchesUp() throws Exception {
        Map<Device, MemoryPressure> now = new java.util.concurrent.ConcurrentHashMap<>(Map.of(CPU1, MemoryPressure.LOW));
        notifier = new ObserverNotifier(2, () -> Map.copyOf(now), new MonitorLog(logger));
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        java.util.concurrent.BlockingQueue<String> heard = new java.util.concurrent.LinkedBlockingQueue<>();
        notifier.add(new MemoryObserver() {
            @Override
            public void pressureChanged(Device d, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
                heard.add(previous + ">" + current);
                if (entered.getCount() > 0) {
                    entered.countDown();
                    try {
                        release.await(30, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
            }
        }, null);
        MemoryPressure level = MemoryPressure.LOW;
        for (int i = 0; i < 6; i++) { // the first runs (held), 2 fit, 3 are dropped: the last is HIGH>LOW
            MemoryPressure next = level == MemoryPressure.LOW ? MemoryPressure.HIGH : MemoryPressure.LOW;
            notifier.pressureChanged(CPU1, level, next, null);
            level = next;
            if (i == 0) {
                assertTrue(entered.await(30, TimeUnit.SECONDS), "the observer was never called");
            }
        }
        assertEquals(MemoryPressure.LOW, level);
        release.countDown();
        String last = null;
        MemoryPressure from = MemoryPressure.LOW;
        for (String h; (h = heard.poll(30, TimeUnit.SECONDS)) != null; ) {
            assertEquals(from.name(), h.split(">")[0], "each change from the level heard last: " + h);
            from = MemoryPressure.valueOf(h.split(">")[1]);
            last = h;
            if (from == MemoryPressure.LOW && heard.isEmpty()) {
                break;
            }
        }
        assertEquals(MemoryPressure.LOW, from, "the level the device is at; last heard " + last);
    }

    @Test
    void aRemovedObserverIsNotCalledAgainNotEvenWithCallsAlreadyQueued() throws Exception {
        notifier = new ObserverNotifier(16, Map::of, new MonitorLog(logger));
        HeldObserver held = new HeldObserver();
        notifier.add(held, null);
        notifier.deviceAdded(CPU1, null);
        held.awaitEntered();
        notifier.deviceAdded(CPU1, null);
        notifier.deviceAdded(CPU1, null);

        notifier.remove(held);
        held.release.countDown();
        notifier.stop();

        assertEquals(1, held.calls.get(), "only the call that was running when it was removed");
        assertEquals(List.of(), warnings);
    }

    /**
     * A monitor plugin uninstalled while it is told of an event: its call, begun before the removal,
     * fails as its class loader goes (a NoClassDefFoundError). The warning said that it "keeps
     * receiving calls", of an observer that is removed and never called again.
     */
    @Test
    void aCallThatFailsAfterItsObserverWasRemovedIsNotSaidToKeepReceivingCalls() throws Exception {
        notifier = new ObserverNotifier(16, Map::of, new MonitorLog(logger));
        CountDownLatch entered = new CountDownLatch(1);
        CountDownLatch release = new CountDownLatch(1);
        MemoryObserver leaving = new MemoryObserver() {
            @Override
            public void deviceAdded(Device device, MemoryInfo info) {
                entered.countDown();
                try {
                    release.await(30, TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                throw new NoClassDefFoundError("io/ferrum/memory/monitor/log/LogMonitor$1");
            }
        };
        notifier.add(leaving, null);
        notifier.deviceAdded(CPU1, null);
        assertTrue(entered.await(30, TimeUnit.SECONDS), "the observer was never called");

        notifier.remove(leaving);
        release.countDown();
        notifier.stop(); // waits for the call to end (a few seconds at most)
        MemoryMonitorTest.await(() -> !warnings.isEmpty(), "the failed call's warning");

        assertEquals(1, warnings.size(), warnings.toString());
        assertTrue(warnings.get(0).contains("failed in a call begun before it was removed")
                && !warnings.get(0).contains("keeps receiving calls"), warnings.get(0));
    }
}
