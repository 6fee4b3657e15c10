package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.StreamHandle;

/**
 * A backend brings its own streams as a {@link StreamExecutor}: the engine's async copies run on
 * it, pinned until the work has run, and a refusal leaves no pin behind.
 */
class EngineStreamExecutorTest {
    static final long KiB = 1024;
    static final long MiB = 1024 * KiB;
    static final Device CPU = Device.cpu();
    static final StreamHandle OWN = new StreamHandle(7);

    /** Knows the default stream and stream 7; queues work until the test runs it, or refuses it. */
    static final class QueuedExecutor implements StreamExecutor {
        final List<Runnable> queued = new ArrayList<>();
        RuntimeException refusal;
        int closes;

        @Override
        public Device device() {
            return CPU;
        }

        @Override
        public boolean knows(StreamHandle stream) {
            return stream == null || stream.isDefault() || stream.equals(OWN);
        }

        @Override
        public CompletionStage<Void> submit(StreamHandle stream, Runnable work) {
            if (refusal != null) {
                throw refusal;
            }
            queued.add(work);
            return CompletableFuture.completedFuture(null);
        }

        void runAll() {
            queued.forEach(Runnable::run);
            queued.clear();
        }

        @Override
        public void close() {
            closes++;
        }
    }

    private final QueuedExecutor streams = new QueuedExecutor();

    private PooledMemoryManager manager() {
        MemoryManagerConfig config = MemoryManagerConfig.defaults().withAutoGc(false, 0.85).withPoolConfig(
                MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).alignment(256).build());
        return PooledMemoryManager.create(new ArenaUpstream(64 * MiB), config, PoolSettings.defaults().withThreadCache(0),
                streams);
    }

    private static void write(PooledMemoryManager m, MemoryHandle h, byte value) {
        MemorySegment view = m.mapMemory(h, MemoryAccess.READ_WRITE);
        view.fill(value);
        m.unmapMemory(h);
    }

    private static byte first(PooledMemoryManager m, MemoryHandle h) {
        MemorySegment view = m.mapMemory(h, MemoryAccess.READ_ONLY);
        byte b = view.get(ValueLayout.JAVA_BYTE, 0);
        m.unmapMemory(h);
        return b;
    }

    @Test
    void copyAsyncRunsOnTheBackendsExecutorAndKeepsItsBlocksUntilTheWorkRan() {
        try (PooledMemoryManager m = manager()) {
            MemoryHandle src = m.allocate(4 * KiB, CPU);
            MemoryHandle dst = m.allocate(4 * KiB, CPU);
            write(m, src, (byte) 0x5A);
            m.copyAsync(MemoryTransfer.of(src, dst, 4 * KiB), OWN);
            assertEquals(1, streams.queued.size(), "the work went to the backend's executor");
            m.deallocate(src);
            assertEquals(8 * KiB, m.memoryInfo().usedBytes(), "a freed source stays until the copy has run");
            streams.runAll();
            assertEquals(4 * KiB, m.memoryInfo().usedBytes(), "the copy's end gave the freed source back");
            assertEquals((byte) 0x5A, first(m, dst));
        }
    }

    @Test
    void aStreamTheExecutorDoesNotKnowIsRefusedBeforeAnyPin() {
        try (PooledMemoryManager m = manager()) {
            MemoryHandle src = m.allocate(4 * KiB, CPU);
            MemoryHandle dst = m.allocate(4 * KiB, CPU);
            InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class,
                    () -> m.copyAsync(MemoryTransfer.of(src, dst, 4 * KiB), new StreamHandle(9)));
            assertEquals("Unknown stream 9 on cpu:0: it is not a live stream of the StreamManager of cpu:0;"
                    + " create it there", e.getMessage());
            m.deallocate(src);
            m.deallocate(dst);
            assertEquals(0, m.memoryInfo().usedBytes(), "no pin was left");
            assertTrue(streams.queued.isEmpty());
        }
    }

    @Test
    void workTheExecutorRefusesLeavesNoPin() {
        try (PooledMemoryManager m = manager()) {
            MemoryHandle src = m.allocate(4 * KiB, CPU);
            MemoryHandle dst = m.allocate(4 * KiB, CPU);
            streams.refusal = new DeviceUnavailableException(CPU, "streams closed");
            DeviceUnavailableException e = assertThrows(DeviceUnavailableException.class,
                    () -> m.copyAsync(MemoryTransfer.of(src, dst, 4 * KiB), OWN));
            assertSame(streams.refusal, e, "the executor's refusal is what the caller hears");
            m.deallocate(src);
            m.deallocate(dst);
            assertEquals(0, m.memoryInfo().usedBytes(), "both blocks went back at once: no pin was left");
        }
    }

    @Test
    void theManagerLeavesTheExecutorItWasGivenOpen() {
        PooledMemoryManager m = manager();
        m.close();
        assertEquals(0, streams.closes, "the backend owns the executor it passed; it closes it itself");
    }
}
