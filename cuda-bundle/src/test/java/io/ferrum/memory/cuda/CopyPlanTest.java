package io.ferrum.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Random;

import org.junit.jupiter.api.Test;

/**
 * {@link CopyPlan}'s arithmetic over every small case: the overlap order replayed through a bounce
 * buffer equals {@code memmove} for every distance, size and bounce size (a multiple of the bounce or
 * not, zero, ranges at both ends of the chunk), and the staging pieces cover every byte once.
 */
class CopyPlanTest {

    /** Replays the upstream's overlap loop on a heap array. */
    private static void bounceCopy(byte[] chunk, int src, int dst, int bytes, int bounceBytes) {
        boolean forward = CopyPlan.forward(src, dst);
        byte[] bounce = new byte[bounceBytes];
        long n = CopyPlan.pieces(bytes, bounceBytes);
        for (long k = 0; k < n; k++) {
            long off = CopyPlan.overlapPieceOffset(k, bytes, bounceBytes, forward);
            int len = (int) Math.min(bounceBytes, bytes - off);
            System.arraycopy(chunk, (int) (src + off), bounce, 0, len);
            System.arraycopy(bounce, 0, chunk, (int) (dst + off), len);
        }
    }

    @Test
    void overlapOrderIsMemmoveForEveryDistanceSizeAndBounce() {
        int chunkBytes = 40;
        for (int bounceBytes = 1; bounceBytes <= 12; bounceBytes++) {
            for (int bytes = 0; bytes <= chunkBytes; bytes++) {
                for (int src = 0; src + bytes <= chunkBytes; src++) {
                    for (int dst = 0; dst + bytes <= chunkBytes; dst++) {
                        byte[] expected = new byte[chunkBytes];
                        new Random(src * 31L + dst).nextBytes(expected);
                        byte[] actual = expected.clone();
                        System.arraycopy(expected, src, expected, dst, bytes);
                        bounceCopy(actual, src, dst, bytes, bounceBytes);
                        assertArrayEquals(expected, actual, "src " + src + " dst " + dst + " bytes " + bytes
                                + " bounce " + bounceBytes);
                    }
                }
            }
        }
    }

    @Test
    void overlapsIsTrueExactlyWhenTheRangesShareAByte() {
        for (int bytes = 0; bytes <= 9; bytes++) {
            for (int src = 0; src <= 20; src++) {
                for (int dst = 0; dst <= 20; dst++) {
                    boolean shared = false;
                    for (int b = 0; b < bytes; b++) {
                        shared |= src + b >= dst && src + b < dst + bytes;
                    }
                    assertEquals(shared, CopyPlan.overlaps(src, dst, bytes), src + " " + dst + " " + bytes);
                }
            }
        }
        assertFalse(CopyPlan.overlaps(Long.MAX_VALUE - 8, 0, 8));
        assertTrue(CopyPlan.overlaps(Long.MAX_VALUE - 16, Long.MAX_VALUE - 12, 8));
    }

    @Test
    void stagingPiecesCoverEveryByteOnceForSizesAroundTheSlot() {
        long slot = 4096;
        for (long bytes : new long[] {0, 1, slot - 1, slot, slot + 1, 2 * slot - 1, 2 * slot, 2 * slot + 1,
                63 * slot + 17, Long.MAX_VALUE}) {
            long n = CopyPlan.pieces(bytes, slot);
            assertEquals(Math.ceilDiv(bytes, slot), n, "pieces of " + bytes);
            if (n > 100) {
                // The last piece of a huge copy: no overflow in its offset or length.
                assertEquals(bytes - (n - 1) * slot, CopyPlan.pieceBytes(n - 1, bytes, slot));
                continue;
            }
            long next = 0;
            for (long i = 0; i < n; i++) {
                assertEquals(next, CopyPlan.pieceOffset(i, slot));
                long len = CopyPlan.pieceBytes(i, bytes, slot);
                assertTrue(len > 0 && len <= slot, "piece " + i + " of " + bytes + ": " + len);
                next += len;
            }
            assertEquals(bytes, next);
        }
    }

    @Test
    void ringCopiesArriveWholeForEverySizeAroundTheSlotAndEverySlotCount() {
        int slot = 64;
        for (int slots = 2; slots <= 5; slots++) {
            for (int bytes = 0; bytes <= 6 * slot + 1; bytes++) {
                byte[] data = new byte[bytes];
                new Random(bytes).nextBytes(data);
                StagingRingTest.FakeChannel up = new StagingRingTest.FakeChannel(Math.max(bytes, 1), slots, slot);
                StagingRing.upload(MemorySegment.ofArray(data), bytes, up);
                assertArrayEquals(data, bytes == 0 ? new byte[0] : up.device.asSlice(0, bytes).toArray(ValueLayout.JAVA_BYTE));
                StagingRingTest.FakeChannel down = new StagingRingTest.FakeChannel(Math.max(bytes, 1), slots, slot);
                MemorySegment.copy(MemorySegment.ofArray(data), 0, down.device, 0, bytes);
                byte[] out = new byte[bytes];
                StagingRing.download(MemorySegment.ofArray(out), bytes, down);
                assertArrayEquals(data, out, slots + " slots, " + bytes + " bytes");
                for (Runnable p : down.pending) {
                    assertEquals(null, p);
                }
            }
        }
    }
}
