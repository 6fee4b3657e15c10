package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryTransfer;

/**
 * {@code copyToPeer}: a copy from one device's block into another device's block of the same
 * backend, device to device through the source's upstream (between two GPUs, a peer copy), with
 * both blocks held as a copy within one manager holds them. The upstreams hide their memory from the
 * engine, as a GPU's do.
 */
class EnginePeerCopyTest extends EngineTestSupport {
    private static final Device D1 = Device.cpu(1);
    private static final Device D2 = Device.cpu(2);

    private final Map<Device, PooledMemoryManager> running = new ConcurrentHashMap<>();
    private final PoolSettings settings = PoolSettings.defaults().withPeers(running::get);

    private PooledMemoryManager peer(DeviceUpstream up) {
        PooledMemoryManager m = PooledMemoryManager.create(up, config(pool(MiB, MiB)), settings, null);
        toClose.add(m);
        running.put(up.device(), m);
        return m;
    }

    private static void fill(PooledMemoryManager m, MemoryHandle h, long size, int seed) {
        try (Arena a = Arena.ofConfined()) {
            MemorySegment s = a.allocate(size);
            for (long i = 0; i < size; i++) {
                s.set(ValueLayout.JAVA_BYTE, i, (byte) (seed + i * 7));
            }
            m.write(h, 0, s);
        }
    }

    private static byte[] bytes(PooledMemoryManager m, MemoryHandle h, long size) {
        byte[] out = new byte[(int) size];
        m.read(h, 0, MemorySegment.ofArray(out));
        return out;
    }

    @Test
    void theBytesGoDeviceToDeviceIntoThePeersBlockAndNowhereElse() {
        PooledMemoryManager a = peer(new ArenaUpstream(D1, 64 * MiB, false));
        PooledMemoryManager b = peer(new ArenaUpstream(D2, 64 * MiB, false));
        MemoryHandle src = a.allocate(8192, D1);
        MemoryHandle dst = b.allocate(8192, D2);
        fill(a, src, 8192, 1);
        fill(b, dst, 8192, 100);
        byte[] before = bytes(b, dst, 8192);

        assertTrue(a.copyToPeer(new MemoryTransfer(src, dst, 3000, 100, 50), b));

        byte[] srcBytes = bytes(a, src, 8192);
        byte[] after = bytes(b, dst, 8192);
        for (int i = 0; i < 8192; i++) {
            byte want = i >= 50 && i < 3050 ? srcBytes[i - 50 + 100] : before[i];
            assertEquals(want, after[i], "byte " + i + " of the destination");
        }
        assertEquals(8192 * 2, a.memoryInfo().usedBytes() + b.memoryInfo().usedBytes(), "no block was added");
    }

    @Test
    void aCopyToItselfIsACopyAndAManagerItDoesNotKnowGetsFalseWithNothingChanged() {
        PooledMemoryManager a = peer(new ArenaUpstream(D1, 64 * MiB, false));
        MemoryHandle one = a.allocate(4096, D1);
        MemoryHandle two = a.allocate(4096, D1);
        fill(a, one, 4096, 3);
        assertTrue(a.copyToPeer(MemoryTransfer.of(one, two, 4096), a));
        assertEquals(java.util.Arrays.toString(bytes(a, one, 4096)), java.util.Arrays.toString(bytes(a, two, 4096)));

        // A manager of the same kind the backend's lookup does not answer (another backend's, say).
        PooledMemoryManager stranger = manager(new ArenaUpstream(D2, 64 * MiB, false), config(pool(MiB, MiB)),
                PoolSettings.defaults());
        MemoryHandle far = stranger.allocate(4096, D2);
        fill(stranger, far, 4096, 9);
        byte[] farBefore = bytes(stranger, far, 4096);
        assertFalse(a.copyToPeer(MemoryTransfer.of(one, far, 4096), stranger));
        assertEquals(java.util.Arrays.toString(farBefore), java.util.Arrays.toString(bytes(stranger, far, 4096)));

        // A closed peer, still answered by a stale lookup: false, nothing resolved.
        PooledMemoryManager b = peer(new ArenaUpstream(D2, 64 * MiB, false));
        b.close();
        assertFalse(a.copyToPeer(MemoryTransfer.of(one, new MemoryHandle(12345), 4096), b));
    }

