package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicInteger;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.DeviceChunk;
import io.ferrum.memory.pool.DeviceUpstream;

/**
 * What the unit tests of the pool's classes share: one pool without an engine over chunks whose
 * addresses the test chooses, an upstream whose chunks are heap arrays (so a test reads what a
 * copy or a fill did), blocks carved as the allocator would, and the pool's invariants.
 */
final class PoolFixture {
    static final long KiB = 1024;

    /** A chunk backed by a heap array, at an address the test chooses (only alignment uses it). */
    record HeapChunk(byte[] bytes, long address) implements DeviceChunk {
        @Override
        public long size() {
            return bytes.length;
        }
    }

    /** An upstream over heap arrays; copies are {@code System.arraycopy} (memmove semantics). */
    static final class HeapUpstream implements DeviceUpstream {
        final AtomicInteger copies = new AtomicInteger();
        final AtomicInteger fills = new AtomicInteger();

        /** @return a chunk of {@code size} bytes at {@code address} */
        static HeapChunk chunk(long size, long address) {
            return new HeapChunk(new byte[Math.toIntExact(size)], address);
        }

        @Override
        public Device device() {
            return Device.cpu();
        }

        @Override
        public String backendName() {
            return "heap";
        }

        @Override
        public long physicalCapacity() {
            return 1L << 30;
        }

        @Override
        public long chunkAlignment() {
            return 4 * KiB;
        }

        @Override
        public DeviceChunk reserve(long bytes) {
            throw new UnsupportedOperationException("tests add their chunks to the pool themselves");
        }

        @Override
        public void release(DeviceChunk chunk) {
        }

        private static byte[] bytes(DeviceChunk c) {
            return ((HeapChunk) c).bytes;
        }

        @Override
        public void copy(DeviceChunk src, long srcOffset, DeviceChunk dst, long dstOffset, long bytes) {
            copies.incrementAndGet();
            System.arraycopy(bytes(src), Math.toIntExact(srcOffset), bytes(dst), Math.toIntExact(dstOffset), Math.toIntExact(bytes));
        }

        @Override
        public void copyToHost(DeviceChunk src, long srcOffset, MemorySegment dst, long bytes) {
            MemorySegment.copy(MemorySegment.ofArray(bytes(src)), srcOffset, dst, 0, bytes);
        }

        @Override
        public void copyFromHost(MemorySegment src, DeviceChunk dst, long dstOffset, long bytes) {
            MemorySegment.copy(src, 0, MemorySegment.ofArray(bytes(dst)), dstOffset, bytes);
        }

        @Override
        public void fill(DeviceChunk chunk, long offset, long bytes, byte value) {
            fills.incrementAndGet();
            Arrays.fill(bytes(chunk), Math.toIntExact(offset), Math.toIntExact(offset + bytes), value);
        }
    }

    /** The device-wide figures the fixture's pool feeds. */
    final DeviceAccount account;
    final Pool pool;
    /** Names of the blocks {@link #carve} hands out, as the allocator names them (never 0). */
    private final java.util.concurrent.atomic.AtomicLong fakeIds = new java.util.concurrent.atomic.AtomicLong();

    /** A pool of unit {@code alignment}: initial size and growth 64 KiB, maxSize 256 KiB, no auto-GC. */
    PoolFixture(long alignment) {
        this(alignment, 1L << 30, Double.NaN);
    }

    /**
     * A pool of unit {@code alignment} (initial size and growth 64 KiB, maxSize 256 KiB) on a
     * device of {@code capacity} bytes, running auto-GC above {@code gcThreshold} (NaN: never).
     */
    PoolFixture(long alignment, long capacity, double gcThreshold) {
        account = new DeviceAccount(capacity, 4 * KiB);
        pool = new Pool(MemoryType.GENERAL, config(alignment, 256 * KiB), account, gcThreshold);
    }

    static MemoryPoolConfig config(long alignment, long maxSize) {
        return MemoryPoolConfig.builder().initialSize(64 * KiB).growthIncrement(64 * KiB)
                .alignment(alignment).maxSize(maxSize).build();
    }

    /** Adds {@code device} to the pool as one free block. @return its pool chunk */
    PoolChunk add(DeviceChunk device) {
        pool.addChunk(device);
        return pool.chunks.get(pool.chunks.size() - 1);
    }

    /**
     * Carves a live block as the allocator does: requested size and alignment set, and named (by an
     * id no handle table issued; a test that looks the block up registers it, which names it anew).
     * @return the block, or null
     */
    Block carve(long size, long alignment) {
        Block b = pool.carve(size, alignment);
        if (b != null) {
            b.requested = size;
            b.alignment = Math.max(alignment, SizeClasses.unit(pool.config));
            b.nameFirst(fakeIds.incrementAndGet());
        }
        return b;
    }

    /** The pool's invariants, and the device-wide figures it feeds equal to its own. */
    void assertInvariants() {
        long used = 0;
        long live = 0;
        long reserved = 0;
        for (PoolChunk c : pool.chunks) {
            reserved += c.size;
            long at = 0;
            long chunkUsed = 0;
            Block prev = null;
            for (Block b = c.first; b != null; b = b.nextPhys) {
                assertSame(c, b.chunk);
                assertSame(prev, b.prevPhys, "back link at offset " + b.offset);
                assertEquals(at, b.offset, "blocks tile the chunk in address order");
                assertTrue(b.size >= Pool.MIN_BLOCK);
                assertFalse(prev != null && prev.free && b.free, "two adjacent free blocks at " + b.offset);
                if (!b.free) {
                    chunkUsed += b.size;
                    live++;
                }
                at += b.size;
                prev = b;
            }
            assertEquals(c.size, at, "the blocks cover the chunk exactly");
            assertEquals(chunkUsed, c.usedBytes);
            used += chunkUsed;
        }
        assertEquals(used, pool.used);
        assertEquals(live, pool.live);
        assertEquals(reserved, pool.reserved);
        assertEquals(used, account.used());
        assertEquals(live, account.live());
    }
}
