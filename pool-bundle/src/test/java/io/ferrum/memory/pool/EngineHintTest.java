package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryUsageHint;
import io.ferrum.memory.api.StreamHandle;

/**
 * The device advice of a usage hint stays with the memory (a GPU's {@code cuMemAdvise} on managed
 * memory): when the hinted block is freed, the engine tells the upstream to undo it before the
 * bytes can go to another allocation ({@link DeviceUpstream#unadvise}).
 */
class EngineHintTest extends EngineTestSupport {

    /**
     * Review defect: a MAPPED block's READ_MOSTLY / preferred location stayed on its bytes after the
     * free, and the next allocation handed those bytes inherited it: the engine dropped the hint
     * and never told the upstream.
     */
    @Test
    void aFreedBlocksAdviceIsUndoneBeforeItsBytesGoToAnotherOwner() {
        for (ZeroingPolicy zeroing : ZeroingPolicy.values()) {
            ArenaUpstream up = new ArenaUpstream(64 * MiB);
            PooledMemoryManager m = manager(up, config(pool(MiB, MiB)), PoolSettings.defaults().withZeroing(zeroing));
            MemoryHandle plain = m.allocate(4096, CPU);
            MemoryHandle hinted = m.allocate(4096, CPU);
            m.setUsageHint(hinted, MemoryUsageHint.READ_MOSTLY);
            String range = up.lastAdvisedRange;
            m.deallocate(plain);
            assertEquals(List.of(), up.unadvised, zeroing + ": a block without a hint has nothing to undo");
            m.deallocate(hinted);
            assertEquals(List.of(range), up.unadvised, zeroing + ": the hinted block's advice is undone at its free");
            MemoryHandle next = m.allocate(4096, CPU);
            assertEquals(List.of(range), up.unadvised, zeroing.name());
            m.deallocate(next);
        }
    }

    /** A hinted block freed while an async write pins it: its advice is undone at the last unpin. */
    @Test
    void aHintedBlockFreedWhilePinnedIsUnadvisedWhenItsLastPinGoes() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        HostStreamManager streams = new HostStreamManager(CPU);
        toClose.add(streams);
        PooledMemoryManager m = PooledMemoryManager.create(up, config(pool(4 * MiB, MiB)), PoolSettings.defaults(), streams);
        toClose.add(0, m);
        MemoryHandle a = m.allocate(MiB, CPU);
        MemoryHandle b = m.allocate(MiB, CPU);
        m.setUsageHint(b, MemoryUsageHint.RESIDENT);
        String range = up.lastAdvisedRange;
        StreamHandle s = streams.createStream(CPU);
        CountDownLatch gate = new CountDownLatch(1);
        streams.submit(s, () -> {
            try {
                gate.await();
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        });
        CompletableFuture<Void> copy = m.copyAsync(MemoryTransfer.of(a, b, MiB), s).toCompletableFuture();
        m.deallocate(b);
        assertEquals(List.of(), up.unadvised, "not undone while the copy still uses the block");
        gate.countDown();
        copy.get(30, TimeUnit.SECONDS);
        assertEquals(List.of(range), up.unadvised);
    }

    /**
     * Review defect: defragmentation moved a hinted block without its advice: the advice stayed on
     * the old bytes (for their next owner) and the block's new place had none, while usageHint still
     * answered the hint.
     */
    @Test
    void aHintedBlockMovedByDefragmentationTakesItsAdviceAlong() throws Exception {
        ArenaUpstream up = new ArenaUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB)), PoolSettings.defaults().withThreadCache(0));
        MemoryHandle first = m.allocate(64 * KiB, CPU);
        MemoryHandle second = m.allocate(64 * KiB, CPU);
        m.setUsageHint(first, MemoryUsageHint.SEQUENTIAL);
        String firstPlace = up.lastAdvisedRange;
        m.setUsageHint(second, MemoryUsageHint.READ_MOSTLY);
        String secondPlace = up.lastAdvisedRange;
        m.deallocate(first);
        assertEquals(List.of(firstPlace), up.unadvised);

        assertEquals(1, m.defragment(CPU).toCompletableFuture().get(30, TimeUnit.SECONDS).blocksMoved());
        assertEquals(List.of(firstPlace, secondPlace), up.unadvised, "undone where the block was");
        assertEquals(firstPlace, up.lastAdvisedRange, "given again where it is now");
        assertEquals(MemoryUsageHint.READ_MOSTLY, up.lastHint);
    }
}
