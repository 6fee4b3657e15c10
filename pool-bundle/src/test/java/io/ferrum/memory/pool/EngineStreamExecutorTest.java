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
        /** A buggy executor: keeps the work it refuses, and runs it with the rest later. */
        boolean keepRefusedWork;
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
                if (keepRefusedWork) {
                    queued.add(work);
                }
                throw refusal;
            }
            if (!knows(stream)) {
                throw new InvalidMemoryRequestException("Stream " + stream.id() + " was never created by the test executor");
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
            assertEquals("Stream 9 was never created by the test executor", e.getMessage(),
                    "the executor, which knows its streams, says why it refuses this one");
            m.deallocate(src);
            m.deallocate(dst);
            assertEquals(0, m.memoryInfo().usedBytes(), "no pin was left");
            assertTrue(streams.queued.isEmpty());
        }
    }

    /**
     * A refused stream is named, with the reason: a stream of another device's manager (naming that
     * device), a destroyed one, one never created. Before, each got the same generic message.
     */
    @Test
    void aRefusedStreamIsNamedWithWhyItIsRefused() {
        try (HostStreamManager own = new HostStreamManager(CPU);
             HostStreamManager other = new HostStreamManager(Device.cpu(1));
             PooledMemoryManager m = PooledMemoryManager.create(new ArenaUpstream(64 * MiB),
                     MemoryManagerConfig.defaults(), PoolSettings.defaults().withThreadCache(0), own)) {
            MemoryHandle src = m.allocate(4 * KiB, CPU);
            MemoryHandle dst = m.allocate(4 * KiB, CPU);
            MemorySegment host = java.lang.foreign.Arena.ofAuto().allocate(16);
            StreamHandle foreign = other.createStream(Device.cpu(1));
            StreamHandle destroyed = own.createStream(CPU);
            own.destroyStream(destroyed);
            StreamHandle never = new StreamHandle(destroyed.id() + 1);

            String why = assertThrows(InvalidMemoryRequestException.class,
                    () -> m.copyAsync(MemoryTransfer.of(src, dst, 4 * KiB), foreign)).getMessage();
            assertTrue(why.startsWith("Stream " + foreign.id() + " belongs to the stream manager of cpu:1"), why);
            why = assertThrows(InvalidMemoryRequestException.class,
                    () -> m.writeAsync(dst, 0, host, destroyed)).getMessage();
            assertEquals("The stream " + destroyed.id() + " on cpu:0 was already destroyed", why);
            why = assertThrows(InvalidMemoryRequestException.class,
                    () -> m.readAsync(src, 0, host, never)).getMessage();
            assertTrue(why.startsWith("Unknown stream " + never.id() + " on cpu:0: it was never created here"), why);

            m.deallocate(src);
            m.deallocate(dst);
            assertEquals(0, m.memoryInfo().usedBytes(), "no pin was left");
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

    /**
     * An executor that runs default-stream work on the caller's thread and lets the work's exception
     * out of submit (no try/catch): the work had unpinned its block, and the engine, hearing a
     * refusal, unpinned it again, taking the pin of another copy still queued on the block.
     */
    @Test
    void anExecutorThatRethrowsTheWorksExceptionCostsNoOtherCopyItsPin() {
        // The host segment of the write: the executor closes its arena just before it runs the work,
        // after the engine's checks, so that the work fails (IllegalStateException).
        java.lang.foreign.Arena arena = java.lang.foreign.Arena.ofShared();
        MemorySegment host = arena.allocate(4 * KiB);
        StreamExecutor rethrowing = new StreamExecutor() {
            @Override
            public Device device() {
                return CPU;
            }

            @Override
            public boolean knows(StreamHandle stream) {
                return streams.knows(stream);
            }

            @Override
            public CompletionStage<Void> submit(StreamHandle stream, Runnable work) {
                if (stream == null || stream.isDefault()) {
                    if (arena.scope().isAlive()) {
                        arena.close();
                    }
                    work.run(); // the work's exception goes out of submit
                    return CompletableFuture.completedFuture(null);
                }
                return streams.submit(stream, work);
            }

            @Override
            public void close() {
            }
        };
        MemoryManagerConfig config = MemoryManagerConfig.defaults().withAutoGc(false, 0.85).withPoolConfig(
                MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).alignment(256).build());
        try (PooledMemoryManager m = PooledMemoryManager.create(new ArenaUpstream(64 * MiB), config,
                PoolSettings.defaults().withThreadCache(0), rethrowing)) {
            MemoryHandle src = m.allocate(4 * KiB, CPU);
            MemoryHandle dst = m.allocate(4 * KiB, CPU);
            write(m, src, (byte) 0x5A);
            m.copyAsync(MemoryTransfer.of(src, dst, 4 * KiB), OWN); // queued: pins src and dst
            assertThrows(IllegalStateException.class, () -> m.writeAsync(src, 0, host, StreamHandle.DEFAULT));
            m.deallocate(src);
            assertEquals(8 * KiB, m.memoryInfo().usedBytes(), "the queued copy still pins the freed source");
            streams.runAll();
            assertEquals((byte) 0x5A, first(m, dst), "the queued copy read the source's own bytes");
            assertEquals(4 * KiB, m.memoryInfo().usedBytes(), "the copy's end gave the freed source back, once");
        }
    }

    /**
     * An executor that throws from submit and runs the work later anyway: the engine, told the work
     * was refused, had released the pins, so the late copy wrote into a block freed meanwhile and
     * taken by its next owner.
     */
    @Test
    void workAnExecutorRefusedAndRunsLaterTouchesNoBlock() {
        try (PooledMemoryManager m = manager()) {
            MemoryHandle src = m.allocate(4 * KiB, CPU);
            MemoryHandle dst = m.allocate(4 * KiB, CPU);
            write(m, src, (byte) 0x5A);
            streams.refusal = new DeviceUnavailableException(CPU, "streams closed");
            streams.keepRefusedWork = true;
            assertThrows(DeviceUnavailableException.class, () -> m.copyAsync(MemoryTransfer.of(src, dst, 4 * KiB), OWN));
            m.deallocate(dst);
            MemoryHandle next = m.allocate(4 * KiB, CPU);
            write(m, next, (byte) 0x11);
            streams.runAll();
            assertEquals((byte) 0x11, first(m, next), "the refused copy never ran into the block's next owner");
            assertEquals(8 * KiB, m.memoryInfo().usedBytes(), "src and next: no pin was taken twice");
        }
    }

    @Test
    void theManagerLeavesTheExecutorItWasGivenOpen() {
        PooledMemoryManager m = manager();
        m.close();
        assertEquals(0, streams.closes, "the backend owns the executor it passed; it closes it itself");
    }
}
