package io.ferrum.memory.monitor;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
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
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.StagingConflictException;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * Attacks on the router's copies within one GPU nested in a {@code withMapped} action of the calling
 * thread (they go through {@code read} and {@code write}, in pieces): overlapping ranges of the
 * action's block several host buffers long keep memmove's meaning both ways; under READ_ONLY actions
 * of two threads a copy out of the block reads the action's copy and one into it is refused, changing
 * nothing and saying so; a sole reader's copy into its block is kept.
 */
class StagedRouterCopyAttackTest {
    static final long MiB = 1 << 20;
    static final Device GPU = Device.cuda(1);

    private final List<AutoCloseable> toClose = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        for (AutoCloseable c : toClose.reversed()) {
            c.close();
        }
    }

    private PooledMemoryManager gpu() {
        PooledMemoryManager g = PooledMemoryManager.create(new ArenaUpstream(GPU, 64 * MiB, false),
                MemoryManagerConfig.defaults().withAutoGc(false, 0.85), PoolSettings.defaults(), null);
        toClose.add(g);
        return g;
    }

    private MemoryMonitor monitor(PooledMemoryManager g) {
        MemoryMonitor mon = new MemoryMonitor(null, MonitorBuilder.config("", 0, 4), null);
        toClose.add(mon::deactivate);
        mon.addManager(g, Map.of(DeviceMemoryManager.DEVICE_PROPERTY, GPU.toString(), "service.ranking", 0,
                "service.id", 100L));
        return mon;
    }

    private static byte pattern(int i) {
        return (byte) (i * 31 % 251);
    }

    private static byte[] bytes(PooledMemoryManager g, MemoryHandle h, int n) {
        byte[] out = new byte[n];
        g.read(h, 0, MemorySegment.ofArray(out));
        return out;
    }

    /**
     * A block larger than the router's host buffer ({@link CrossDeviceCopier#BOUNCE_BYTES}), so that
     * the copy is several pieces; the action fills it, then copies within it forwards and backwards
     * over overlapping ranges: each must be a memmove of the action's bytes, kept by its write-back.
     */
    @Test
    void overlappingCopiesOfSeveralPiecesWithinTheActionsBlockAreMemmoves() {
        PooledMemoryManager g = gpu();
        MemoryMonitor mon = monitor(g);
        int n = (int) (CrossDeviceCopier.BOUNCE_BYTES * 2 + MiB);
        int shift = 1000;
        MemoryHandle h = g.allocate(n, GPU);
        for (boolean forwards : new boolean[] {true, false}) {
            byte[] expected = new byte[n];
            for (int i = 0; i < n; i++) {
                expected[i] = pattern(i);
            }
            long src = forwards ? 0 : shift;
            long dst = forwards ? shift : 0;
            System.arraycopy(expected.clone(), (int) src, expected, (int) dst, n - shift);
            g.withMapped(h, MemoryAccess.READ_WRITE, view -> {
                for (int i = 0; i < n; i++) {
                    view.set(ValueLayout.JAVA_BYTE, i, pattern(i));
                }
                mon.copy(MemoryTransfer.of(h, h, n - shift).withSrcOffset(src).withDstOffset(dst));
                return null;
            });
            byte[] got = bytes(g, h, n);
            int first = java.util.Arrays.mismatch(expected, got);
            assertEquals(-1, first, (forwards ? "forwards" : "backwards") + ": first wrong byte at " + first);
        }
    }

    /**
     * READ_ONLY actions of two threads on one block: the calling reader's router copy out of it takes
     * the action's bytes; its copy into it is refused (another reader shares it), says so and changes
     * nothing. Alone, the reader's copy into its block goes and is kept.
     */
    @Test
    void underTwoReadersACopyOutGoesAndACopyInIsRefusedChangingNothing() throws Exception {
        PooledMemoryManager g = gpu();
        MemoryMonitor mon = monitor(g);
        int n = 4096;
        MemoryHandle h = g.allocate(n, GPU);
        MemoryHandle other = g.allocate(n, GPU);
        byte[] sevens = new byte[n];
        java.util.Arrays.fill(sevens, (byte) 7);
        g.write(h, 0, MemorySegment.ofArray(sevens));
        byte[] ones = new byte[n];
        java.util.Arrays.fill(ones, (byte) 1);
        g.write(other, 0, MemorySegment.ofArray(ones));
        CountDownLatch inside = new CountDownLatch(1);
        CountDownLatch go = new CountDownLatch(1);
        CompletableFuture<Object> second = CompletableFuture.supplyAsync(() -> g.withMapped(h, MemoryAccess.READ_ONLY, v -> {
            inside.countDown();
            try {
                go.await(30, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
            return null;
        }));
        Throwable into;
        try {
            assertTrue(inside.await(30, TimeUnit.SECONDS), "the other reader never ran");
            into = g.withMapped(h, MemoryAccess.READ_ONLY, v -> {
                mon.copy(MemoryTransfer.of(h, other, n));
                try {
                    mon.copy(MemoryTransfer.of(other, h, n));
                    return null;
                } catch (RuntimeException e) {
                    return e;
                }
            });
        } finally {
            go.countDown();
        }
        assertNull(second.get(30, TimeUnit.SECONDS));
        assertArrayEquals(sevens, bytes(g, other, n), "the copy out of the readers' block");
        StagingConflictException refused = assertInstanceOf(StagingConflictException.class, into,
                "a reader's copy into the block another reader shares");
        assertEquals(h, refused.handle());
        assertTrue(refused.getMessage().contains("Nothing was done") && refused.getMessage().contains("READ_WRITE"),
                refused.getMessage());
        byte[] twos = new byte[n];
        java.util.Arrays.fill(twos, (byte) 2);
        g.write(other, 0, MemorySegment.ofArray(twos));
        assertArrayEquals(sevens, bytes(g, h, n), "the refused copy changed the block");
        g.withMapped(h, MemoryAccess.READ_ONLY, v -> {
            mon.copy(MemoryTransfer.of(other, h, n));
            return null;
        });
        assertArrayEquals(twos, bytes(g, h, n), "the sole reader's copy into its block");
    }
}
