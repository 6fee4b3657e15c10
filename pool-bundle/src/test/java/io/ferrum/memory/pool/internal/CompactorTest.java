package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.pool.PoolLog;
import io.ferrum.memory.pool.internal.PoolFixture.HeapChunk;
import io.ferrum.memory.pool.internal.PoolFixture.HeapUpstream;

/**
 * Compaction of one pool over heap chunks: live blocks slide to their chunk's start and the
 * emptiest chunk is evacuated into fuller ones, each moved block keeping its identity (so its
 * handle), its bytes and the pool's figures; a pinned, mapped or freed-while-pinned block never
 * moves, nor does anything in a chunk that holds one; nothing moves into an emptier or empty
 * chunk; a block moves only to an address its alignment allows; under zeroing on free the bytes a
 * block leaves behind are cleared.
 */
class CompactorTest {
    static final long KiB = 1024;

    private final PoolFixture f = new PoolFixture(256);
    private final HeapUpstream up = new HeapUpstream();
    private final HandleTable handles = new HandleTable();

    private PoolChunk chunk(long size, long address) {
        return f.add(HeapUpstream.chunk(size, address));
    }

    /** Carves a block and fills it with a pattern of {@code seed}. */
    private Block live(long size, int seed) {
        Block b = f.carve(size, 256);
        byte[] bytes = ((HeapChunk) b.chunk.device).bytes();
        for (int i = 0; i < size; i++) {
            bytes[(int) b.offset + i] = (byte) (seed + i * 31);
        }
        return b;
    }

    private static void assertContent(Block b, int seed) {
        byte[] bytes = ((HeapChunk) b.chunk.device).bytes();
        for (int i = 0; i < b.requested; i++) {
            if (bytes[(int) b.offset + i] != (byte) (seed + i * 31)) {
                throw new AssertionError("byte " + i + " of the block at " + b.offset + " differs");
            }
        }
    }

    private long compact(boolean scrub) {
        return new Compactor(up, scrub, PoolLog.NONE).compact(f.pool);
    }

    @Test
    void liveBlocksSlideToTheChunksStartKeepingBytesAndHandles() {
        chunk(64 * KiB, 1L << 20);
        Block hole1 = live(4 * KiB, 0);
        Block b = live(8 * KiB, 1);
        Block hole2 = live(4 * KiB, 0);
        Block d = live(4 * KiB, 2);
        long idB = handles.register(b);
        long idD = handles.register(d);
        f.pool.release(hole1);
        f.pool.release(hole2);
        long used = f.pool.used;

        assertEquals(2, compact(false));
        assertEquals(0, b.offset, "8 KiB slid over the 4 KiB hole before it (overlapping copy)");
        assertEquals(8 * KiB, d.offset);
        assertTrue(d.nextPhys.free);
        assertEquals(64 * KiB - 12 * KiB, d.nextPhys.size, "one free block after them");
        assertEquals(64 * KiB - 12 * KiB, f.pool.largestFree());
        assertContent(b, 1);
        assertContent(d, 2);
        assertSame(b, handles.lookup(idB), "the handle names the moved block");
        assertSame(d, handles.lookup(idD));
        assertEquals(used, f.pool.used);
        f.assertInvariants();
        assertEquals(0, compact(false), "a compact pool has nothing to move");
    }

    @Test
    void aPinnedAMappedOrAFreedWhilePinnedBlockNeverMoves() {
        for (int kind = 0; kind < 3; kind++) {
            PoolFixture g = new PoolFixture(256);
            g.add(HeapUpstream.chunk(64 * KiB, 1L << 20));
            Block hole = g.carve(4 * KiB, 256);
            Block fixed = g.carve(4 * KiB, 256);
            Block hole2 = g.carve(4 * KiB, 256);
            Block movable = g.carve(4 * KiB, 256);
            switch (kind) {
                case 0 -> fixed.pins = 1;
                case 1 -> fixed.mapping = new MappingState(null, null, null);
                default -> {
                    fixed.pins = 1;
                    fixed.freePending = true;
                }
            }
            g.pool.release(hole);
            g.pool.release(hole2);
            assertEquals(1, new Compactor(up, false, PoolLog.NONE).compact(g.pool), "kind " + kind);
            assertEquals(4 * KiB, fixed.offset, "kind " + kind + ": it stays where it was");
            assertEquals(8 * KiB, movable.offset, "the block after it slides into the hole after it");
            assertTrue(fixed.prevPhys.free);
            g.assertInvariants();
        }
    }

    @Test
    void aBlockMovesOnlyToAnAddressItsAlignmentAllows() {
        long base = 1L << 20;
        chunk(64 * KiB, base);
        Block hole = live(4 * KiB, 0);
        Block aligned = live(8 * KiB, 3);
        aligned.alignment = 8 * KiB; // the hole at the chunk's start is 8 KiB-aligned: it may go there
        Block hole2 = live(4 * KiB, 0);
        Block picky = live(4 * KiB, 4);
        picky.alignment = 32 * KiB;
        f.pool.release(hole);
        f.pool.release(hole2);

        compact(false);
        assertEquals(0, aligned.offset, "the hole at the chunk's start is 8 KiB-aligned");
        assertEquals(16 * KiB, picky.offset, "the free space from 8 KiB starts at no 32 KiB boundary: it stays");
        assertContent(aligned, 3);
        assertContent(picky, 4);
        f.assertInvariants();
    }

