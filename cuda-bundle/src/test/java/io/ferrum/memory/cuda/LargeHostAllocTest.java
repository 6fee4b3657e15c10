package io.ferrum.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryException;

/**
 * Which pinned allocations JCuda can make itself: its {@code cuMemHostAlloc} wraps the memory in a
 * direct ByteBuffer, and JDK 25's JNI {@code NewDirectByteBuffer} throws {@code
 * IllegalArgumentException: JNI NewDirectByteBuffer passed capacity > Integer.MAX_VALUE} beyond.
 * The driver's own call is {@code CudaDeviceGpuTest}'s to check (GPU suite).
 */
class LargeHostAllocTest {

    @Test
    void jcudaAllocatesUpTo2GiBLessOneByteAndTheDriverItselfBeyond() {
        assertTrue(LargeHostAlloc.jcudaCanWrap(Integer.MAX_VALUE));
        assertFalse(LargeHostAlloc.jcudaCanWrap(Integer.MAX_VALUE + 1L));
        assertFalse(LargeHostAlloc.jcudaCanWrap(64L << 30));
    }

    @Test
    void withoutADriverTheCallIsRefusedWithAMemoryException() {
        Gpu.assumeAbsent();
        MemoryException e = assertThrows(MemoryException.class,
                () -> LargeHostAlloc.allocate(3L << 30, 0, Device.cuda(0)));
        assertTrue(e.getMessage().contains("libcuda.so.1"), e.getMessage());
    }
}
