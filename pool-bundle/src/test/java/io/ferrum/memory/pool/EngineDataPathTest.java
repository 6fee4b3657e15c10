package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.StreamHandle;

/**
 * The data path: {@code write}/{@code read} from and to any segment (checked byte for byte), their
 * async forms on a stream, and {@code withMapped} views (confined, dead after the action, read-only
 * when asked, nested, staged on memory the host cannot address); bad inputs change nothing.
 */
class EngineDataPathTest extends EngineTestSupport {

    private static byte[] random(int n, long seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    @Test
    void writeAndReadMoveBytesFromAndToEveryKindOfSegment() {
        for (boolean hostAddressable : new boolean[] {true, false}) {
            Device d = hostAddressable ? CPU : Device.cuda(0);
            PooledMemoryManager m = manager(new ArenaUpstream(d, 64 * MiB, hostAddressable), pool(MiB, MiB));
            MemoryHandle h = m.allocate(10_000, d);
            byte[] data = random(4000, 1);
            m.write(h, 100, MemorySegment.ofArray(data));
            try (Arena arena = Arena.ofConfined()) {
                MemorySegment nativeDst = arena.allocate(4000);
                m.read(h, 100, nativeDst);
                assertArrayEquals(data, nativeDst.toArray(ValueLayout.JAVA_BYTE), "heap -> block -> native");

                ByteBuffer direct = ByteBuffer.allocateDirect(10_000);
                m.read(h, 0, MemorySegment.ofBuffer(direct));
                byte[] whole = new byte[10_000];
                direct.get(whole);
                for (int i = 0; i < 4000; i++) {
                    assertEquals(data[i], whole[100 + i], "byte " + i + " at offset 100");
                }
                // From native memory, into the block's last bytes, and back into a heap buffer.
                MemorySegment tail = arena.allocate(16);
                tail.fill((byte) 0x5A);
                m.write(h, 10_000 - 16, tail);
                ByteBuffer heap = ByteBuffer.allocate(16);
                m.read(h, 10_000 - 16, MemorySegment.ofBuffer(heap));
                for (int i = 0; i < 16; i++) {
                    assertEquals(0x5A, heap.get(i), hostAddressable + ": tail byte " + i);
                }
            }
            m.write(h, 10_000, MemorySegment.ofArray(new byte[0])); // zero bytes at the very end: a valid no-op
        }
    }

    @Test
    void badWritesAndReadsAreRefusedAndChangeNothing() throws Exception {
        PooledMemoryManager m = manager(new ArenaUpstream(64 * MiB), pool(MiB, MiB));
        MemoryHandle h = m.allocate(1000, CPU);
        write(m, h, (byte) 4);
        MemorySegment eight = MemorySegment.ofArray(new byte[8]);
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.write(h, 0, null));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.read(h, 0, null));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.write(h, -1, eight));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.write(h, 993, eight));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.read(h, Long.MAX_VALUE, eight));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.read(h, 0, eight.asReadOnly()));
        MemorySegment closed;
        try (Arena arena = Arena.ofConfined()) {
            closed = arena.allocate(8);
        }
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.write(h, 0, closed));
        MemorySegment[] foreign = new MemorySegment[1];
        CountDownLatch made = new CountDownLatch(1);
        CountDownLatch done = new CountDownLatch(1);
        Thread owner = Thread.ofPlatform().start(() -> {
            try (Arena arena = Arena.ofConfined()) {
                foreign[0] = arena.allocate(8);
                made.countDown();
                done.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        made.await();
        InvalidMemoryRequestException other = assertRejected(m, InvalidMemoryRequestException.class,
                () -> m.write(h, 0, foreign[0]));
        assertTrue(other.getMessage().contains("another thread"), other.getMessage());
        done.countDown();
        owner.join();
        assertRejected(m, InvalidHandleException.class, () -> m.write(null, 0, eight));
        assertRejected(m, InvalidHandleException.class, () -> m.read(new MemoryHandle(0), 0, eight));
        PooledMemoryManager peer = manager(new ArenaUpstream(64 * MiB), pool(MiB, MiB));
        MemoryHandle foreignHandle = peer.allocate(1000, CPU);
        assertRejected(m, InvalidHandleException.class, () -> m.write(foreignHandle, 0, eight));
        MemoryHandle freed = m.allocate(1000, CPU);
        m.deallocate(freed);
        assertRejected(m, InvalidHandleException.class, () -> m.read(freed, 0, MemorySegment.ofArray(new byte[8])));
        assertContent(m, h, (byte) 4);
        InvalidMemoryRequestException range = assertThrows(InvalidMemoryRequestException.class,
                () -> m.write(h, 993, eight));
        assertTrue(range.getMessage().contains("8 bytes at offset 993") && range.getMessage().contains("1000 bytes"),
                range.getMessage());
    }

    @Test
    void asyncWritesAndReadsRunInStreamOrderAndRefuseBadArgumentsAtOnce() throws Exception {
        HostStreamManager streams = new HostStreamManager(CPU);
        toClose.add(streams);
        PooledMemoryManager m = PooledMemoryManager.create(new ArenaUpstream(64 * MiB), config(pool(4 * MiB, MiB)),
                PoolSettings.defaults(), streams);
        toClose.add(0, m);
        MemoryHandle h = m.allocate(MiB, CPU);
        StreamHandle s = streams.createStream(CPU);
        byte[] first = random((int) MiB, 2);
        byte[] second = random(4096, 3);
        byte[] back = new byte[(int) MiB];
        // Ordered on s: the first write, the second over part of it, then the read sees both.
        m.writeAsync(h, 0, MemorySegment.ofArray(first), s);
        m.writeAsync(h, 8192, MemorySegment.ofArray(second), s);
        CompletableFuture<Void> read = m.readAsync(h, 0, MemorySegment.ofArray(back), s).toCompletableFuture();
        read.get(30, TimeUnit.SECONDS);
        System.arraycopy(second, 0, first, 8192, 4096);
        assertArrayEquals(first, back);

        assertRejected(m, InvalidMemoryRequestException.class,
                () -> m.writeAsync(h, 0, MemorySegment.ofArray(second), new StreamHandle(999)));
        assertRejected(m, InvalidMemoryRequestException.class,
                () -> m.readAsync(h, MiB - 1, MemorySegment.ofArray(new byte[2]), s));
        try (Arena confined = Arena.ofConfined()) {
            InvalidMemoryRequestException e = assertRejected(m, InvalidMemoryRequestException.class,
                    () -> m.writeAsync(h, 0, confined.allocate(8), s));
            assertTrue(e.getMessage().contains("confined"), e.getMessage());
        }
        assertRejected(m, InvalidHandleException.class, () -> m.readAsync(null, 0, MemorySegment.ofArray(back), s));
        m.writeAsync(h, 0, MemorySegment.ofArray(new byte[0]), s).toCompletableFuture().get(30, TimeUnit.SECONDS);
    }

    @Test
    void aViewOfWithMappedIsTheBlockConfinedToItsThreadAndDeadAfterTheAction() throws Exception {
        PooledMemoryManager m = manager(new ArenaUpstream(64 * MiB), pool(MiB, MiB));
        MemoryHandle h = m.allocate(100, CPU);
        AtomicReference<MemorySegment> escaped = new AtomicReference<>();
        AtomicReference<Throwable> fromOtherThread = new AtomicReference<>();
        long size = m.withMapped(h, MemoryAccess.READ_WRITE, view -> {
            view.set(ValueLayout.JAVA_BYTE, 7, (byte) 42);
            escaped.set(view);
            Thread t = Thread.ofPlatform().start(() -> {
                try {
                    view.get(ValueLayout.JAVA_BYTE, 7);
                } catch (Throwable e) {
                    fromOtherThread.set(e);
                }
            });
            try {
                t.join();
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
            return view.byteSize();
        });
        assertEquals(100, size, "the view covers exactly the block");
        assertTrue(fromOtherThread.get() instanceof WrongThreadException, String.valueOf(fromOtherThread.get()));
        assertThrows(IllegalStateException.class, () -> escaped.get().get(ValueLayout.JAVA_BYTE, 7));
        byte[] one = new byte[1];
        m.read(h, 7, MemorySegment.ofArray(one));
        assertEquals(42, one[0], "what the view wrote is in the block");

        // Read-only views reject writes; the action's exception reaches the caller, and the view dies with it.
        assertThrows(IllegalArgumentException.class, () -> m.withMapped(h, MemoryAccess.READ_ONLY,
                view -> {
                    view.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
                    return null;
                }));
        IllegalStateException thrown = new IllegalStateException("the action's own");
        assertSame(thrown, assertThrows(IllegalStateException.class, () -> m.withMapped(h, MemoryAccess.READ_WRITE,
                view -> {
                    escaped.set(view);
                    throw thrown;
                })));
        assertThrows(IllegalStateException.class, () -> escaped.get().get(ValueLayout.JAVA_BYTE, 0));

        // Nested, on the same block and on another.
        MemoryHandle other = m.allocate(50, CPU);
        int sum = m.withMapped(h, MemoryAccess.READ_ONLY, outer -> m.withMapped(h, MemoryAccess.READ_WRITE,
                inner -> m.withMapped(other, MemoryAccess.READ_WRITE, third -> {
                    inner.set(ValueLayout.JAVA_BYTE, 8, (byte) 1);
                    third.set(ValueLayout.JAVA_BYTE, 0, (byte) 2);
                    return outer.get(ValueLayout.JAVA_BYTE, 7) + outer.get(ValueLayout.JAVA_BYTE, 8);
                })));
        assertEquals(43, sum, "nested views of one block see each other's bytes");
        assertEquals(2, (byte) m.withMapped(other, MemoryAccess.READ_ONLY, v -> v.get(ValueLayout.JAVA_BYTE, 0)));
    }

    @Test
    void withMappedRefusesNullsAndDeadHandlesWithoutRunningTheAction() {
        PooledMemoryManager m = manager(new ArenaUpstream(64 * MiB), pool(MiB, MiB));
        MemoryHandle h = m.allocate(100, CPU);
        boolean[] ran = new boolean[1];
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.withMapped(h, null, v -> ran[0] = true));
        assertRejected(m, InvalidMemoryRequestException.class, () -> m.withMapped(h, MemoryAccess.READ_ONLY, null));
        assertRejected(m, InvalidHandleException.class, () -> m.withMapped(null, MemoryAccess.READ_ONLY, v -> ran[0] = true));
        MemoryHandle freed = m.allocate(100, CPU);
        m.deallocate(freed);
        assertRejected(m, InvalidHandleException.class, () -> m.withMapped(freed, MemoryAccess.READ_ONLY, v -> ran[0] = true));
        assertEquals(false, ran[0]);
    }

    @Test
    void aBlockInsideAnActionCannotBeFreedFromTheActionOrFromAnotherThread() throws Exception {
        PooledMemoryManager m = manager(new ArenaUpstream(64 * MiB), pool(MiB, MiB));
        MemoryHandle h = m.allocate(4096, CPU);
        write(m, h, (byte) 6);
        m.withMapped(h, MemoryAccess.READ_WRITE, view -> {
            InvalidMemoryRequestException inside = assertRejected(m, InvalidMemoryRequestException.class,
                    () -> m.deallocate(h));
            assertTrue(inside.getMessage().contains("withMapped"), inside.getMessage());
            AtomicReference<Throwable> outside = new AtomicReference<>();
            Thread t = Thread.ofPlatform().start(() -> {
                try {
                    m.deallocate(h);
                } catch (Throwable e) {
                    outside.set(e);
                }
            });
            try {
                t.join();
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
            assertTrue(outside.get() instanceof InvalidMemoryRequestException, String.valueOf(outside.get()));
            assertEquals((byte) 6, view.get(ValueLayout.JAVA_BYTE, 0), "the view still reads the block");
            return null;
        });
        assertTrue(m.owns(h), "refused frees changed nothing");
        assertContent(m, h, (byte) 6);
        m.deallocate(h);
        assertEquals(0, m.memoryInfo().activeAllocations());
    }

    @Test
    void onMemoryTheHostCannotAddressAViewIsAStagingCopyWrittenBackAfterAWritingAction() {
        Device gpu = Device.cuda(0);
        PooledMemoryManager m = manager(new ArenaUpstream(gpu, 64 * MiB, false), pool(MiB, MiB));
        MemoryHandle h = m.allocate(1000, gpu);
        write(m, h, (byte) 3);
        m.withMapped(h, MemoryAccess.READ_ONLY, view -> {
            assertEquals((byte) (3 + 10 * 31), view.get(ValueLayout.JAVA_BYTE, 10), "the staging copy holds the block");
            return null;
        });
        m.withMapped(h, MemoryAccess.READ_WRITE, view -> view.fill((byte) 9));
        byte[] back = new byte[1000];
        m.read(h, 0, MemorySegment.ofArray(back));
        for (byte b : back) {
            assertEquals(9, b, "a READ_WRITE action is written back");
        }
        assertThrows(IllegalStateException.class, () -> m.withMapped(h, MemoryAccess.READ_WRITE, view -> {
            view.fill((byte) 1);
            throw new IllegalStateException("failed half way");
        }));
        m.read(h, 0, MemorySegment.ofArray(back));
        assertEquals(9, back[0], "an action that throws is not written back");
    }
}
