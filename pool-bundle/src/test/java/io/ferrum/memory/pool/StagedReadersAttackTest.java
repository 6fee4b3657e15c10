package io.ferrum.memory.pool;

import static io.ferrum.memory.pool.StagedActionExclusionTest.assertRefusedNaming;
import static io.ferrum.memory.pool.StagedActionExclusionTest.bytes;
import static io.ferrum.memory.pool.StagedActionExclusionTest.one;
import static io.ferrum.memory.pool.StagedActionExclusionTest.outcome;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.HookedUpstream.Pause;
import io.ferrum.memory.pool.StagedReadersTest.Reader;
import io.ferrum.memory.pool.StagingRacesTest.StagedUpstream;

/**
 * Attacks on the readers' hold of a GPU block ({@code Block.Readers}): every way a READ_ONLY action
 * can end (a failed staging copy, a refusal as busy, an upgrade then a throw, a failed write-back, an
 * interrupt as it leaves, which takes no lock) takes its own share and no other's, so that
 * once every action ended writers come in again; nested READ_ONLY actions and reads of many threads
 * under many readers go on. Each interleaving is forced by readers held inside, a paused upstream
 * copy or the pool's lock held by the test.
 */
class StagedReadersAttackTest extends RaceHarness {
    static final io.ferrum.memory.api.Device GPU = StagedReadersTest.GPU;

    private final StagedReadersTest readers = new StagedReadersTest();

    PooledMemoryManager gpu(StagedUpstream up) {
        return manager(up, config(pool(MiB, MiB, 256)), PoolSettings.defaults(), null);
    }

    Reader reader(PooledMemoryManager m, MemoryHandle h, String name) throws InterruptedException {
        return readers.new Reader(m, h, name);
    }

    /** A write and a READ_WRITE action of another thread both work: no hold is left on the block. */
    private void assertNoHoldLeft(PooledMemoryManager m, MemoryHandle h, int value, String what) throws Exception {
        Throwable t = start("writer", () -> {
            m.write(h, 10, one(value));
            return m.withMapped(h, MemoryAccess.READ_WRITE, v -> v.get(ValueLayout.JAVA_BYTE, 10));
        }).handle((r, e) -> e == null ? (r.equals((byte) value) ? null : new AssertionError("read " + r)) : e)
                .get(30, TimeUnit.SECONDS);
        assertNull(t, what + ": a hold was left on the block");
    }