    @Test
    void badInputsAreRefusedNamingTheValueAndWriteNothing() {
        PooledMemoryManager a = peer(new ArenaUpstream(D1, 64 * MiB, false));
        PooledMemoryManager b = peer(new ArenaUpstream(D2, 64 * MiB, false));
        MemoryHandle src = a.allocate(4096, D1);
        MemoryHandle dst = b.allocate(4096, D2);
        MemoryHandle freed = a.allocate(4096, D1);
        a.deallocate(freed);
        fill(a, src, 4096, 5);
        fill(b, dst, 4096, 50);
        byte[] before = bytes(b, dst, 4096);

        InvalidHandleException deadSource = assertRejected(b, InvalidHandleException.class,
                () -> a.copyToPeer(MemoryTransfer.of(freed, dst, 16), b));
        assertEquals(freed, deadSource.handle());
        // The destination handle is checked against the peer's table: a handle of the source's manager is not one.
        InvalidHandleException foreign = assertRejected(b, InvalidHandleException.class,
                () -> a.copyToPeer(MemoryTransfer.of(src, src, 16), b));
        assertEquals(src, foreign.handle());
        assertTrue(foreign.getMessage().contains(D2.toString()), foreign.getMessage());
        InvalidMemoryRequestException outside = assertRejected(b, InvalidMemoryRequestException.class,
                () -> a.copyToPeer(new MemoryTransfer(src, dst, 100, 0, 4000), b));
        assertTrue(outside.getMessage().contains("destination") && outside.getMessage().contains("4000"),
                outside.getMessage());
        InvalidMemoryRequestException longSource = assertRejected(b, InvalidMemoryRequestException.class,
                () -> a.copyToPeer(new MemoryTransfer(src, dst, 4096, 1, 0), b));
        assertTrue(longSource.getMessage().contains("source"), longSource.getMessage());
        InvalidMemoryRequestException noTarget = assertRejected(a, InvalidMemoryRequestException.class,
                () -> a.copyToPeer(MemoryTransfer.of(src, dst, 16), null));
        assertTrue(noTarget.getMessage().contains("target"), noTarget.getMessage());
        assertRejected(a, InvalidMemoryRequestException.class, () -> a.copyToPeer(null, b));

        assertEquals(java.util.Arrays.toString(before), java.util.Arrays.toString(bytes(b, dst, 4096)));
        a.close();
        assertRejected(b, DeviceUnavailableException.class, () -> a.copyToPeer(MemoryTransfer.of(src, dst, 16), b));
    }

    /**
     * Inside a withMapped action on memory the CPU cannot address, the action's staging copy is the
     * block for its thread. A device copy would read the device's older bytes and its destination
     * would be erased by the action's write-back, so the peer copy answers false, changing nothing:
     * the caller stages the bytes through read and write, which use that copy.
     */
    @Test
    void aBlockStagedByTheCallersActionIsNotPeerCopied() {
        PooledMemoryManager a = peer(new ArenaUpstream(D1, 64 * MiB, false));
        PooledMemoryManager b = peer(new ArenaUpstream(D2, 64 * MiB, false));
        MemoryHandle src = a.allocate(4096, D1);
        MemoryHandle dst = b.allocate(4096, D2);
        fill(a, src, 4096, 1);
        fill(b, dst, 4096, 2);
        byte[] srcBefore = bytes(a, src, 4096);
        byte[] dstBefore = bytes(b, dst, 4096);
        boolean intoStaged = b.withMapped(dst, io.ferrum.memory.api.MemoryAccess.READ_WRITE,
                view -> a.copyToPeer(MemoryTransfer.of(src, dst, 4096), b));
        assertFalse(intoStaged, "destination staged");
        boolean fromStaged = a.withMapped(src, io.ferrum.memory.api.MemoryAccess.READ_ONLY,
                view -> a.copyToPeer(MemoryTransfer.of(src, dst, 4096), b));
        assertFalse(fromStaged, "source staged");
        assertEquals(java.util.Arrays.toString(dstBefore), java.util.Arrays.toString(bytes(b, dst, 4096)));
        assertEquals(java.util.Arrays.toString(srcBefore), java.util.Arrays.toString(bytes(a, src, 4096)));
        // Outside any action, and inside one on another block, the copy is a peer copy.
        MemoryHandle other = a.allocate(4096, D1);
        boolean elsewhere = a.withMapped(other, io.ferrum.memory.api.MemoryAccess.READ_WRITE,
                view -> a.copyToPeer(MemoryTransfer.of(src, dst, 4096), b));
        assertTrue(elsewhere, "inside an action on another block");
        assertEquals(java.util.Arrays.toString(srcBefore), java.util.Arrays.toString(bytes(b, dst, 4096)));
    }

