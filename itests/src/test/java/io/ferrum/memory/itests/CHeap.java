package io.ferrum.memory.itests;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SegmentAllocator;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.Optional;
import java.util.OptionalLong;

/**
 * The C library's heap as glibc counts it ({@code mallinfo2}): where the cpu backend's chunks come
 * from ({@code posix_memalign}), so a chunk that is never given back stays in these figures whatever
 * the operating system does with freed pages. Empty where there is no glibc 2.33 or newer.
 */
final class CHeap {
    /** struct mallinfo2: ten size_t fields. */
    private static final MemoryLayout MALLINFO2 = MemoryLayout.sequenceLayout(10, ValueLayout.JAVA_LONG);
    /** Bytes in use in the arenas (uordblks). */
    private static final int UORDBLKS = 7;
    /** Bytes in blocks mmapped on their own (hblkhd), as large chunks are. */
    private static final int HBLKHD = 4;
    private static final Optional<MethodHandle> MALLINFO = find();

    private CHeap() {
    }

    private static Optional<MethodHandle> find() {
        if (ValueLayout.ADDRESS.byteSize() != Long.BYTES) {
            return Optional.empty();
        }
        Linker linker = Linker.nativeLinker();
        return linker.defaultLookup().find("mallinfo2")
                .map(symbol -> linker.downcallHandle(symbol, FunctionDescriptor.of(MemoryLayout.structLayout(
                        MALLINFO2.withName("fields")))));
    }

    /** @return bytes malloc has handed out and not had back, or empty without mallinfo2 */
    static OptionalLong inUse() {
        if (MALLINFO.isEmpty()) {
            return OptionalLong.empty();
        }
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment info = (MemorySegment) MALLINFO.get().invokeExact((SegmentAllocator) arena);
            return OptionalLong.of(info.getAtIndex(ValueLayout.JAVA_LONG, UORDBLKS)
                    + info.getAtIndex(ValueLayout.JAVA_LONG, HBLKHD));
        } catch (Throwable t) {
            throw new AssertionError("mallinfo2 failed", t);
        }
    }
}