    /**
     * A second reader whose staging copy the device fails, while a first reader is inside: it takes
     * back its own share only. The first reader, alone again, may write through a nested view; after
     * it, writers come in.
     */
    @Test
    void aSecondReadersFailedStagingCopyTakesBackOnlyItsOwnShare() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up);
        MemoryHandle h = StagedReadersTest.block(m, 7);
        Reader first = reader(m, h, "first reader");
        IllegalStateException failed = new IllegalStateException("staging copy failed");
        up.failNextCopy(failed);
        assertSame(failed, assertThrows(IllegalStateException.class,
                () -> m.withMapped(h, MemoryAccess.READ_ONLY, v -> null)), "the failed staging copy");
        assertNull(first.inside(v -> m.withMapped(h, MemoryAccess.READ_WRITE, nested -> {
            nested.set(ValueLayout.JAVA_BYTE, 0, (byte) 5);
            return null;
        })), "the first reader, alone again, may write");
        // Its hold is its own now: another reader is refused.
        assertRefusedNaming(h, outcome(() -> m.withMapped(h, MemoryAccess.READ_ONLY, v -> null)), "a reader after the upgrade");
        first.release();
        assertEquals(5, bytes(m, h, 1)[0], "the first reader's nested byte");
        assertNoHoldLeft(m, h, 1, "after both readers");
    }

    /**
     * A reader refused as busy (another thread's write paused before it reaches the device) leaves
     * no share behind: once the write lands, writers and writing actions come in.
     */
    @Test
    void aReaderRefusedAsBusyLeavesNoShare() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up);
        MemoryHandle h = StagedReadersTest.block(m, 7);
        Pause write = up.pauseNextWriteBack();
        CompletableFuture<Object> writer = start("writer", () -> {
            m.write(h, 500, one(9));
            return null;
        });
        write.awaitArrival();
        Throwable refused;
        try {
            refused = outcome(() -> m.withMapped(h, MemoryAccess.READ_ONLY, v -> null));
        } finally {
            write.release();
        }
        writer.get(30, TimeUnit.SECONDS);
        assertRefusedNaming(h, refused, "a reader during a write");
        assertNoHoldLeft(m, h, 2, "after the refused reader");
        assertEquals(9, bytes(m, h, 501)[500]);
    }

    /**
     * A sole reader whose nested view wrote (the hold became its own), then whose action threw: the
     * nested view's byte is written back, and the hold goes.
     */
    @Test
    void anUpgradedReaderThatThrowsKeepsItsNestedBytesAndLeavesNoHold() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up);
        MemoryHandle h = StagedReadersTest.block(m, 7);
        IllegalStateException thrown = new IllegalStateException("the action's own");
        assertSame(thrown, assertThrows(IllegalStateException.class, () -> m.withMapped(h, MemoryAccess.READ_ONLY, v -> {
            m.withMapped(h, MemoryAccess.READ_WRITE, nested -> {
                nested.set(ValueLayout.JAVA_BYTE, 0, (byte) 4);
                return null;
            });
            throw thrown;
        })));
        assertEquals(4, bytes(m, h, 1)[0], "the nested view's byte");
        assertNoHoldLeft(m, h, 3, "after the upgraded reader threw");
    }

    /** The same when the upgraded reader's write-back fails: the failure comes out, and the hold goes. */
    @Test
    void anUpgradedReaderWhoseWriteBackFailsLeavesNoHold() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up);
        MemoryHandle h = StagedReadersTest.block(m, 7);
        IllegalStateException failed = new IllegalStateException("write-back failed");
        up.failNextWriteBack(failed);
        assertSame(failed, assertThrows(IllegalStateException.class, () -> m.withMapped(h, MemoryAccess.READ_ONLY,
                v -> m.withMapped(h, MemoryAccess.READ_WRITE, nested -> {
                    nested.set(ValueLayout.JAVA_BYTE, 0, (byte) 4);
                    return null;
                }))));
        assertNoHoldLeft(m, h, 3, "after the failed write-back");
    }

    /**
     * A reader interrupted while it waits for the pool's lock (held by the test) to join, and one
     * interrupted as it leaves while the test holds the lock: the first joins (the lock is taken
     * uninterruptibly), the second leaves without waiting (a leave takes no lock, so that an overflow
     * cannot leave it held: StagedReadersOverflowTest); both keep their interrupt and take back
     * their own share only.
     */
    @Test
    void readersInterruptedWhileTheyWaitToJoinOrLeaveJoinAndLeave() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up);
        MemoryHandle h = StagedReadersTest.block(m, 7);
        Reader second = reader(m, h, "second reader");
        java.util.concurrent.CountDownLatch inside = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
        CompletableFuture<Boolean> leaving = start("leaving reader", () -> m.withMapped(h, MemoryAccess.READ_ONLY, v -> {
            inside.countDown();
            StagedActionExclusionTest.await(go);
            Thread.currentThread().interrupt(); // then it leaves: no lock to wait for
            return true;
        }) && Thread.currentThread().isInterrupted());
        assertTrue(inside.await(30, TimeUnit.SECONDS), "the leaving reader never ran");
        ReentrantLock lock = poolLock(m, MemoryType.GENERAL);
        CompletableFuture<Boolean> joining;
        lock.lock();
        try {
            joining = start("joining reader", () -> {
                m.withMapped(h, MemoryAccess.READ_ONLY, v -> null);
                return Thread.currentThread().isInterrupted();
            });
            Thread t = threads.get(threads.size() - 1);
            awaitQueued(lock, t);
            t.interrupt();
            go.countDown();
            // Done while the test still holds the lock: the leave waits for nothing.
            assertTrue(leaving.get(30, TimeUnit.SECONDS), "the leaving reader's interrupt was kept");
            assertTrue(lock.isHeldByCurrentThread() && lock.hasQueuedThread(t), "the joining reader still waits");
        } finally {
            lock.unlock();
        }
        assertTrue(joining.get(30, TimeUnit.SECONDS), "the joining reader's interrupt was kept");
        assertNull(second.inside(v -> m.withMapped(h, MemoryAccess.READ_WRITE, nested -> {
            nested.set(ValueLayout.JAVA_BYTE, 1, (byte) 6);
            return null;
        })), "the second reader, alone again, may write");
        second.release();
        assertEquals(6, bytes(m, h, 2)[1]);
        assertNoHoldLeft(m, h, 4, "after the interrupted readers");
    }

    /**
     * Nested READ_ONLY actions (on the block, on another block, on the block again) under other
     * threads' readers of both blocks, and reads of the block from many threads meanwhile: none is
     * refused, each sees the block's bytes, and once all ended writers come in.
     */
    @Test
    void nestedReadOnlyActionsAndManyThreadsReadsUnderManyReadersGoOn() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up);
        MemoryHandle a = StagedReadersTest.block(m, 7);
        MemoryHandle b = StagedReadersTest.block(m, 8);
        int writtenBefore = up.writtenBack.size(); // the blocks' first bytes
        List<Reader> others = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            others.add(reader(m, a, "reader of a " + i));
            others.add(reader(m, b, "reader of b " + i));
        }
        Reader nester = reader(m, a, "nesting reader");
        Object nested = nester.inside(v -> m.withMapped(b, MemoryAccess.READ_ONLY,
                vb -> m.withMapped(a, MemoryAccess.READ_ONLY, va -> {
                    byte[] readA = bytes(m, a, 1);
                    byte[] readB = bytes(m, b, 1);
                    return "" + va.get(ValueLayout.JAVA_BYTE, 0) + vb.get(ValueLayout.JAVA_BYTE, 0)
                            + readA[0] + readB[0];
                })));
        assertEquals("7878", nested, "nested READ_ONLY actions under other readers");
        List<CompletableFuture<String>> reads = new ArrayList<>();
        for (int i = 0; i < 4; i++) {
            reads.add(start("read " + i, () -> {
                StringBuilder seen = new StringBuilder();
                for (int k = 0; k < 100; k++) {
                    seen.append(bytes(m, a, 1)[0]).append(bytes(m, b, 1)[0]);
                }
                return seen.toString();
            }));
        }
        for (Reader r : others) {
            assertEquals((byte) (7 + others.indexOf(r) % 2), r.inside(v -> v.get(ValueLayout.JAVA_BYTE, 0)),
                    "a reader's view");
        }
        for (CompletableFuture<String> r : reads) {
            assertEquals("78".repeat(100), r.get(30, TimeUnit.SECONDS), "reads under readers");
        }
        nester.release();
        for (Reader r : others) {
            r.release();
        }
        assertEquals(writtenBefore, up.writtenBack.size(), "a reader was written back");
        assertNoHoldLeft(m, a, 1, "a after the readers");
        assertNoHoldLeft(m, b, 2, "b after the readers");
    }

    /**
     * A sole reader that made the hold its own closes the manager inside its action: its write-back
     * lands before the chunk goes, and after it nothing is left.
     */
    @Test
    void aCloseInsideAnUpgradedReaderLeavesNothing() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up);
        MemoryHandle h = StagedReadersTest.block(m, 7);
        assertNull(m.withMapped(h, MemoryAccess.READ_ONLY, v -> {
            m.withMapped(h, MemoryAccess.READ_WRITE, nested -> {
                nested.set(ValueLayout.JAVA_BYTE, 0, (byte) 3);
                return null;
            });
            m.close();
            return null;
        }));
        assertEquals(0, up.memory.liveBytes(), "native bytes left after close");
        assertEquals(up.memory.reserves.get(), up.memory.releases.get(), "chunks reserved and released");
        assertTrue(up.writtenBack.size() >= 1, "the upgraded reader was not written back");
    }

    /** Blocks freed after readers and handed out again: their next owners write and stage them. */
    @Test
    void aBlockFreedAfterReadersIsWritableByItsNextOwner() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up);
        MemoryHandle h = StagedReadersTest.block(m, 7);
        Reader first = reader(m, h, "first reader");
        Reader second = reader(m, h, "second reader");
        first.release();
        second.release();
        m.deallocate(h);
        MemoryHandle next = m.allocate(1000, GPU);
        assertNoHoldLeft(m, next, 5, "the next owner");
    }
    /**
     * A free, a defragmentation and a trim while a second reader's staging copy is being taken (paused)
     * and a first reader is inside: the free is refused, nothing moves, both readers see the block's
     * bytes; then a close cut short (interrupted in its wait) leaves the release to the last reader,
     * and afterwards no native byte or staging copy is left.
     */
    @Test
    void maintenanceAndACloseCutShortDuringAReadersStagingCopyTouchNothing() throws Exception {
        StagedUpstream up = new StagedUpstream();
        PooledMemoryManager m = gpu(up);
        MemoryHandle hole = m.allocate(1000, GPU);
        MemoryHandle h = StagedReadersTest.block(m, 7);
        m.deallocate(hole);
        Reader first = reader(m, h, "first reader");
        Pause copy = up.pauseNextCopy();
        CompletableFuture<Byte> second = start("second reader", () -> m.withMapped(h, MemoryAccess.READ_ONLY,
                v -> v.get(ValueLayout.JAVA_BYTE, 0)));
        copy.awaitArrival();
        CompletableFuture<Void> close;
        try {
            assertInstanceOf(io.ferrum.memory.api.InvalidMemoryRequestException.class, outcome(() -> m.deallocate(h)),
                    "a free during a reader's staging copy");
            assertEquals(0, m.defragment(GPU).toCompletableFuture().get(30, TimeUnit.SECONDS).blocksMoved(),
                    "a block moved during a reader's staging copy");
            m.trim();
            close = start("close", () -> {
                m.close();
                return null;
            });
            Thread closer = threads.get(threads.size() - 1);
            awaitParkedInOrDone(closer, "Lifecycle", "awaitIdle", close);
            closer.interrupt();
            close.get(30, TimeUnit.SECONDS);
            assertTrue(up.memory.liveBytes() > 0, "a chunk went back under the readers");
        } finally {
            copy.release();
        }
        assertEquals((byte) 7, second.get(30, TimeUnit.SECONDS), "the second reader's view");
        assertEquals((byte) 7, first.inside(v -> v.get(ValueLayout.JAVA_BYTE, 0)), "the first reader's view");
        first.release();
        assertEquals(0, up.memory.liveBytes(), "native bytes left after the last reader");
        assertEquals(up.memory.reserves.get(), up.memory.releases.get(), "chunks reserved and released");
        for (MemorySegment seg : up.copiedTo) {
            if (seg.isNative()) {
                assertFalse(seg.scope().isAlive(), "a reader's staging copy was left");
            }
        }
    }
    /**
     * A reader's nested writer queued for the pool's lock (held by the test) and another reader's
     * leave, which takes no lock, in either order: the leave done before the writer has the lock lets
     * it in (alone now, its byte kept); the writer that has looked before the leave is refused;
     * either way no share is left behind and the other's is not
     * taken.
     */
    @Test
    void aNestedWriterRacingAnotherReadersLeaveIsAdmittedOnlyAfterIt() throws Exception {
        for (boolean leaveFirst : new boolean[] {true, false}) {
            StagedUpstream up = new StagedUpstream();
            PooledMemoryManager m = gpu(up);
            MemoryHandle h = StagedReadersTest.block(m, 7);
            Reader writer = reader(m, h, "writing reader");
            java.util.concurrent.CountDownLatch inside = new java.util.concurrent.CountDownLatch(1);
            java.util.concurrent.CountDownLatch go = new java.util.concurrent.CountDownLatch(1);
            CompletableFuture<Object> leaving = start("leaving reader", () -> m.withMapped(h, MemoryAccess.READ_ONLY, v -> {
                inside.countDown();
                StagedActionExclusionTest.await(go);
                return null;
            }));
            Thread writerThread = readers.threads.get(readers.threads.size() - 1);
            assertTrue(inside.await(30, TimeUnit.SECONDS), "the leaving reader never ran");
            ReentrantLock lock = poolLock(m, MemoryType.GENERAL);
            lock.lock();
            try {
                if (leaveFirst) {
                    go.countDown();
                    assertNull(leaving.get(30, TimeUnit.SECONDS)); // left without the lock
                }
                writer.steps.add(v -> m.withMapped(h, MemoryAccess.READ_WRITE, nested -> {
                    nested.set(ValueLayout.JAVA_BYTE, 0, (byte) 3);
                    return null;
                }));
                awaitQueued(lock, writerThread);
            } finally {
                lock.unlock();
            }
            Object nested = writer.answer();
            if (!leaveFirst) {
                go.countDown(); // the writer has looked, and met the other reader: now it leaves
                assertNull(leaving.get(30, TimeUnit.SECONDS));
            }
            writer.release();
            if (leaveFirst) {
                assertNull(nested, "the nested writer after the other reader left");
                assertEquals(3, bytes(m, h, 1)[0], "the nested writer's byte");
            } else {
                assertRefusedNaming(h, (Throwable) nested, "the nested writer before the other reader left");
                assertEquals(7, bytes(m, h, 1)[0]);
            }
            assertNoHoldLeft(m, h, 1, leaveFirst ? "leave first" : "writer first");
        }
    }
}
