package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;

/**
 * Handles: a bad, freed or foreign handle is refused and changes nothing; handles are unique across
 * managers and never issued twice; a handle freed by two threads at once is freed once.
 */
class EngineHandlesTest extends EngineTestSupport {
    @Test
    void badHandlesAreRejectedAndNothingChanges() {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, pool(MiB, MiB));
        PooledMemoryManager other = manager(new ArenaUpstream(64 * MiB), pool(MiB, MiB));
        MemoryHandle live = m.allocate(512, CPU);
        MemoryHandle freed = m.allocate(512, CPU);
        m.deallocate(freed);
        MemoryHandle foreign = other.allocate(512, CPU);

        assertTrue(assertRejected(m, InvalidHandleException.class, () -> m.deallocate(MemoryHandle.INVALID)).getMessage().contains("zero"));
        InvalidHandleException doubleFree = assertRejected(m, InvalidHandleException.class, () -> m.deallocate(freed));
        assertEquals(freed, doubleFree.handle());
        assertTrue(doubleFree.getMessage().contains("already freed"), doubleFree.getMessage());
        // An id of this manager that was never issued (the live one's slot, a later generation) says so too.
        MemoryHandle neverIssued = new MemoryHandle(live.id() + (1L << 20));
        String never = assertRejected(m, InvalidHandleException.class, () -> m.deallocate(neverIssued)).getMessage();
        assertTrue(never.contains("was never allocated"), never);
        assertTrue(assertRejected(m, InvalidHandleException.class, () -> m.deallocate(foreign)).getMessage().contains("not issued"));
        assertRejected(m, InvalidHandleException.class, () -> m.deallocate(null));
        assertRejected(m, InvalidHandleException.class, () -> m.copy(live, freed, 1, 0, 0));
        assertRejected(m, InvalidHandleException.class, () -> m.mapMemory(freed, MemoryAccess.READ_WRITE));
        assertTrue(m.handleInfo(freed).isEmpty());
        assertTrue(m.handleInfo(foreign).isEmpty());
        assertFalse(m.owns(foreign));
        assertTrue(m.owns(live));
    }

    @Test
    void handlesAreUniqueAcrossManagersAndNeverComeBack() {
        PooledMemoryManager m1 = manager(new ArenaUpstream(64 * MiB), pool(MiB, MiB));
        PooledMemoryManager m2 = manager(new ArenaUpstream(64 * MiB), pool(MiB, MiB));
        assertNotEquals(m1.handleSpace(), m2.handleSpace());
        assertTrue(m1.handleSpace().isBounded());
        Set<MemoryHandle> seen = new HashSet<>();
        for (int i = 0; i < 1000; i++) {
            MemoryHandle h = m1.allocate(16, CPU);
            assertTrue(seen.add(h), "handle issued twice: " + h);
            assertTrue(seen.add(m2.allocate(16, CPU)));
            m1.deallocate(h); // the slot is reused with the next generation
            assertThrows(InvalidHandleException.class, () -> m1.deallocate(h));
        }
        for (MemoryHandle h : seen) {
            assertTrue(m1.handleSpace().contains(h.id()) != m2.handleSpace().contains(h.id()));
            assertTrue(m1.handleSpace().contains(h.id()) || m2.owns(h));
        }
    }

    @Test
    void aHandleFreedByTwoThreadsAtOnceIsFreedOnce() throws Exception {
        PooledMemoryManager m = manager(new ArenaUpstream(64 * MiB), pool(MiB, MiB));
        for (int round = 0; round < 200; round++) {
            MemoryHandle h = m.allocate(4096, CPU);
            CountDownLatch go = new CountDownLatch(1);
            AtomicLong wins = new AtomicLong();
            AtomicLong refusals = new AtomicLong();
            Runnable free = () -> {
                try {
                    go.await();
                    m.deallocate(h);
                    wins.incrementAndGet();
                } catch (InvalidHandleException e) {
                    refusals.incrementAndGet();
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            };
            Thread t1 = new Thread(free);
            Thread t2 = new Thread(free);
            t1.start();
            t2.start();
            go.countDown();
            t1.join();
            t2.join();
            assertEquals(1, wins.get(), "round " + round);
            assertEquals(1, refusals.get(), "round " + round);
        }
        assertEquals(0, m.memoryInfo().activeAllocations());
    }
}