    /**
     * The same with the manager itself as target, where the engine copies as {@code copy} does: a
     * block staged by the caller's action answers false there too, as the contract says. It answered
     * true: the copy into the action's block went to the device and was erased by the action's
     * write-back, and the copy from it read the device's bytes, not the action's.
     */
    @Test
    void aBlockStagedByTheCallersActionIsNotCopiedWithTheManagerItselfAsTarget() {
        PooledMemoryManager a = peer(new ArenaUpstream(D1, 64 * MiB, false));
        MemoryHandle src = a.allocate(4096, D1);
        MemoryHandle dst = a.allocate(4096, D1);
        fill(a, src, 4096, 1);
        fill(a, dst, 4096, 2);
        byte[] srcBefore = bytes(a, src, 4096);
        byte[] dstBefore = bytes(a, dst, 4096);
        boolean intoStaged = a.withMapped(dst, io.ferrum.memory.api.MemoryAccess.READ_WRITE,
                view -> a.copyToPeer(MemoryTransfer.of(src, dst, 4096), a));
        assertEquals(java.util.Arrays.toString(dstBefore), java.util.Arrays.toString(bytes(a, dst, 4096)),
                "the write-back erased what the copy put into the action's block");
        assertFalse(intoStaged, "destination staged, yet the copy answered that its bytes arrived");
        boolean fromStaged = a.withMapped(src, io.ferrum.memory.api.MemoryAccess.READ_WRITE, view -> {
            view.fill((byte) 9); // the action's bytes: the block's, for this thread
            return a.copyToPeer(MemoryTransfer.of(src, dst, 4096), a);
        });
        assertFalse(fromStaged, "source staged");
        assertEquals(java.util.Arrays.toString(dstBefore), java.util.Arrays.toString(bytes(a, dst, 4096)));
        assertFalse(java.util.Arrays.equals(srcBefore, bytes(a, src, 4096)), "the action's write-back went through");
    }

    /**
     * A closed manager refuses as closed whatever the target: a manager it does not know as a peer
     * (another backend's), a closed peer, or itself. It answered false for the first two, which
     * says "this manager cannot reach that memory, stage the bytes through host memory" where the
     * contract says DeviceUnavailableException.
     */
    @Test
    void aClosedManagerIsRefusedAsClosedWhateverTheTarget() {
        PooledMemoryManager a = peer(new ArenaUpstream(D1, 64 * MiB, false));
        PooledMemoryManager b = peer(new ArenaUpstream(D2, 64 * MiB, false));
        PooledMemoryManager stranger = manager(new ArenaUpstream(D2, 64 * MiB, false), config(pool(MiB, MiB)),
                PoolSettings.defaults());
        MemoryHandle src = a.allocate(4096, D1);
        MemoryHandle far = stranger.allocate(4096, D2);
        MemoryHandle near = b.allocate(4096, D2);
        a.close();
        b.close();
        for (PooledMemoryManager target : java.util.List.of(stranger, b, a)) {
            DeviceUnavailableException e = org.junit.jupiter.api.Assertions.assertThrows(DeviceUnavailableException.class,
                    () -> a.copyToPeer(MemoryTransfer.of(src, target == stranger ? far : near, 16), target),
                    "target " + target);
            assertEquals(D1, e.device(), e.getMessage());
        }
    }

    /**
     * The copy paused inside the source's upstream, with the peer's chunk in its hands: the peer's
     * free of the destination is refused, and the peer's close releases no chunk until the copy
     * has returned, then releases them all.
     */
    @Test
    void thePeersFreeAndCloseWaitForACopyInsideItsMemory() throws Exception {
        HookedUpstream upA = new HookedUpstream(D1, 64 * MiB);
        HookedUpstream upB = new HookedUpstream(D2, 64 * MiB);
        PooledMemoryManager a = peer(upA);
        PooledMemoryManager b = peer(upB);
        MemoryHandle src = a.allocate(4096, D1);
        MemoryHandle dst = b.allocate(4096, D2);
        fill(a, src, 4096, 11);
        long bReserved = upB.liveBytes();

        HookedUpstream.Pause inCopy = upA.pauseNext(HookedUpstream.Call.COPY);
        CompletableFuture<Boolean> copy = CompletableFuture.supplyAsync(
                () -> a.copyToPeer(MemoryTransfer.of(src, dst, 4096), b));
        inCopy.awaitArrival(); // the source's upstream moves the bytes
        Thread close = new Thread(b::close, "peer-close");
        try {
            assertRejected(b, InvalidMemoryRequestException.class, () -> b.deallocate(dst));
            close.start();
            // The close waits for the copy (a bounded wait on its pool's in-flight work): by then it
            // has marked every pool closed and would have released what no work holds.
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (close.getState() != Thread.State.TIMED_WAITING && close.isAlive()
                    && System.nanoTime() < deadline) {
                Thread.onSpinWait();
            }
            assertTrue(b.isClosed());
            assertEquals(bReserved, upB.liveBytes(), "the peer released memory under a running copy");
        } finally {
            inCopy.release();
        }
        assertTrue(copy.get(30, TimeUnit.SECONDS));
        close.join(TimeUnit.SECONDS.toMillis(30));
        assertFalse(close.isAlive());
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (upB.liveBytes() != 0 && System.nanoTime() < deadline) {
            Thread.sleep(10);
        }
        assertEquals(0, upB.liveBytes(), "the peer's close released its chunks once the copy ended");
        assertEquals("", upA.violations.toString() + upB.violations);
    }
}
