package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.function.Executable;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;

/**
 * What the engine's feature tests ({@code Engine*Test}) share: managers over an {@link ArenaUpstream},
 * closed after each test in the order they were registered; pool configurations with a 256-byte
 * alignment and auto-GC off unless a test turns it on; a byte pattern to write and check; and
 * {@link #assertRejected}, which proves a refused call changed nothing visible.
 */
abstract class EngineTestSupport {
    static final long KiB = 1024;
    static final long MiB = 1024 * KiB;
    static final Device CPU = Device.cpu();

    /** Closed after each test, first to last: a manager registered with {@code add(0, m)} closes before its streams. */
    protected final List<AutoCloseable> toClose = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        for (AutoCloseable c : toClose) {
            c.close();
        }
    }

    static MemoryPoolConfig pool(long initial, long growth) {
        return MemoryPoolConfig.builder().initialSize(initial).growthIncrement(growth).alignment(256).build();
    }

    static MemoryManagerConfig config(MemoryPoolConfig general) {
        return MemoryManagerConfig.defaults().withPoolConfig(MemoryType.GENERAL, general).withAutoGc(false, 0.85);
    }

    PooledMemoryManager manager(ArenaUpstream up, MemoryManagerConfig cfg, PoolSettings settings) {
        PooledMemoryManager m = PooledMemoryManager.create(up, cfg, settings, null);
        toClose.add(m);
        return m;
    }

    PooledMemoryManager manager(ArenaUpstream up, MemoryPoolConfig general) {
        return manager(up, config(general), PoolSettings.defaults());
    }

    /** A log that keeps each warning as "message / cause's message" and drops the rest. */
    static PoolLog warningsInto(List<String> warnings) {
        return new PoolLog() {
            @Override
            public void warn(String message, Throwable cause) {
                warnings.add(message + " / " + (cause == null ? "" : cause.getMessage()));
            }

            @Override
            public void info(String message) {
            }
        };
    }

    /** Writes the pattern {@code seed + i * 31} over the whole of {@code h}. */
    static void write(PooledMemoryManager m, MemoryHandle h, byte seed) {
        MemorySegment s = m.mapMemory(h, MemoryAccess.WRITE_ONLY);
        for (long i = 0; i < s.byteSize(); i++) {
            s.set(ValueLayout.JAVA_BYTE, i, (byte) (seed + i * 31));
        }
        m.unmapMemory(h);
    }

    /** Fails unless {@code h} holds the pattern {@link #write} wrote with {@code seed}. */
    static void assertContent(PooledMemoryManager m, MemoryHandle h, byte seed) {
        MemorySegment s = m.mapMemory(h, MemoryAccess.READ_ONLY);
        for (long i = 0; i < s.byteSize(); i++) {
            if (s.get(ValueLayout.JAVA_BYTE, i) != (byte) (seed + i * 31)) {
                m.unmapMemory(h);
                throw new AssertionError("byte " + i + " of " + h + " differs");
            }
        }
        m.unmapMemory(h);
    }

    /** Asserts that {@code call} throws {@code type} and changes nothing visible. */
    static <T extends Throwable> T assertRejected(PooledMemoryManager m, Class<T> type, Executable call) {
        MemoryInfo before = m.memoryInfo();
        int handlesBefore = m.handles().size();
        T e = assertThrows(type, call);
        MemoryInfo after = m.memoryInfo();
        assertEquals(before.usedBytes(), after.usedBytes(), "used changed by a rejected call");
        assertEquals(before.reservedBytes(), after.reservedBytes(), "reserved changed by a rejected call");
        assertEquals(before.activeAllocations(), after.activeAllocations());
        assertEquals(handlesBefore, m.handles().size());
        assertFalse(e.getMessage() == null || e.getMessage().isBlank());
        return e;
    }
}
