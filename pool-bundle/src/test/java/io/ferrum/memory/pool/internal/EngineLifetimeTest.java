package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.ref.WeakReference;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.DeviceChunk;
import io.ferrum.memory.pool.ForwardingUpstream;
import io.ferrum.memory.pool.PoolSettings;

/** What a manager holds over its life: handle slots, manager numbers, and nothing after close (issue 13: 9, 11, 19). */
class EngineLifetimeTest {
    static final long KiB = 1024;
    static final long MiB = 1024 * KiB;
    static final Device CPU = Device.cpu();

    static MemoryManagerConfig config() {
        return MemoryManagerConfig.defaults().withAutoGc(false, 0.85).withPoolConfig(MemoryType.GENERAL,
                MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).alignment(256).build());
    }

    @Test
    void anAllocationRefusedByAFullHandleTableLeavesNoBlockBehind() {
        for (long cache : new long[] {0, PoolSettings.DEFAULT_THREAD_CACHE_BYTES}) {
            ArenaUpstream up = new ArenaUpstream(64 * MiB);
            try (PoolEngine m = new PoolEngine(up, config(), PoolSettings.defaults().withThreadCache(cache), null,
                    new HandleTable(2))) {
                m.allocate(4 * KiB, CPU);
                m.allocate(8 * KiB, CPU);
                for (int i = 0; i < 3; i++) {
                    MemoryException e = assertThrows(MemoryException.class, () -> m.allocate(16 * KiB, CPU));
                    assertTrue(e.getMessage().contains("no slot left"), e.getMessage());
                }
                MemoryInfo info = m.memoryInfo();
                assertEquals(12 * KiB, info.usedBytes(), "thread cache " + cache + ": refused blocks are free again");
                assertEquals(2, info.activeAllocations());
                assertEquals(2, m.handles().size());
            }
            assertEquals(0, up.liveBytes());
        }
    }

    @Test
    void managerNumbersAreNeverGivenTwiceAndRunningOutIsAClearError() {
        AtomicLong managers = new AtomicLong((1L << 20) - 3);
        HandleTable a = new HandleTable(16, managers);
        HandleTable b = new HandleTable(16, managers);
        assertNotEquals(a.managerId(), b.managerId());
        assertEquals((1L << 20) - 1, b.managerId());
        MemoryException e = assertThrows(MemoryException.class, () -> new HandleTable(16, managers));
        assertTrue(e.getMessage().contains("restart the JVM"), e.getMessage());
        assertThrows(MemoryException.class, () -> new HandleTable(16, managers), "and stays refused");
        assertEquals((1L << 20) - 1, managers.get());
    }

    @Test
    void aThreadThatOutlivesAClosedManagerKeepsNothingOfIt() throws Exception {
        AtomicReference<PoolEngine> shared = new AtomicReference<>(
                new PoolEngine(new ArenaUpstream(64 * MiB), config(), PoolSettings.defaults(), null));
        WeakReference<PoolEngine> ref = new WeakReference<>(shared.get());
        CountDownLatch used = new CountDownLatch(1);
        CountDownLatch end = new CountDownLatch(1);
        Thread worker = new Thread(() -> {
            allocateAndFreeInto(shared);
            used.countDown();
            try {
                end.await(60, TimeUnit.SECONDS);
            } catch (InterruptedException ignored) {
                Thread.currentThread().interrupt();
            }
        }, "outlives its manager");
        worker.start();
        try {
            assertTrue(used.await(30, TimeUnit.SECONDS));
            shared.getAndSet(null).close();
            for (int i = 0; i < 20 && ref.get() != null; i++) {
                System.gc();
                Thread.sleep(10);
            }
            assertNull(ref.get(), "the living thread's thread-local entry still reaches the closed manager");
        } finally {
            end.countDown();
            worker.join(30_000);
        }
    }

    /** Fills the calling thread's cache of {@code shared}'s manager; keeps no reference to it. */
    private static void allocateAndFreeInto(AtomicReference<PoolEngine> shared) {
        PoolEngine m = shared.get();
        List<MemoryHandle> hs = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            hs.add(m.allocate(4 * KiB, CPU));
        }
        hs.forEach(m::deallocate);
    }

    /**
     * An upstream over {@link ArenaUpstream} whose call number {@code failAt} (counting the calls a
     * construction makes: the device facts, the host segment of a chunk and reserve) throws.
     */
    private static final class FailingUpstream extends ForwardingUpstream {
        final ArenaUpstream arena;
        private final int failAt;
        private int calls;

        FailingUpstream(int failAt) {
            this(new ArenaUpstream(64 * MiB), failAt);
        }

        private FailingUpstream(ArenaUpstream arena, int failAt) {
            super(arena);
            this.arena = arena;
            this.failAt = failAt;
        }

        private void call(String what) {
            if (++calls == failAt) {
                throw new IllegalStateException("upstream call " + failAt + " (" + what + ") fails");
            }
        }

        @Override
        public Device device() {
            call("device");
            return real.device();
        }

        @Override
        public String backendName() {
            call("backendName");
            return real.backendName();
        }

        @Override
        public long physicalCapacity() {
            call("physicalCapacity");
            return real.physicalCapacity();
        }

        @Override
        public long chunkAlignment() {
            call("chunkAlignment");
            return real.chunkAlignment();
        }

        @Override
        public DeviceChunk reserve(long bytes) {
            call("reserve");
            return real.reserve(bytes);
        }

        @Override
        public Optional<MemorySegment> hostSegment(DeviceChunk chunk) {
            call("hostSegment");
            return real.hostSegment(chunk);
        }
    }

    /** @return how many stream managers of the JVM are open (their ids' devices, kept JVM-wide by StreamIds) */
    private static int openStreamManagers() {
        Object devices = System.getProperties().get("io.ferrum.memory.pool.streamManagerDevices");
        return devices == null ? 0 : ((Map<?, ?>) devices).size();
    }

    /**
     * A construction that fails after it took the coarse clock or made its own stream manager gave
     * back neither: the clock's thread ran for good (its count of users raised) and the stream
     * manager stayed open. Fails each call of the upstream in turn (the clock's use counted by the
     * clock's own users, the stream manager by the JVM's open ones), and then each reading of a
     * caller's clock, until the construction goes through.
     */
    @Test
    void aConstructionThatFailsAtAnyStepLeavesNothingBehind() {
        MemoryManagerConfig preAllocating = MemoryManagerConfig.defaults().withAutoGc(false, 0.85).withPoolConfig(
                MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(2 * MiB).growthIncrement(MiB)
                        .alignment(256).preAllocate(true).build());
        int clockUsers = CoarseClock.users();
        int streamManagers = openStreamManagers();
        List<String> left = new ArrayList<>();
        int failAt = 1;
        while (true) {
            FailingUpstream up = new FailingUpstream(failAt);
            PoolEngine m;
            try {
                m = new PoolEngine(up, preAllocating, PoolSettings.defaults(), null);
            } catch (RuntimeException refused) {
                if (CoarseClock.users() != clockUsers || openStreamManagers() != streamManagers
                        || up.arena.liveBytes() != 0) {
                    left.add("upstream call " + failAt + " (" + refused.getMessage() + "): clock users "
                            + CoarseClock.users() + " (before: " + clockUsers + "), open stream managers "
                            + openStreamManagers() + " (before: " + streamManagers + "), reserved "
                            + up.arena.liveBytes() + " bytes");
                    clockUsers = CoarseClock.users();
                    streamManagers = openStreamManagers();
                }
                failAt++;
                continue;
            }
            m.close();
            break;
        }
        assertTrue(failAt > 4, "the construction made only " + (failAt - 1) + " upstream calls");
        for (int clockAt = 1; ; clockAt++) {
            AtomicLong reads = new AtomicLong();
            int at = clockAt;
            PoolSettings settings = PoolSettings.defaults().withNanoClock(() -> {
                if (reads.incrementAndGet() == at) {
                    throw new IllegalStateException("clock reading " + at + " fails");
                }
                return System.nanoTime();
            });
            try {
                new PoolEngine(new ArenaUpstream(64 * MiB), preAllocating, settings, null).close();
                break;
            } catch (RuntimeException refused) {
                if (openStreamManagers() != streamManagers) {
                    left.add(refused.getMessage() + ": open stream managers " + openStreamManagers() + " (before: "
                            + streamManagers + ")");
                    streamManagers = openStreamManagers();
                }
            }
        }
        assertEquals(List.of(), left, "what failed constructions left behind");
    }
}
