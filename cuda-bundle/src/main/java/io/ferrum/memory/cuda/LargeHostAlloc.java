package io.ferrum.memory.cuda;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryException;

/**
 * {@code cuMemHostAlloc} of more than {@value Integer#MAX_VALUE} bytes, called on the driver itself
 * through FFM. JCuda's {@code cuMemHostAlloc} wraps the memory it got in a direct {@code ByteBuffer},
 * whose JNI constructor refuses a capacity above {@value Integer#MAX_VALUE} with an {@code
 * IllegalArgumentException}: after the driver allocated it, so the page-locked memory would be lost.
 * Smaller allocations keep going through JCuda.
 */
final class LargeHostAlloc {
    /** {@code CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)}, looked up on first use. */
    private static volatile MethodHandle cuMemHostAlloc;

    private LargeHostAlloc() {
    }

    /** @return whether JCuda can allocate {@code bytes} of page-locked memory itself */
    static boolean jcudaCanWrap(long bytes) {
        return bytes <= Integer.MAX_VALUE;
    }

    /**
     * Allocates page-locked host memory in the calling thread's current context.
     *
     * @return the address of the memory, to be freed with {@code cuMemFreeHost}
     * @throws io.ferrum.memory.api.OutOfDeviceMemoryException when the driver has not the memory
     * @throws MemoryException when the driver refuses otherwise, or cannot be called
     */
    static long allocate(long bytes, int flags, Device device) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ValueLayout.ADDRESS);
            int rc;
            try {
                rc = (int) handle().invokeExact(out, bytes, flags);
            } catch (RuntimeException | Error e) {
                throw e;
            } catch (Throwable e) {
                throw new MemoryException("cuMemHostAlloc of " + bytes + " bytes failed on " + device + ": " + e, e);
            }
            Cu.checkReserve(rc, device, "cuMemHostAlloc", bytes);
            return out.get(ValueLayout.ADDRESS, 0).address();
        }
    }

    private static MethodHandle handle() {
        MethodHandle h = cuMemHostAlloc;
        if (h == null) {
            // The library JCuda's JNI library links: already loaded, so this finds that one.
            SymbolLookup driver;
            try {
                driver = SymbolLookup.libraryLookup("libcuda.so.1", Arena.global());
            } catch (IllegalArgumentException | IllegalCallerException e) {
                throw new MemoryException("The CUDA driver (libcuda.so.1) cannot be called through FFM: " + e.getMessage(), e);
            }
            MemorySegment symbol = driver.find("cuMemHostAlloc")
                    .orElseThrow(() -> new MemoryException("libcuda.so.1 has no cuMemHostAlloc"));
            h = Linker.nativeLinker().downcallHandle(symbol, FunctionDescriptor.of(ValueLayout.JAVA_INT,
                    ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT));
            cuMemHostAlloc = h;
        }
        return h;
    }
}
