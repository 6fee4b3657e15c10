package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.HookedUpstream.Pause;
import io.ferrum.memory.pool.StagingRacesTest.StagedUpstream;

/**
 * The pool's maintenance and lifetime calls against a block held through a host staging copy (memory
 * the CPU cannot address): a trim, a defragmentation, a live {@code configurePool} (growth, limit,
 * alignment), an allocation and a free of other blocks (the zeroing fills of {@code on-allocate}
 * and {@code on-free}), a {@code deallocate} of the block itself and a close, each under every
 * zeroing policy, made while another thread's {@code withMapped} action is held inside by a latch or
 * paused in its write-back, or while a {@code mapMemory} mapping is filling (its copy paused),
 * published, or writing back (its unmap paused). Nothing the staging copy holds may be lost, moved,
 * zeroed or given to another owner under it; every call ends (no deadlock); the refused free changes
 * nothing; and once everything ended and the manager closed, no native byte and no staging buffer is
 * left.
 */
class StagedHoldMaintenanceAttackTest extends RaceHarness {
    static final Device GPU = StagingRacesTest.GPU;
    static final int SIZE = 1000;

    /** Where the staging copy of the block stands when the attacking call is made. */
    enum Phase {
        ACTION_INSIDE, ACTION_WRITING_BACK, MAPPING_FILLING, MAPPING_PUBLISHED, MAPPING_WRITING_BACK;

        boolean action() {
            return this == ACTION_INSIDE || this == ACTION_WRITING_BACK;
        }
    }

    /** The attacking call, made by the test's thread while the phase stands. */
    enum Attack { TRIM, DEFRAGMENT, CONFIGURE, CHURN, DEALLOCATE, CLOSE, CLOSE_CUT_SHORT }

    static Stream<Arguments> cases() {
        List<Arguments> out = new ArrayList<>();
        for (ZeroingPolicy zeroing : ZeroingPolicy.values()) {
            for (Phase phase : Phase.values()) {
                for (Attack attack : Attack.values()) {
                    out.add(Arguments.of(zeroing, phase, attack));
                }
            }
        }
        return out.stream();
    }

    /** The phase, standing until {@link #end}: the staging copy holds byte 0 = 1 over the device's 5s. */
    final class Standing {
        final Phase phase;
        final PooledMemoryManager m;
        final MemoryHandle h;
        final StagedUpstream up;
        final CountDownLatch go = new CountDownLatch(1);
        Pause pause;
        MemorySegment view;
        /** The other thread's call (the action, the mapping, the unmap), or null for a published mapping. */
        CompletableFuture<Object> call;
        /** What ended a read nested in a held action after the attack (null: it returned), and the byte it read. */
        volatile Throwable nested;
        volatile byte nestedByte;

        Standing(Phase phase, PooledMemoryManager m, MemoryHandle h, StagedUpstream up) throws Exception {
            this.phase = phase;
            this.m = m;
            this.h = h;
            this.up = up;
            switch (phase) {
                case ACTION_INSIDE -> {
                    CountDownLatch inside = new CountDownLatch(1);
                    call = start("action", () -> m.withMapped(h, MemoryAccess.READ_WRITE, v -> {
                        v.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
                        inside.countDown();
                        StagedActionExclusionTest.await(go);
                        // A nested call after the attack: it shares the copy, or is refused as closed.
                        byte[] one = new byte[1];
                        nested = StagedActionExclusionTest.outcome(() -> m.read(h, 0, MemorySegment.ofArray(one)));
                        nestedByte = one[0];
                        return "done";
                    }));
                    assertTrue(inside.await(30, TimeUnit.SECONDS), "the action never ran");
                }
                case ACTION_WRITING_BACK -> {
                    pause = up.pauseNextWriteBack();
                    call = start("action", () -> m.withMapped(h, MemoryAccess.READ_WRITE, v -> {
                        v.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
                        return "done";
                    }));
                    pause.awaitArrival();
                }
                case MAPPING_FILLING -> {
                    pause = up.pauseNextCopy();
                    call = start("map", () -> {
                        MemorySegment v = m.mapMemory(h, MemoryAccess.READ_WRITE);
                        v.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
                        m.unmapMemory(h);
                        return "done";
                    });
                    pause.awaitArrival();
                }
                case MAPPING_PUBLISHED -> {
                    view = m.mapMemory(h, MemoryAccess.READ_WRITE);
                    view.set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
                }
                case MAPPING_WRITING_BACK -> {
                    m.mapMemory(h, MemoryAccess.READ_WRITE).set(ValueLayout.JAVA_BYTE, 0, (byte) 1);
                    pause = up.pauseNextWriteBack();
                    call = start("unmap", () -> {
                        m.unmapMemory(h);
                        return "done";
                    });
                    pause.awaitArrival();
                }
            }
        }

