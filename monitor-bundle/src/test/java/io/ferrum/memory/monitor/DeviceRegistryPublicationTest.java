package io.ferrum.memory.monitor;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.MemoryHandle;

/**
 * A change to the registry is seen whole: a manager that serves a device in {@link
 * DeviceRegistry#active()} routes its handles in the same reading, so a block the router allocated
 * there can be freed through it at once.
 *
 * <p>No seam lies between the registry's writes of one change, so this test cannot force the
 * interleaving; it reads while another thread adds and removes a manager as fast as it can. With
 * the device map and the handle tables published as separate fields (before the fix), a reader
 * saw a new device before its handle space within a few thousand changes here (LifecycleUnderTrafficIT
 * saw it once as "the router refused to free a block that cpu:0 still held").
 */
class DeviceRegistryPublicationTest {
    private static final int CHANGES = 200_000;

    @Test
    void aManagerInTheDeviceMapAlwaysRoutesItsHandlesInTheSameReading() throws Exception {
        DeviceRegistry registry = new DeviceRegistry();
        StubManager steady = PrefixTableTest.stub(0, StubManager.poolSpace(1));
        StubManager coming = PrefixTableTest.stub(1, StubManager.poolSpace(2));
        registry.add(new DeviceRegistry.Entry(steady.device(), steady, steady.space, 0, 1, false));
        MemoryHandle ofComing = new MemoryHandle((2L << 44) | 5);

        AtomicReference<String> seen = new AtomicReference<>();
        AtomicLong readings = new AtomicLong();
        CountDownLatch started = new CountDownLatch(1);
        Thread reader = new Thread(() -> {
            started.countDown();
            while (!Thread.currentThread().isInterrupted() && seen.get() == null) {
                DeviceRegistry.Routes routes = registry.routes();
                DeviceMemoryManager serving = routes.active().get(Device.cpu(1));
                if (serving != null && routes.ownerOf(ofComing) != serving) {
                    seen.set("cpu:1 served in the device map, but its handle routed to " + routes.ownerOf(ofComing));
                }
                readings.incrementAndGet();
            }
        }, "registry-reader");
        reader.setDaemon(true);
        reader.start();
        started.await(5, TimeUnit.SECONDS);
        for (int i = 0; i < CHANGES && seen.get() == null; i++) {
            registry.add(new DeviceRegistry.Entry(coming.device(), coming, coming.space, 0, 2 + i, false));
            registry.remove(coming.device(), coming, false);
        }
        reader.interrupt();
        reader.join(5_000);

        assertEquals(null, seen.get(), "after " + readings.get() + " readings");
        assertEquals(Map.of(Device.cpu(0), steady), registry.active());
    }
}
