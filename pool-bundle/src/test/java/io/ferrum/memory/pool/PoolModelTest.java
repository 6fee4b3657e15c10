package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.OutOfDeviceMemoryException;

/**
 * Thousands of seeded random operations on a real manager, checked against a plain model: a map
 * from handle to the bytes the block must hold. After every step the accounting must match the
 * model; every few steps (and after every defragmentation) the blocks must not overlap and every
 * byte must be what was last written into it.
 */
class PoolModelTest {
    private static final long KiB = 1024;
    private static final long MiB = 1024 * KiB;
    private static final long ALIGN = 256;
    private static final Device CPU = Device.cpu();
    private static final MemoryType[] TYPES = {MemoryType.GENERAL, MemoryType.TENSOR, MemoryType.CACHE};

    /** A live block as the model sees it: its bytes and the block size the pool must have given it. */
    private record Live(MemoryType type, byte[] bytes, long blockSize) {
    }

    @ParameterizedTest(name = "seed {0}, thread cache {1} bytes")
    @CsvSource({"1, 2097152", "42, 2097152", "20261202, 2097152", "1, 0", "42, 0", "20261202, 65536"})
    void randomOperationsMatchTheModel(long seed, long threadCache) {
        Random rnd = new Random(seed);
        ArenaUpstream up = new ArenaUpstream(24 * MiB);
        MemoryPoolConfig pool = MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).alignment(ALIGN).build();
        MemoryManagerConfig cfg = MemoryManagerConfig.defaults().withAutoGc(seed % 2 == 0, 0.85);
        for (MemoryType t : TYPES) {
            cfg = cfg.withPoolConfig(t, pool);
        }
        Map<MemoryHandle, Live> model = new LinkedHashMap<>();
        List<MemoryHandle> handles = new ArrayList<>();
        try (PooledMemoryManager m = PooledMemoryManager.create(up, cfg, PoolSettings.defaults().withThreadCache(threadCache), null)) {
            for (int step = 0; step < 3000; step++) {
                int op = rnd.nextInt(100);
                if (op < 40 || handles.isEmpty()) {
                    long size = 1 + (rnd.nextInt(4) == 0 ? rnd.nextInt(256 * 1024) : rnd.nextInt(4096));
                    MemoryType type = TYPES[rnd.nextInt(TYPES.length)];
                    try {
                        boolean aligned = rnd.nextInt(5) == 0;
                        MemoryHandle h = aligned
                                ? m.allocateAligned(size, 1L << (4 + rnd.nextInt(12)), type, CPU)
                                : m.allocate(size, type, CPU);
                        // Whatever the memory held before is unspecified (ZeroingPolicy.NONE): write it.
                        byte[] bytes = new byte[(int) size];
                        rnd.nextBytes(bytes);
                        MemorySegment s = m.mapMemory(h, MemoryAccess.WRITE_ONLY);
                        MemorySegment.copy(bytes, 0, s, ValueLayout.JAVA_BYTE, 0, bytes.length);
                        m.unmapMemory(h);
                        model.put(h, new Live(type, bytes, aligned || threadCache == 0 ? blockSize(size) : classSize(size)));
                        handles.add(h);
                    } catch (OutOfDeviceMemoryException e) {
                        assertTrue(m.memoryInfo().usedBytes() + size > 16 * MiB || e.getMessage().contains("capacity"),
                                "out of memory with room to spare: " + e.getMessage());
                    }
                } else if (op < 70) {
                    MemoryHandle h = handles.remove(rnd.nextInt(handles.size()));
                    m.deallocate(h);
                    model.remove(h);
                } else if (op < 85) {
                    MemoryHandle a = handles.get(rnd.nextInt(handles.size()));
                    MemoryHandle b = handles.get(rnd.nextInt(handles.size()));
                    byte[] src = model.get(a).bytes;
                    byte[] dst = model.get(b).bytes;
                    int size = rnd.nextInt(Math.min(src.length, dst.length) + 1);
                    int so = rnd.nextInt(src.length - size + 1);
                    int dO = rnd.nextInt(dst.length - size + 1);
                    m.copy(a, b, size, so, dO);
                    System.arraycopy(src, so, dst, dO, size); // memmove semantics, like the manager
                } else if (op < 95) {
                    MemoryHandle h = handles.get(rnd.nextInt(handles.size()));
                    byte[] bytes = model.get(h).bytes;
                    int from = rnd.nextInt(bytes.length);
                    int len = 1 + rnd.nextInt(bytes.length - from);
                    byte v = (byte) rnd.nextInt();
                    MemorySegment s = m.mapMemory(h, MemoryAccess.READ_WRITE);
                    s.asSlice(from, len).fill(v);
                    m.unmapMemory(h);
                    java.util.Arrays.fill(bytes, from, from + len, v);
                } else if (op < 98) {
                    m.defragment(CPU).toCompletableFuture().join();
                    checkLayoutAndContents(m, model);
                } else {
                    MemoryType t = TYPES[rnd.nextInt(TYPES.length)];
                    m.configurePool(CPU, t, m.poolConfig(t).toBuilder().growthIncrement((1 + rnd.nextInt(3)) * MiB).build());
                    if (rnd.nextBoolean()) {
                        m.trim();
                    }
                }
                checkAccounting(m, model, up);
                if (step % 100 == 0) {
                    checkLayoutAndContents(m, model);
                }
            }
            checkLayoutAndContents(m, model);
        }
        assertEquals(0, up.liveBytes(), "close gave every chunk back");
    }

    private static long blockSize(long requested) {
        return (Math.max(requested, 16) + ALIGN - 1) & -ALIGN;
    }

    /**
     * With thread caches on, plain allocations up to 256 KiB are rounded up to a size class: 16
     * classes per power of two (never finer than the pool alignment).
     */
    private static long classSize(long requested) {
        long b = blockSize(requested);
        if (b < 256 || b > 256 * KiB) {
            return b;
        }
        long step = Math.max(ALIGN, Long.highestOneBit(b) / 16);
        return (b + step - 1) / step * step;
    }

    private static void checkAccounting(PooledMemoryManager m, Map<MemoryHandle, Live> model, ArenaUpstream up) {
        MemoryInfo info = m.memoryInfo();
        long expectedUsed = model.values().stream().mapToLong(Live::blockSize).sum();
        assertEquals(expectedUsed, info.usedBytes(), "used = sum of live block sizes");
        assertEquals(model.size(), info.activeAllocations());
        assertEquals(info.totalBytes() - info.usedBytes(), info.freeBytes());
        assertEquals(up.liveBytes(), info.reservedBytes(), "reserved = what the upstream gave");
        assertTrue(info.usedBytes() <= info.reservedBytes());
        assertEquals(model.size(), m.handles().size());
        MemoryInfo quick = m.quickInfo();
        assertEquals(info.usedBytes(), quick.usedBytes(), "the lock-free counters agree");
        assertEquals(info.activeAllocations(), quick.activeAllocations());
    }

    private static void checkLayoutAndContents(PooledMemoryManager m, Map<MemoryHandle, Live> model) {
        record Span(MemoryHandle h, long start, long end) {
        }
        List<Span> spans = new ArrayList<>();
        for (Map.Entry<MemoryHandle, Live> e : model.entrySet()) {
            MemoryHandle h = e.getKey();
            byte[] expected = e.getValue().bytes;
            assertEquals(e.getValue().type, m.handleInfo(h).orElseThrow().memoryType());
            MemorySegment s = m.mapMemory(h, MemoryAccess.READ_ONLY);
            assertEquals(expected.length, s.byteSize());
            byte[] actual = s.toArray(ValueLayout.JAVA_BYTE);
            spans.add(new Span(h, s.address(), s.address() + e.getValue().blockSize()));
            m.unmapMemory(h);
            if (!java.util.Arrays.equals(expected, actual)) {
                fail("contents of " + h + " differ from what was last written");
            }
        }
        spans.sort(Comparator.comparingLong(Span::start));
        for (int i = 1; i < spans.size(); i++) {
            assertTrue(spans.get(i - 1).end <= spans.get(i).start,
                    "blocks overlap: " + spans.get(i - 1) + " and " + spans.get(i));
        }
    }
}