        /** Lets the phase end. @return what ended the other thread's call: null if it returned */
        Throwable end() throws Exception {
            go.countDown();
            if (pause != null) {
                pause.release();
            }
            if (phase == Phase.MAPPING_PUBLISHED) {
                try {
                    m.unmapMemory(h);
                    return null;
                } catch (RuntimeException e) {
                    return e;
                }
            }
            try {
                call.get(30, TimeUnit.SECONDS);
                return null;
            } catch (ExecutionException e) {
                return e.getCause();
            }
        }
    }

    @ParameterizedTest(name = "{0}, {1}, {2}")
    @MethodSource("cases")
    void nothingHeldThroughAStagingCopyIsLostMovedZeroedOrLeaked(ZeroingPolicy zeroing, Phase phase, Attack attack)
            throws Exception {
        StagedUpstream up = new StagedUpstream();
        MemoryPoolConfig general = MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB)
                .alignment(256).preAllocate(true).build();
        PooledMemoryManager m = manager(up, config(general), PoolSettings.defaults().withZeroing(zeroing), null);
        // [hole][h][tail] in the first chunk, and an empty second chunk for trim and the lower limit:
        // a movable h would slide into the hole, and a released one be handed to the next allocation.
        MemoryHandle hole = m.allocate(SIZE, GPU);
        MemoryHandle h = m.allocate(SIZE, GPU);
        MemoryHandle tail = m.allocate(SIZE, GPU);
        m.deallocate(m.allocate(MiB, GPU));
        m.deallocate(hole);
        byte[] fives = new byte[SIZE];
        java.util.Arrays.fill(fives, (byte) 5);
        m.write(h, 0, MemorySegment.ofArray(fives));

