package io.ferrum.memory.pool.internal;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

/**
 * The CPU the calling thread runs on, from the C library's {@code sched_getcpu} (an FFM downcall;
 * glibc reads it from the kernel's restartable-sequences area, a few nanoseconds). Virtual threads
 * pick the shared cache of the CPU they run on with it (docs/PERFORMANCE.md item 21), so that a
 * cache's blocks and their bytes stay in one core's caches.
 *
 * <p>The answer is a hint: the thread may move to another CPU at once. Nothing may depend on it for
 * correctness (the shared caches are held by lease). Where the call is not there (not Linux, no such
 * symbol, native access denied to this code) {@link #id} answers -1, and callers fall back to the
 * thread's id. The downcall is linked on first use, so that a JVM without virtual threads calling a
 * manager never links it.
 */
final class CurrentCpu {
    private CurrentCpu() {
    }

    /** @return the CPU the caller runs on now, 0 or more; or -1 where it cannot be known here */
    static int id() {
        MethodHandle h = Holder.SCHED_GETCPU;
        if (h == null) {
            return -1;
        }
        try {
            return (int) h.invokeExact();
        } catch (Throwable e) {
            return -1; // not reached: sched_getcpu only fails without the kernel's support, and says -1
        }
    }

    /** @return true if {@link #id} asks the C library */
    static boolean available() {
        return Holder.SCHED_GETCPU != null;
    }

    private static final class Holder {
        static final MethodHandle SCHED_GETCPU = link();

        private static MethodHandle link() {
            try {
                Linker linker = Linker.nativeLinker();
                SymbolLookup libc = linker.defaultLookup();
                return libc.find("sched_getcpu")
                        .map(s -> linker.downcallHandle(s, FunctionDescriptor.of(ValueLayout.JAVA_INT),
                                Linker.Option.critical(false)))
                        .orElse(null);
            } catch (RuntimeException | LinkageError e) {
                // IllegalCallerException where native access is denied; UnsupportedOperationException
                // on a platform without a native linker.
                return null;
            }
        }
    }
}
