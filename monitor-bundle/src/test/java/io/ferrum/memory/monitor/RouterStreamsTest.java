package io.ferrum.memory.monitor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.HostStreamManager;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * The router's async copies over real stream managers (a helper's attack on streams, 2026-12): within
 * one device the copy is ordered on the stream; between two devices the stream is checked to be a
 * live stream of the destination's, and anything else is refused before a byte moves. Broke nothing.
 */
class RouterStreamsTest {
    static final long MiB = 1 << 20;
    static final Device CPU1 = Device.cpu(1);
    static final Device CPU2 = Device.cpu(2);
    private static final long WAIT_S = 30;

    private final List<AutoCloseable> toClose = new ArrayList<>();
    private final CountDownLatch hold = new CountDownLatch(1);
    private long nextServiceId = 100;

    @AfterEach
    void closeAll() throws Exception {
        hold.countDown();
        for (AutoCloseable c : toClose) {
            c.close();
        }
    }

    private PooledMemoryManager device(Device d, HostStreamManager streams) {
        MemoryPoolConfig pool = MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).build();
        PooledMemoryManager m = PooledMemoryManager.create(new ArenaUpstream(d, 64 * MiB, true),
                MemoryManagerConfig.defaults().withAutoGc(false, 0.85).withPoolConfig(MemoryType.GENERAL, pool),
                PoolSettings.defaults(), streams);
        toClose.add(0, m);
        return m;
    }

    private HostStreamManager streams(Device d) {
        HostStreamManager s = new HostStreamManager(d);
        toClose.add(s);
        return s;
    }

    private Map<String, Object> props(Device d) {
        return Map.of(DeviceMemoryManager.DEVICE_PROPERTY, d.toString(), "service.ranking", 0,
                "service.id", nextServiceId++);
    }

    private MemoryMonitor monitor() {
        MemoryMonitor m = new MemoryMonitor(null, MonitorBuilder.config("", 0, 4), null);
        toClose.add(0, m::deactivate);
        return m;
    }

    private static byte[] read(PooledMemoryManager m, MemoryHandle h, int n) {
        byte[] out = new byte[n];
        m.read(h, 0, MemorySegment.ofArray(out));
        return out;
    }

    @Test
    void aCopyWithinOneDeviceIsOrderedOnItsStreamAndOneBetweenDevicesOnlyOnAStreamOfTheDestination() throws Exception {
        MemoryMonitor mon = monitor();
        HostStreamManager s1 = streams(CPU1);
        HostStreamManager s2 = streams(CPU2);
        PooledMemoryManager a = device(CPU1, s1);
        PooledMemoryManager b = device(CPU2, s2);
        mon.addManager(a, props(CPU1));
        mon.addManager(b, props(CPU2));
        MemoryHandle src = a.allocate(4096, CPU1);
        MemoryHandle mid = a.allocate(4096, CPU1);
        MemoryHandle dst = b.allocate(4096, CPU2);
        a.write(src, 0, MemorySegment.ofArray(new byte[] {7, 7, 7, 7}));
        StreamHandle onA = s1.createStream(CPU1);
        StreamHandle onB = s2.createStream(CPU2);
        s1.submit(onA, () -> {
            try {
                hold.await(WAIT_S, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        });
        CompletableFuture<Void> within = mon.copyAsync(MemoryTransfer.of(src, mid, 4), onA).toCompletableFuture();
        assertFalse(within.isDone(), "a copy within cpu:1 waits for the work before it on its stream");
        // Between two devices: the source's stream, a destroyed one and a forged one are refused at once.
        assertThrows(InvalidMemoryRequestException.class, () -> mon.copyAsync(MemoryTransfer.of(src, dst, 4), onA));
        StreamHandle gone = s2.createStream(CPU2);
        s2.destroyStream(gone);
        assertThrows(InvalidMemoryRequestException.class, () -> mon.copyAsync(MemoryTransfer.of(src, dst, 4), gone));
        assertThrows(InvalidMemoryRequestException.class,
                () -> mon.copyAsync(MemoryTransfer.of(src, dst, 4), new StreamHandle(onB.id() + 1000)));
        assertEquals(0, read(b, dst, 4)[0], "nothing refused was copied");
        mon.copyAsync(MemoryTransfer.of(src, dst, 4), onB).toCompletableFuture().get(WAIT_S, TimeUnit.SECONDS);
        assertEquals(7, read(b, dst, 4)[3], "a copy between devices on the destination's stream arrived");
        // The check is a zero-byte copy queued on onB, not ordered with the copy itself (which runs on a
        // monitor worker): it may still be queued as the copy ends, but must end on its own.
        s2.synchronizeStream(onB).toCompletableFuture().get(WAIT_S, TimeUnit.SECONDS);
        assertTrue(s2.isStreamReady(onB), "its stream check left nothing queued");
        hold.countDown();
        within.get(WAIT_S, TimeUnit.SECONDS);
        assertEquals(7, read(a, mid, 4)[0]);
    }
}