        Standing standing = new Standing(phase, m, h, up);
        boolean freed = false;
        boolean closed = false;
        Throwable ended;
        try {
            switch (attack) {
                case TRIM -> m.trim();
                case DEFRAGMENT -> assertEquals(0, m.defragment(GPU).toCompletableFuture().get(30, TimeUnit.SECONDS)
                        .blocksMoved(), "a block moved under the staging copy");
                case CONFIGURE -> m.configurePool(GPU, MemoryType.GENERAL, general.toBuilder().growthIncrement(2 * MiB)
                        .maxSize(MiB).alignment(512).build());
                case CHURN -> {
                    // Fills of zeroing on allocate and on free land beside the block, and in a new chunk.
                    m.deallocate(m.allocate(SIZE, GPU));
                    m.deallocate(m.allocate(SIZE, GPU));
                    m.deallocate(m.allocate(MiB, GPU));
                }
                case DEALLOCATE -> {
                    Throwable t = StagedActionExclusionTest.outcome(() -> m.deallocate(h));
                    if (phase.action()) {
                        assertInstanceOf(InvalidMemoryRequestException.class, t, "a free under the action");
                    } else {
                        assertNull(t, "a free under a mapping is done");
                        freed = true;
                    }
                }
                case CLOSE, CLOSE_CUT_SHORT -> {
                    CompletableFuture<Void> close = start("close", () -> {
                        m.close();
                        return null;
                    });
                    Thread closer = threads.get(threads.size() - 1);
                    if (phase == Phase.MAPPING_PUBLISHED) {
                        close.get(30, TimeUnit.SECONDS); // nothing under way: the close closes the views
                    } else {
                        awaitParkedInOrDone(closer, "Lifecycle", "awaitIdle", close);
                        assertFalse(close.isDone(), "the close did not wait for the staging copy's work");
                        if (attack == Attack.CLOSE_CUT_SHORT) {
                            closer.interrupt();
                            close.get(30, TimeUnit.SECONDS);
                            assertTrue(up.memory.liveBytes() > 0, "a chunk went back under the staging copy's work");
                        }
                    }
                    closed = true;
                }
            }
        } finally {
            ended = standing.end();
        }
        // Every call ended (the futures above would have timed out); the close's thread too.
        for (Thread t : threads) {
            t.join(TimeUnit.SECONDS.toMillis(30));
            assertFalse(t.isAlive(), t.getName() + " never ended");
        }
        if (phase == Phase.ACTION_INSIDE) {
            if (closed) {
                assertInstanceOf(DeviceUnavailableException.class, standing.nested, "a nested read after the close");
            } else {
                assertNull(standing.nested, "a nested read failed");
                assertEquals(1, standing.nestedByte, "a nested read did not read the action's copy");
            }
        }
        if (closed) {
            if (ended != null) {
                // The mapping's thread: refused as closed, or its view closed under it.
                assertTrue(ended instanceof DeviceUnavailableException || ended instanceof IllegalStateException,
                        "the other thread's call ended with " + ended);
            }
            if (phase == Phase.MAPPING_PUBLISHED) {
                assertThrows(IllegalStateException.class, () -> standing.view.get(ValueLayout.JAVA_BYTE, 0),
                        "a view outlived the close");
            }
        } else if (freed) {
            if (ended != null) {
                assertTrue(ended instanceof InvalidHandleException || ended instanceof InvalidMemoryRequestException,
                        "the mapping of a freed block ended with " + ended);
            }
            // Whoever gets the block's place next: zeros under a zeroing policy, never the copy's byte late.
            // The hole's place and the block's: both taken again.
            MemoryHandle[] next = {m.allocate(SIZE, GPU), m.allocate(SIZE, GPU)};
            for (MemoryHandle n : next) {
                byte[] got = new byte[SIZE];
                m.read(n, 0, MemorySegment.ofArray(got));
                if (zeroing != ZeroingPolicy.NONE) {
                    assertEquals(new String(new byte[SIZE]), new String(got), "the next owner saw earlier bytes");
                }
                m.deallocate(n);
            }
        } else {
            assertNull(ended, "the staging copy's call failed");
            byte[] got = new byte[SIZE];
            m.read(h, 0, MemorySegment.ofArray(got));
            assertEquals(1, got[0], "the staging copy's byte was lost");
            assertEquals(5, got[SIZE - 1], "the block's bytes were zeroed or moved under the staging copy");
            assertEquals(1, m.handles().stream().filter(i -> i.handle().equals(h)).count());
            m.deallocate(h);
        }
        if (!closed) {
            m.deallocate(tail);
        }
        m.close();
        assertEquals(0, up.memory.liveBytes(), "native bytes left after close");
        assertEquals(up.memory.reserves.get(), up.memory.releases.get(), "chunks reserved and released");
        for (MemorySegment s : up.copiedTo) {
            if (s.isNative()) {
                assertFalse(s.scope().isAlive(), "a staging buffer was left");
            }
        }
        for (MemorySegment s : up.writtenBack) {
            if (s.isNative()) {
                assertFalse(s.scope().isAlive(), "a staging buffer written back was left");
            }
        }
        assertTrue(up.memory.closed, "the upstream was not closed");
    }
}