    @Test
    void theEmptiestChunkIsEvacuatedIntoAFullerOne() {
        PoolChunk fuller = chunk(64 * KiB, 1L << 20);
        List<Block> fill = new ArrayList<>();
        for (int i = 0; i < 12; i++) {
            fill.add(live(4 * KiB, 10 + i)); // 48 KiB of the first chunk
        }
        PoolChunk emptier = chunk(64 * KiB, 2L << 20);
        Block placeholder = f.carve(16 * KiB, 256); // the rest of the first chunk, so that...
        Block lone = live(8 * KiB, 5); // ...this lands in the second
        assertSame(emptier, lone.chunk);
        f.pool.release(placeholder); // 16 KiB of room in the fuller chunk
        long id = handles.register(lone);
        long used = f.pool.used;

        assertEquals(1, compact(false));
        assertSame(fuller, lone.chunk, "moved into the fuller chunk");
        assertEquals(48 * KiB, lone.offset);
        assertContent(lone, 5);
        assertSame(lone, handles.lookup(id));
        assertEquals(0, emptier.usedBytes);
        assertTrue(emptier.first.free);
        assertEquals(64 * KiB, emptier.first.size, "the emptied chunk is one free block, for trim to take");
        for (int i = 0; i < fill.size(); i++) {
            assertContent(fill.get(i), 10 + i);
        }
        assertEquals(used, f.pool.used);
        f.assertInvariants();
    }

    @Test
    void nothingMovesIntoAnEmptierOrEmptyChunk() {
        PoolChunk empty = chunk(64 * KiB, 1L << 20);
        Block placeholder = live(64 * KiB, 0); // keeps the empty chunk from the next carves
        PoolChunk sparse = chunk(64 * KiB, 2L << 20);
        Block a = live(8 * KiB, 6);
        Block b = live(8 * KiB, 7);
        PoolChunk full = chunk(64 * KiB, 3L << 20);
        live(64 * KiB, 8);
        f.pool.release(a); // the sparse chunk: a hole, then b
        f.pool.release(placeholder);
        int copiesBefore = up.copies.get();

        assertEquals(1, compact(false), "b slides down in its own chunk; nothing else moves");
        assertSame(sparse, b.chunk);
        assertEquals(0, b.offset);
        assertContent(b, 7);
        assertEquals(0, empty.usedBytes, "the empty chunk received nothing");
        assertEquals(64 * KiB, full.usedBytes);
        assertEquals(copiesBefore + 1, up.copies.get());
        f.assertInvariants();
    }

    @Test
    void aChunkHoldingAnUnmovableBlockIsNotEvacuated() {
        PoolChunk fuller = chunk(64 * KiB, 1L << 20);
        live(48 * KiB, 9);
        PoolChunk emptier = chunk(64 * KiB, 2L << 20);
        Block placeholder = f.carve(16 * KiB, 256); // the rest of the first chunk, so that...
        Block movable = live(4 * KiB, 1); // ...these land in the second
        Block mapped = live(4 * KiB, 2);
        mapped.mapping = new MappingState(null, null, null);
        assertSame(emptier, movable.chunk);
        f.pool.release(placeholder); // 16 KiB of room in the fuller chunk
        assertEquals(48 * KiB, fuller.usedBytes);

        compact(false);
        assertSame(emptier, movable.chunk, "its chunk cannot empty: nothing of it moves out");
        assertSame(emptier, mapped.chunk);
        assertEquals(0, movable.offset);
        assertEquals(4 * KiB, mapped.offset);
        f.assertInvariants();
    }

    @Test
    void underZeroingOnFreeTheBytesAMovedBlockLeavesAreCleared() {
        PoolChunk c = chunk(64 * KiB, 1L << 20);
        Block hole = live(4 * KiB, 0);
        Block b = live(6 * KiB, 1);
        f.pool.release(hole);
        byte[] bytes = ((HeapChunk) c.device).bytes();
        java.util.Arrays.fill(bytes, 0, (int) (4 * KiB), (byte) 0); // free memory holds zeros

        compact(true);
        assertEquals(0, b.offset);
        assertContent(b, 1);
        for (int i = (int) (6 * KiB); i < 10 * KiB; i++) {
            assertEquals(0, bytes[i], "byte " + i + " of the old place, not covered by the new one");
        }

        // Evacuation clears the whole old place.
        PoolChunk other = chunk(64 * KiB, 2L << 20);
        Block placeholder = f.carve(64 * KiB - 6 * KiB, 256); // the rest of the first chunk, so that...
        assertNotSame(other, placeholder.chunk);
        Block away = live(2 * KiB, 2); // ...this lands in the other
        assertSame(other, away.chunk);
        f.pool.release(placeholder); // 58 KiB of room in the fuller chunk
        long oldOffset = away.offset;
        compact(true);
        assertSame(c, away.chunk);
        assertContent(away, 2);
        byte[] old = ((HeapChunk) other.device).bytes();
        for (int i = 0; i < 2 * KiB; i++) {
            assertEquals(0, old[(int) oldOffset + i], "byte " + i + " left in the evacuated chunk");
        }
        f.assertInvariants();
    }
}
