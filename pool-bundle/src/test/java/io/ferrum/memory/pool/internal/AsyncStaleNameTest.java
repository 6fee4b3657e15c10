package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.reflect.Field;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryMapping;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolSettings;

/**
 * Async copies whose names go stale between the argument checks and the pin (an async review,
 * 2026-12): the pin under the pool's lock is where the engine decides whether the copy is accepted,
 * so every name the copy writes or reads through must still name its block there.
 */
class AsyncStaleNameTest {
    static final long KiB = 1024;
    static final long MiB = 1024 * KiB;
    static final Device CPU = Device.cpu();

    private static MemoryManagerConfig config() {
        return MemoryManagerConfig.defaults().withAutoGc(false, 0.85)
                .withPoolConfig(MemoryType.MAPPED,
                        MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).alignment(256).build());
    }

    @SuppressWarnings("unchecked")
    private static <T> T field(PoolEngine m, String name) throws ReflectiveOperationException {
        Field f = PoolEngine.class.getDeclaredField(name);
        f.setAccessible(true);
        return (T) f.get(m);
    }

    /**
     * {@code copyAsync(H -> A)} with H and A two names of one block (a mapping on one device). The
     * copy resolved both names and waits for the MAPPED pool's lock to pin; meanwhile A is freed (the
     * free returns normally: H still names the block). The copy must be refused like a synchronous
     * copy or a writeAsync through A; it pinned under H's name only and wrote through the freed A.
     */
    @Test
    void aCopyAsyncBetweenTwoNamesOfOneBlockChecksTheDestinationNameWhenItPins() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        try (PoolEngine m = new PoolEngine(up, config(), PoolSettings.defaults().withThreadCache(0), null)) {
            MemoryMapping mapping = m.createMapping(CPU, CPU, 4 * KiB);
            MemoryHandle h = mapping.source();
            MemoryHandle a = mapping.target();
            m.write(h, 0, MemorySegment.ofArray(new byte[] {1, 2, 3, 4, 5, 6, 7, 8}));
            Pool[] pools = field(m, "pools");
            Pool mapped = pools[MemoryType.MAPPED.ordinal()];

            CompletableFuture<Throwable> copier = new CompletableFuture<>();
            Thread t;
            mapped.lock.lock(); // the pin waits here, after the copy resolved and checked both names
            try {
                t = Thread.ofPlatform().start(() -> {
                    try {
                        m.copyAsync(MemoryTransfer.of(h, a, 8).withDstOffset(64), StreamHandle.DEFAULT)
                                .toCompletableFuture().get(30, TimeUnit.SECONDS);
                        copier.complete(null);
                    } catch (Throwable e) {
                        copier.complete(e);
                    }
                });
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (!mapped.lock.hasQueuedThread(t)) {
                    assertTrue(System.nanoTime() < deadline, "copyAsync never reached the pool's lock");
                    Thread.onSpinWait();
                }
                m.deallocate(a); // lock-free: H still names the block, so nothing goes back to the pool
            } finally {
                mapped.lock.unlock();
            }
            Throwable got = copier.get(30, TimeUnit.SECONDS);
            t.join();
            byte[] at64 = new byte[8];
            m.read(h, 64, MemorySegment.ofArray(at64));
            assertArrayEquals(new byte[8], at64, "nothing was written through the freed name " + a
                    + " (copyAsync ended with " + got + ")");
            InvalidHandleException refused = assertInstanceOf(InvalidHandleException.class, got);
            assertTrue(refused.getMessage().contains(a.toString()), refused.getMessage());
            Block b = ((HandleTable) field(m, "handles")).lookup(h.id());
            assertEquals(0, b.pins, "no pin left behind");
            assertEquals(0, mapped.inflight, "no in-flight work left behind");
            assertSame(b, ((HandleTable) field(m, "handles")).lookup(h.id()));
            m.deallocate(h);
        }
        assertEquals(0, up.liveBytes(), "close gave every byte back");
    }
}
