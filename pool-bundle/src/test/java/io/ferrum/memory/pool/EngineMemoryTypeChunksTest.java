package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.EnumMap;
import java.util.Map;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryType;

/**
 * Issue 16: each memory type's pool reserves its chunks with its own type, so that a device whose
 * types are different memories (a GPU: device memory, page-locked host memory for PINNED, managed
 * memory for MAPPED) gives each pool its kind; and a block of one type is never carved from another
 * type's chunk.
 */
class EngineMemoryTypeChunksTest extends EngineTestSupport {
    @Test
    void everyPoolReservesItsChunksForItsOwnMemoryType() {
        HookedUpstream up = new HookedUpstream(256 * MiB);
        MemoryManagerConfig cfg = MemoryManagerConfig.defaults().withAutoGc(false, 0.85);
        for (MemoryType t : MemoryType.values()) {
            cfg = cfg.withPoolConfig(t, pool(MiB, MiB));
        }
        PooledMemoryManager m = PooledMemoryManager.create(up, cfg, PoolSettings.defaults(), null);
        toClose.add(m);
        Map<MemoryType, MemoryType> seen = new EnumMap<>(MemoryType.class);
        for (int round = 0; round < 2; round++) {
            for (MemoryType t : MemoryType.values()) {
                // 600 KiB twice: the second block of a type needs a second chunk of that type
                MemoryHandle h = m.allocate(600 * 1024, t, CPU);
                long address = m.withMapped(h, MemoryAccess.READ_ONLY, v -> v.address());
                MemoryType chunkType = up.typeOfChunkAt(address);
                assertEquals(t, chunkType, "a " + t + " block in a chunk reserved for " + chunkType);
                seen.put(t, chunkType);
            }
        }
        assertEquals(MemoryType.values().length, seen.size());
    }
}
