package io.ferrum.memory.cpu;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.util.Locale;
import java.util.Optional;

/**
 * The C library calls the CPU backend needs, as FFM downcalls: {@code posix_memalign}/{@code free}
 * for chunks that are not zeroed (an {@code Arena} always zeroes), {@code madvise} for hints and
 * prefetch (Linux only), {@code sysconf} for the size of physical memory.
 */
final class NativeMemory {
    private static final Linker LINKER = Linker.nativeLinker();
    private static final SymbolLookup LIBC = LINKER.defaultLookup();
    private static final boolean LINUX = System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("linux");
    private static final boolean MAC = System.getProperty("os.name", "").toLowerCase(Locale.ROOT).contains("mac");

    /** Linux madvise(2) advice values. */
    static final int MADV_NORMAL = 0;
    static final int MADV_RANDOM = 1;
    static final int MADV_SEQUENTIAL = 2;
    static final int MADV_WILLNEED = 3;

    private static final MethodHandle POSIX_MEMALIGN = downcall("posix_memalign",
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG));
    private static final MethodHandle FREE = downcall("free", FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));
    private static final MethodHandle MADVISE = LINUX ? downcall("madvise",
            FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT)) : null;
    private static final MethodHandle SYSCONF = downcall("sysconf",
            FunctionDescriptor.of(ValueLayout.JAVA_LONG, ValueLayout.JAVA_INT));

    private NativeMemory() {
    }

    private static MethodHandle downcall(String name, FunctionDescriptor fd) {
        MemorySegment symbol = LIBC.find(name).orElseThrow(() ->
                new UnsupportedOperationException("C library function " + name + " not found on this platform"));
        return LINKER.downcallHandle(symbol, fd);
    }

    /**
     * @return a native block of {@code bytes} aligned to {@code alignment}, not zeroed, or empty when
     *         the C library has no memory for it
     */
    static Optional<MemorySegment> allocate(long bytes, long alignment) {
        MemorySegment p;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment out = a.allocate(ValueLayout.ADDRESS);
            int rc = (int) POSIX_MEMALIGN.invokeExact(out, alignment, bytes);
            if (rc != 0) {
                return Optional.empty();
            }
            p = out.get(ValueLayout.ADDRESS, 0);
        } catch (Throwable t) {
            throw rethrow(t);
        }
        try {
            return Optional.of(p.reinterpret(bytes));
        } catch (Throwable t) {
            // The block exists: give it back, whatever went wrong after posix_memalign.
            try {
                free(p);
            } catch (Throwable notFreed) {
                t.addSuppressed(notFreed);
            }
            throw t;
        }
    }

    static void free(MemorySegment block) {
        try {
            FREE.invokeExact(MemorySegment.ofAddress(block.address()));
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * Advises the kernel about a range; rounds inwards to whole pages and does nothing where madvise
     * is not available. Advice is a hint: a failure is ignored.
     */
    static void advise(MemorySegment chunk, long offset, long bytes, int advice) {
        if (MADVISE == null) {
            return;
        }
        long page = pageSize();
        long start = chunk.address() + offset;
        long first = (start + page - 1) & -page;
        long end = (start + bytes) & -page;
        if (end <= first) {
            return;
        }
        try {
            int ignored = (int) MADVISE.invokeExact(MemorySegment.ofAddress(first), end - first, advice);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    static boolean adviceSupported() {
        return MADVISE != null;
    }

    static long pageSize() {
        long v = sysconf(LINUX ? 30 : MAC ? 29 : -1);
        return v > 0 ? v : 4096;
    }

    /** @return bytes of physical memory, or 0 when the platform does not say */
    static long physicalMemory() {
        long pages = sysconf(LINUX ? 85 : MAC ? 200 : -1);
        return pages > 0 ? pages * pageSize() : 0;
    }

    private static long sysconf(int name) {
        if (name < 0) {
            return -1;
        }
        try {
            return (long) SYSCONF.invokeExact(name);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    private static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException r) {
            return r;
        }
        if (t instanceof Error e) {
            throw e;
        }
        return new IllegalStateException(t);
    }
}
