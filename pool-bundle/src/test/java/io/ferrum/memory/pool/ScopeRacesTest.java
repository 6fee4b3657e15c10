package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;

/**
 * Scopes ({@code withMapped}, {@code read}, {@code write}) pin a block without the pool lock. Each test
 * forces one interleaving with a latch inside an action or a paused upstream call: defragmentation
 * meets a scope, a scope meets a block being moved, a close meets a scope, a stale handle meets a
 * reused block.
 */
class ScopeRacesTest extends EngineTestSupport {

    private PooledMemoryManager hooked(HookedUpstream up) {
        PooledMemoryManager m = PooledMemoryManager.create(up, config(pool(MiB, MiB)),
                PoolSettings.defaults().withThreadCache(0), null);
        toClose.add(m);
        return m;
    }

    private static void await(CountDownLatch latch) {
        try {
            assertTrue(latch.await(30, TimeUnit.SECONDS), "latch never opened");
        } catch (InterruptedException e) {
            throw new AssertionError(e);
        }
    }

    /** Waits until {@code t} parks (on a lock or a condition): it is blocked where the test wants it. */
    private static void awaitParked(Thread t) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (t.getState() != Thread.State.WAITING && t.getState() != Thread.State.TIMED_WAITING) {
            assertTrue(t.isAlive(), "the thread ended instead of waiting");
            assertTrue(System.nanoTime() < deadline, "the thread never waited");
            Thread.sleep(1);
        }
    }

    private static byte[] read(PooledMemoryManager m, MemoryHandle h, int n) {
        byte[] out = new byte[n];
        m.read(h, 0, MemorySegment.ofArray(out));
        return out;
    }

    @Test
    void defragmentationDoesNotMoveABlockWhileAnActionUsesItsView() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = hooked(up);
        MemoryHandle hole = m.allocate(4096, CPU);
        MemoryHandle b = m.allocate(4096, CPU);
        m.deallocate(hole); // b could slide down into the hole
        CountDownLatch inside = new CountDownLatch(1);
        CountDownLatch go = new CountDownLatch(1);
        Thread t = Thread.ofPlatform().start(() -> m.withMapped(b, MemoryAccess.READ_WRITE, view -> {
            view.asSlice(0, 2048).fill((byte) 1);
            inside.countDown();
            await(go);
            // If the block had moved, these bytes would land in free memory, not in b.
            view.asSlice(2048, 2048).fill((byte) 2);
            return null;
        }));
        await(inside);
        DefragmentationStats during = m.defragment(CPU).toCompletableFuture().get(30, TimeUnit.SECONDS);
        assertEquals(0, during.blocksMoved(), "a block inside an action is not moved");
        go.countDown();
        t.join();
        byte[] bytes = read(m, b, 4096);
        for (int i = 0; i < 4096; i++) {
            assertEquals(i < 2048 ? 1 : 2, bytes[i], "byte " + i);
        }
        assertEquals(1, m.defragment(CPU).toCompletableFuture().get(30, TimeUnit.SECONDS).blocksMoved(),
                "once the action ended the block moves, its bytes with it");
        bytes = read(m, b, 4096);
        assertEquals(1, bytes[0]);
        assertEquals(2, bytes[4095]);
    }

    @Test
    void aWriteThatMeetsABlockBeingMovedWaitsAndLandsInItsNewPlace() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = hooked(up);
        MemoryHandle hole = m.allocate(4096, CPU);
        MemoryHandle b = m.allocate(4096, CPU);
        m.write(b, 0, MemorySegment.ofArray(new byte[4096]));
        m.deallocate(hole);
        long oldAddress = m.withMapped(b, MemoryAccess.READ_ONLY, MemorySegment::address);
        HookedUpstream.Pause copy = up.pauseNext(HookedUpstream.Call.COPY);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread defrag = Thread.ofPlatform().start(() -> m.defragment(CPU));
        copy.awaitArrival(); // b is claimed for the move, its bytes half way
        AtomicBoolean wrote = new AtomicBoolean();
        byte[] pattern = new byte[4096];
        java.util.Arrays.fill(pattern, (byte) 7);
        Thread writer = Thread.ofPlatform().start(() -> {
            try {
                m.write(b, 0, MemorySegment.ofArray(pattern));
                wrote.set(true);
            } catch (Throwable e) {
                failure.set(e);
            }
        });
        awaitParked(writer);
        assertFalse(wrote.get(), "a write into a block being moved must wait for the move");
        // Where b was when the move began: the write must not have landed there (it waits for the move).
        MemorySegment oldPlace = MemorySegment.ofAddress(oldAddress).reinterpret(4096);
        for (int i = 0; i < 4096; i++) {
            assertEquals(0, oldPlace.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i), "byte " + i + " written mid-move");
        }
        copy.release();
        defrag.join();
        writer.join();
        assertNull(failure.get());
        assertTrue(wrote.get());
        byte[] bytes = read(m, b, 4096);
        for (int i = 0; i < 4096; i++) {
            assertEquals(7, bytes[i], "byte " + i + " of the moved block");
        }
    }

    @Test
    void closeWaitsForAnActionAndReleasesTheMemoryWhenItEnds() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = hooked(up);
        MemoryHandle b = m.allocate(4096, CPU);
        CountDownLatch inside = new CountDownLatch(1);
        CountDownLatch go = new CountDownLatch(1);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread action = Thread.ofPlatform().start(() -> {
            try {
                m.withMapped(b, MemoryAccess.READ_WRITE, view -> {
                    inside.countDown();
                    await(go);
                    view.fill((byte) 3); // the memory must still be the block's
                    return null;
                });
            } catch (Throwable e) {
                failure.set(e);
            }
        });
        await(inside);
        Thread closer = Thread.ofPlatform().start(m::close);
        awaitParked(closer);
        assertTrue(up.liveBytes() > 0, "close released the memory under a running action");
        go.countDown();
        action.join();
        closer.join();
        assertNull(failure.get());
        assertEquals(0, up.liveBytes(), "the last scope to leave let the close release everything");
        assertEquals("", up.violations.toString());
    }

    @Test
    void aStaleHandleNeverReachesTheBlockThatReusedItsMemory() {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = hooked(up);
        MemoryHandle old = m.allocate(4096, CPU);
        m.deallocate(old);
        MemoryHandle now = m.allocate(4096, CPU);
        byte[] mine = new byte[4096];
        java.util.Arrays.fill(mine, (byte) 5);
        m.write(now, 0, MemorySegment.ofArray(mine));
        assertThrows(InvalidHandleException.class, () -> m.write(old, 0, MemorySegment.ofArray(new byte[16])));
        assertThrows(InvalidHandleException.class, () -> m.withMapped(old, MemoryAccess.READ_WRITE, v -> v.fill((byte) 0)));
        assertEquals(5, read(m, now, 4096)[0], "the new owner's bytes are untouched");
        m.deallocate(now); // no scope stayed behind to refuse this
        assertEquals(0, m.memoryInfo().activeAllocations());
    }

    @Test
    void aFreeDuringASynchronousCopyIsRefusedAndTheCopyCompletes() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = hooked(up);
        MemoryHandle a = m.allocate(4096, CPU);
        MemoryHandle b = m.allocate(4096, CPU);
        write(m, a, (byte) 8);
        HookedUpstream.Pause copy = up.pauseNext(HookedUpstream.Call.COPY);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        Thread copier = Thread.ofPlatform().start(() -> {
            try {
                m.copy(a, b, 4096, 0, 0);
            } catch (Throwable e) {
                failure.set(e);
            }
        });
        copy.awaitArrival();
        assertRejected(m, io.ferrum.memory.api.InvalidMemoryRequestException.class, () -> m.deallocate(a));
        assertRejected(m, io.ferrum.memory.api.InvalidMemoryRequestException.class, () -> m.deallocate(b));
        copy.release();
        copier.join();
        assertNull(failure.get());
        assertContent(m, b, (byte) 8);
        m.deallocate(a);
        m.deallocate(b);
        assertEquals(0, m.memoryInfo().activeAllocations());
    }
}
