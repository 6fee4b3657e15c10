package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Function;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryMapping;

/**
 * Attacks on the lock-free pins of the data path (scopes: {@code withMapped}, {@code read}, {@code
 * write}), each forcing one interleaving: a close called by the thread that is itself inside a scope;
 * calls nested inside an action on a block the host cannot address (a staging copy); a read that
 * meets a block while zeroing on allocation clears it.
 */
class ScopeAttackTest extends EngineTestSupport {

    private PooledMemoryManager hooked(HookedUpstream up) {
        PooledMemoryManager m = PooledMemoryManager.create(up, config(pool(MiB, MiB)),
                PoolSettings.defaults().withThreadCache(0), null);
        toClose.add(m);
        return m;
    }

    /** @return true while {@code t} waits inside the close for in-flight work to end */
    private static boolean waitingInClose(Thread t) {
        Thread.State s = t.getState();
        if (s != Thread.State.WAITING && s != Thread.State.TIMED_WAITING) {
            return false;
        }
        for (StackTraceElement e : t.getStackTrace()) {
            if (e.getClassName().endsWith(".Lifecycle") && e.getMethodName().equals("awaitIdle")) {
                return true;
            }
        }
        return false;
    }

    /**
     * The action's own thread closes the manager: the close must not wait for the scope it is itself
     * inside (no one else can end it: it would wait out its whole limit), the view must stay the
     * block's until the action returns, and the action's end must release everything.
     */
    @Test
    void closeCalledInsideAnActionDoesNotWaitForItsOwnScope() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = hooked(up);
        MemoryHandle b = m.allocate(4096, CPU);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicBoolean heldAfterClose = new AtomicBoolean();
        Thread action = Thread.ofPlatform().start(() -> {
            try {
                m.withMapped(b, MemoryAccess.READ_WRITE, view -> {
                    m.close();
                    heldAfterClose.set(up.liveBytes() > 0);
                    view.fill((byte) 3); // still the block's memory: the close left its release to this scope
                    return null;
                });
            } catch (Throwable e) {
                failure.set(e);
            }
        });
        boolean waitedForItself = false;
        while (action.isAlive()) {
            if (waitingInClose(action)) {
                waitedForItself = true;
                action.interrupt(); // an interrupted close stops waiting: let the test end
                break;
            }
            Thread.sleep(1);
        }
        action.join();
        assertFalse(waitedForItself, "close, called inside an action, waited for that action's own scope");
        assertNull(failure.get());
        assertTrue(heldAfterClose.get(), "close released the memory under the running action");
        assertEquals(0, up.liveBytes(), "the action's end released everything");
        assertTrue(up.closed, "the upstream closed after the last chunk went back");
        assertEquals("", up.violations.toString());
        assertThrows(DeviceUnavailableException.class, () -> m.read(b, 0, MemorySegment.ofArray(new byte[1])));
    }

    /**
     * The same through an alias: the peer's action on the owner's block closes the owner. The close
     * must not wait for the peer's scope, which its own thread holds.
     */
    @Test
    void theOwnerClosedInsideAPeersActionOnItsAliasDoesNotWaitForIt() throws Exception {
        Device cpu1 = Device.cpu(1);
        Device cpu2 = Device.cpu(2);
        HookedUpstream up1 = new HookedUpstream(cpu1, 64 * MiB);
        HookedUpstream up2 = new HookedUpstream(cpu2, 64 * MiB);
        Map<Device, PooledMemoryManager> running = new ConcurrentHashMap<>();
        PooledMemoryManager owner = PooledMemoryManager.create(up1, config(pool(MiB, MiB)),
                PoolSettings.defaults().withPeers(running::get), null);
        PooledMemoryManager peer = PooledMemoryManager.create(up2, config(pool(MiB, MiB)),
                PoolSettings.defaults().withPeers(running::get), null);
        toClose.add(peer);
        toClose.add(owner);
        running.put(cpu1, owner);
        running.put(cpu2, peer);
        MemoryMapping mapping = owner.createMapping(cpu1, cpu2, 4 * KiB);
        AtomicReference<Throwable> failure = new AtomicReference<>();
        AtomicBoolean heldAfterClose = new AtomicBoolean();
        Thread action = Thread.ofPlatform().start(() -> {
            try {
                peer.withMapped(mapping.target(), MemoryAccess.READ_WRITE, view -> {
                    owner.close();
                    heldAfterClose.set(up1.liveBytes() > 0);
                    view.fill((byte) 4);
                    return null;
                });
            } catch (Throwable e) {
                failure.set(e);
            }
        });
        boolean waitedForItself = false;
        while (action.isAlive()) {
            if (waitingInClose(action)) {
                waitedForItself = true;
                action.interrupt();
                break;
            }
            Thread.sleep(1);
        }
        action.join();
        assertFalse(waitedForItself, "the owner's close, called inside the peer's action, waited for it");
        assertNull(failure.get());
        assertTrue(heldAfterClose.get(), "the owner's close released the memory under the peer's action");
        assertEquals(0, up1.liveBytes(), "the action's end released the owner's memory");
        assertTrue(up1.closed);
        assertEquals("", up1.violations.toString() + up2.violations);
    }

    private static byte[] read(PooledMemoryManager m, MemoryHandle h, int n) {
        byte[] out = new byte[n];
        m.read(h, 0, MemorySegment.ofArray(out));
        return out;
    }

    /**
     * On memory the host cannot address, an action works on a staging copy of the block. Calls on
     * the same block nested inside it, on the same thread (a write, a read, another withMapped), must
     * see the action's bytes and keep their own: the action's write-back must not erase them.
     */
    @Test
    void onStagedMemoryCallsNestedInAnActionSeeAndKeepEachOthersBytes() {
        Device gpu = Device.cuda(0);
        PooledMemoryManager m = manager(new ArenaUpstream(gpu, 64 * MiB, false), pool(MiB, MiB));
        MemoryHandle h = m.allocate(1000, gpu);
        m.write(h, 0, MemorySegment.ofArray(new byte[1000]));
        byte[] seenInside = new byte[1];
        byte[] seenByInnerView = new byte[1];
        m.withMapped(h, MemoryAccess.READ_WRITE, outer -> {
            outer.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
            m.write(h, 500, MemorySegment.ofArray(new byte[] {7}));
            m.read(h, 0, MemorySegment.ofArray(seenInside));
            m.withMapped(h, MemoryAccess.READ_WRITE, inner -> {
                seenByInnerView[0] = inner.get(ValueLayout.JAVA_BYTE, 0);
                inner.set(ValueLayout.JAVA_BYTE, 600, (byte) 9);
                return null;
            });
            assertEquals(7, outer.get(ValueLayout.JAVA_BYTE, 500), "the action's view shows the nested write");
            return null;
        });
        assertEquals(1, seenInside[0], "a read inside the action sees the action's bytes");
        assertEquals(1, seenByInnerView[0], "a nested view sees the action's bytes");
        byte[] after = read(m, h, 1000);
        assertEquals(1, after[0], "the action's byte");
        assertEquals(7, after[500], "the nested write survived the action's write-back");
        assertEquals(9, after[600], "the nested view's byte survived the action's write-back");

        // A READ_ONLY action around a nested writer: the writer's bytes still reach the block.
        m.withMapped(h, MemoryAccess.READ_ONLY, outer -> m.withMapped(h, MemoryAccess.READ_WRITE, inner -> {
            inner.set(ValueLayout.JAVA_BYTE, 700, (byte) 5);
            return null;
        }));
        assertEquals(5, read(m, h, 1000)[700], "a nested writer inside a READ_ONLY action");
    }

    /**
     * On memory the host cannot address, a view nested in an action that then throws: a nested view
     * that may write and returned normally keeps its bytes, as a nested {@code write} does and as
     * every view does on host memory. Before, the outermost action's throw dropped the staging copy,
     * and with it the bytes of every nested view, though the thread had read them back meanwhile.
     * One copy holds the outer action's bytes too: they go back with the nested view's. With no
     * nested writer returned, a throwing action is not written back (its bytes are dropped), and a
     * nested writer that throws keeps its bytes in the copy only: they go back with it or not at
     * all. A write-back the device fails after the throw is suppressed by what the action threw.
     */
    @Test
    void onStagedMemoryANestedWritersBytesOutliveAnOuterActionThatThrows() {
        StagingRacesTest.StagedUpstream up = new StagingRacesTest.StagedUpstream();
        Device gpu = StagingRacesTest.GPU;
        PooledMemoryManager m = PooledMemoryManager.create(up, config(pool(MiB, MiB)), PoolSettings.defaults(), null);
        toClose.add(m);
        MemoryHandle h = m.allocate(1000, gpu);
        m.write(h, 0, MemorySegment.ofArray(new byte[1000]));
        IllegalStateException thrown = new IllegalStateException("the outer action's own");
        byte[] seenInside = new byte[1];
        Function<MemorySegment, Object> throwsAfterANestedWriter = outer -> {
            m.withMapped(h, MemoryAccess.READ_WRITE, inner -> {
                inner.set(ValueLayout.JAVA_BYTE, 0, (byte) 5);
                return null;
            });
            m.write(h, 1, MemorySegment.ofArray(new byte[] {6}));
            seenInside[0] = outer.get(ValueLayout.JAVA_BYTE, 0);
            throw thrown;
        };
        assertSame(thrown, assertThrows(IllegalStateException.class,
                () -> m.withMapped(h, MemoryAccess.READ_ONLY, throwsAfterANestedWriter)));
        assertEquals(5, seenInside[0], "the thread saw the nested view's byte");
        byte[] after = read(m, h, 1000);
        assertEquals(6, after[1], "the nested write");
        assertEquals(5, after[0], "the nested view returned normally, yet the outer action's throw dropped its byte");

        // A READ_WRITE action that throws: dropped alone, kept with a nested writer that returned.
        assertThrows(IllegalStateException.class, () -> m.withMapped(h, MemoryAccess.READ_WRITE, outer -> {
            outer.set(ValueLayout.JAVA_BYTE, 10, (byte) 1);
            throw thrown;
        }));
        assertThrows(IllegalStateException.class, () -> m.withMapped(h, MemoryAccess.READ_WRITE, outer -> {
            outer.set(ValueLayout.JAVA_BYTE, 11, (byte) 1);
            m.withMapped(h, MemoryAccess.WRITE_ONLY, inner -> {
                inner.set(ValueLayout.JAVA_BYTE, 12, (byte) 2);
                return null;
            });
            throw thrown;
        }));
        // A nested writer that throws, caught by a READ_ONLY action that returns: nothing goes back.
        m.withMapped(h, MemoryAccess.READ_ONLY, outer -> {
            assertThrows(IllegalStateException.class, () -> m.withMapped(h, MemoryAccess.READ_WRITE, inner -> {
                inner.set(ValueLayout.JAVA_BYTE, 20, (byte) 3);
                throw thrown;
            }));
            return null;
        });
        after = read(m, h, 1000);
        assertEquals(0, after[10], "a throwing action with no nested writer was written back");
        assertEquals(1, after[11], "the outer action's byte, in the copy the nested writer kept");
        assertEquals(2, after[12], "the nested writer's byte");
        assertEquals(0, after[20], "a nested writer that threw was written back");

        // The device fails the write-back after the throw: the caller gets what the action threw.
        IllegalStateException lost = new IllegalStateException("write-back failed");
        up.failNextWriteBack(lost);
        IllegalStateException caught = assertThrows(IllegalStateException.class,
                () -> m.withMapped(h, MemoryAccess.READ_ONLY, outer -> {
                    m.withMapped(h, MemoryAccess.READ_WRITE, inner -> {
                        inner.set(ValueLayout.JAVA_BYTE, 30, (byte) 4);
                        return null;
                    });
                    throw thrown;
                }));
        assertSame(thrown, caught);
        assertTrue(List.of(caught.getSuppressed()).contains(lost), "the failed write-back is not told");
    }

    /**
     * Under zeroing on allocation, a block's old bytes are cleared before anyone can use it: a handle
     * listed by {@code handles()} while the clearing runs (a monitor, {@code mem:dump}) must not read
     * the previous owner's bytes, nor lose a write to the clearing.
     */
    @Test
    void aBlockBeingZeroedOnAllocationShowsNoOneThePreviousOwnersBytes() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = PooledMemoryManager.create(up, config(pool(MiB, MiB)),
                PoolSettings.defaults().withZeroing(ZeroingPolicy.ON_ALLOCATE), null);
        toClose.add(m);
        MemoryHandle old = m.allocate(4096, CPU);
        byte[] secret = new byte[4096];
        java.util.Arrays.fill(secret, (byte) 0x5A);
        m.write(old, 0, MemorySegment.ofArray(secret));
        m.deallocate(old);

        HookedUpstream.Pause fill = up.pauseNext(HookedUpstream.Call.FILL);
        AtomicReference<MemoryHandle> allocated = new AtomicReference<>();
        Thread owner = Thread.ofPlatform().start(() -> allocated.set(m.allocate(4096, CPU)));
        fill.awaitArrival(); // the new block (the old one's memory) is being cleared
        byte[] seen = null;
        for (MemoryHandleInfo i : m.handles()) {
            seen = read(m, i.handle(), 4096); // a monitor reads every listed block
        }
        fill.release();
        owner.join();
        if (seen != null) {
            for (int i = 0; i < seen.length; i++) {
                assertEquals(0, seen[i], "byte " + i + " of the previous owner reached a reader of the new block");
            }
        }
        assertEquals(0, read(m, allocated.get(), 4096)[0]);
        assertEquals(1, m.memoryInfo().activeAllocations());
        m.deallocate(allocated.get());
        assertEquals(0, m.memoryInfo().activeAllocations());
    }
}
