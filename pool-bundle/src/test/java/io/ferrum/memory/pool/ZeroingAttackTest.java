package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.pool.ReviewRacesTest.FlakyUpstream;

/**
 * An attack on the zeroing policies (a helper review, 2026-12): whatever path a block took, a new
 * owner under zeroing reads only zeros. Each test failed before its fix (docs/RELIABILITY.md).
 */
class ZeroingAttackTest extends RaceHarness {
    /** @return the defragmentation's failure, or null when it succeeded */
    static Throwable defragmentFailure(PooledMemoryManager m) throws Exception {
        try {
            m.defragment(CPU).toCompletableFuture().get(30, TimeUnit.SECONDS);
            return null;
        } catch (ExecutionException e) {
            return e.getCause();
        }
    }

    /**
     * zeroing=on-free: a slide's copy lands, then the device fails to clear what the block left
     * behind. The failure must not put those bytes on the free lists.
     */
    @Test
    void aSlideWhoseClearingFailsLeavesNoBytesForTheNextOwner() throws Exception {
        HookedUpstream hooked = new HookedUpstream(64 * MiB);
        FlakyUpstream up = new FlakyUpstream(hooked);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)),
                PoolSettings.defaults().withZeroing(ZeroingPolicy.ON_FREE), null);
        MemoryHandle hole = m.allocate(4 * KiB, CPU);
        MemoryHandle secret = m.allocate(4 * KiB, CPU);
        fill(m, secret, (byte) 0x5A);
        m.deallocate(hole);
        up.failNextFill.set(true); // the clearing of the 4 KiB the slide leaves behind
        Throwable failed = defragmentFailure(m);
        MemoryHandle next = m.allocate(4 * KiB, CPU);
        MemoryHandle after = m.allocate(4 * KiB, CPU);
        assertNull(firstOtherThan(m, next, (byte) 0), "defragment: " + failed);
        assertNull(firstOtherThan(m, after, (byte) 0), "defragment: " + failed);
        assertNull(firstOtherThan(m, secret, (byte) 0x5A), "the moved block kept its bytes");
    }

    /**
     * zeroing=on-free: an evacuation's copy lands, then the device fails to clear the emptied
     * block. The failure must not put those bytes on the free lists.
     */
    @Test
    void anEvacuationWhoseClearingFailsLeavesNoBytesForTheNextOwner() throws Exception {
        HookedUpstream hooked = new HookedUpstream(64 * MiB);
        FlakyUpstream up = new FlakyUpstream(hooked);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)),
                PoolSettings.defaults().withZeroing(ZeroingPolicy.ON_FREE), null);
        MemoryHandle[] full = new MemoryHandle[4];
        for (int i = 0; i < 4; i++) {
            full[i] = m.allocate(256 * KiB, CPU); // the first chunk, full
        }
        MemoryHandle secret = m.allocate(64 * KiB, CPU); // a second chunk
        fill(m, secret, (byte) 0x5A);
        m.deallocate(full[3]); // room for it in the fuller first chunk
        up.failNextFill.set(true); // the clearing of the 64 KiB the evacuation leaves behind
        Throwable failed = defragmentFailure(m);
        assertEquals(m.memoryInfo().usedBytes(), m.quickInfo().usedBytes(), "the place kept out of use, in both figures");
        MemoryHandle next = m.allocate(MiB - 64 * KiB, CPU); // fits only in the second chunk now
        assertNull(firstOtherThan(m, next, (byte) 0), "defragment: " + failed);
        assertNull(firstOtherThan(m, secret, (byte) 0x5A), "the moved block kept its bytes");
        assertTrue(hooked.violations.isEmpty(), hooked.violations.toString());
    }

    /**
     * zeroing=on-free: a block of 4000 requested bytes (4096 with the pool's 256) slides down 256
     * bytes, over its own old bytes: its old bytes 3744-3839 now lie past its requested ones. Its
     * free must clear them too.
     */
    @Test
    void aBlockSlidOverItsOwnBytesIsClearedWholeWhenFreed() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)),
                PoolSettings.defaults().withZeroing(ZeroingPolicy.ON_FREE), null);
        MemoryHandle hole = m.allocate(256, CPU);
        MemoryHandle secret = m.allocate(4000, CPU);
        fill(m, secret, (byte) 0x5A);
        m.deallocate(hole);
        assertNull(defragmentFailure(m));
        m.deallocate(secret);
        MemoryHandle next = m.allocate(4096, CPU);
        assertNull(firstOtherThan(m, next, (byte) 0));
    }

    /**
     * zeroing=on-free: the same block slides twice. After the first slide its old bytes 3744-3839
     * lie past its requested ones; the second slide leaves that place free, and must clear it too.
     */
    @Test
    void aBlockThatSlidesTwiceLeavesNoneOfItsBytesBehind() throws Exception {
        HookedUpstream up = new HookedUpstream(64 * MiB);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)),
                PoolSettings.defaults().withZeroing(ZeroingPolicy.ON_FREE), null);
        MemoryHandle first = m.allocate(256, CPU);
        MemoryHandle second = m.allocate(256, CPU);
        MemoryHandle secret = m.allocate(4000, CPU);
        fill(m, secret, (byte) 0x5A);
        m.deallocate(second);
        assertNull(defragmentFailure(m));
        m.deallocate(first);
        assertNull(defragmentFailure(m));
        MemoryHandle next = m.allocate(8 * KiB, CPU);
        assertNull(firstOtherThan(m, next, (byte) 0));
        assertNull(firstOtherThan(m, secret, (byte) 0x5A), "the moved block kept its bytes");
    }

    /**
     * zeroing=on-free: a slide's copy fails half-way, after writing 2 KiB of the block into the
     * free space before it. The failure moves nothing, and those bytes must not stay listed free.
     */
    @Test
    void aSlideWhoseCopyFailsHalfWayLeavesNoBytesForTheNextOwner() throws Exception {
        HookedUpstream hooked = new HookedUpstream(64 * MiB);
        FlakyUpstream up = new FlakyUpstream(hooked);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)),
                PoolSettings.defaults().withZeroing(ZeroingPolicy.ON_FREE), null);
        MemoryHandle hole = m.allocate(4 * KiB, CPU);
        MemoryHandle secret = m.allocate(4 * KiB, CPU);
        fill(m, secret, (byte) 0x5A);
        m.deallocate(hole);
        up.tearNextCopy.set(true);
        Throwable failed = defragmentFailure(m);
        MemoryHandle next = m.allocate(4 * KiB, CPU);
        assertNull(firstOtherThan(m, next, (byte) 0), "defragment: " + failed);
        assertNull(firstOtherThan(m, secret, (byte) 0x5A), "the block kept its bytes");
    }

    /**
     * zeroing=on-free: an evacuation's copy fails half-way, after writing 32 KiB of the block into
     * the destination it carved. The destination goes back to the free lists: without those bytes.
     */
    @Test
    void anEvacuationWhoseCopyFailsHalfWayLeavesNoBytesForTheNextOwner() throws Exception {
        HookedUpstream hooked = new HookedUpstream(64 * MiB);
        FlakyUpstream up = new FlakyUpstream(hooked);
        PooledMemoryManager m = manager(up, config(pool(MiB, MiB, 256)),
                PoolSettings.defaults().withZeroing(ZeroingPolicy.ON_FREE), null);
        MemoryHandle[] full = new MemoryHandle[4];
        for (int i = 0; i < 4; i++) {
            full[i] = m.allocate(256 * KiB, CPU);
        }
        MemoryHandle secret = m.allocate(64 * KiB, CPU);
        fill(m, secret, (byte) 0x5A);
        m.deallocate(full[3]);
        up.tearNextCopy.set(true);
        Throwable failed = defragmentFailure(m);
        assertEquals(m.memoryInfo().usedBytes(), m.quickInfo().usedBytes(), "the cleared destination, free in both figures");
        MemoryHandle next = m.allocate(192 * KiB, CPU); // the first chunk's last 256 KiB: the destination's place
        assertNull(firstOtherThan(m, next, (byte) 0), "defragment: " + failed);
        assertNull(firstOtherThan(m, secret, (byte) 0x5A), "the block kept its bytes");
    }
}
