package io.ferrum.memory.pool.internal;

/**
 * Stack a call on memory the CPU cannot address makes sure of before it takes anything: a scope, a
 * device writer's count, a hold or a reader's share, the pool's lock ({@link DataPath}, {@link
 * Transfers}). {@link #require} returns only if {@value #BYTES} bytes of stack are free below its
 * caller; else it throws the {@code StackOverflowError} itself, with nothing taken yet.
 *
 * <p><b>Why.</b> A {@code StackOverflowError} deeper in such a call (the device's copy, the caller's
 * action) unwinds into the call's {@code finally}, which gives back what was taken. Interpreted, that
 * exit needs no more stack than the way in did ({@link Scopes}, "Stack overflows"). Compiled, it may
 * need far more: an exception path the JIT never saw taken is not compiled, so the throw deoptimizes
 * the compiled frame (the caller's code and the engine's, inlined into one) into interpreter frames,
 * which are larger, and the exit's calls overflow in turn. With the JIT on, {@code
 * StagedActionOverflowProbe} and {@code ScopeOverflowProbe staged} left a scope (every later free
 * refused), a reader's share (kept by the block object into its next allocation: every write
 * refused) or the pool's lock (every later call on the pool hangs) in most runs of 100-300; the exits
 * needed between about 0.6 and 1.1 KiB more than the way in (docs/RELIABILITY.md). {@value #BYTES}
 * bytes leave room for larger callers inlined into the same frame. Host memory never calls this: its
 * calls stage nothing, and their scopes are its {@link Scopes}'s known limit.
 *
 * <p><b>How.</b> A method's entry is where the JVM checks its stack, interpreted or compiled (with
 * the same shadow zone below): {@link #dig} recurses {@value #FRAMES} frames, each holding 32 longs
 * live across its call, which no compiler can keep in registers (every register is the caller's to
 * save in HotSpot's calling convention) nor recompute after the call (they are loads, and the call
 * may change memory): at least 256 bytes a frame, compiled (285 measured on JDK 25, C2), 645
 * interpreted. About 180 ns, beside a device copy of microseconds.
 */
final class StackHeadroom {
    /** Stack that must be free below the caller of {@link #require}. */
    static final int BYTES = 8 * 1024;
    /** Frames of {@link #dig}: each at least 256 bytes. */
    static final int FRAMES = BYTES / 256;
    /** Read by every frame of {@link #dig}; all zero, but no compiler may assume so. */
    private static final long[] LIVE = new long[32];

    private StackHeadroom() {
    }

    /**
     * Returns if {@link #BYTES} bytes of stack are free below the caller.
     *
     * @throws StackOverflowError if they are not; the caller has taken nothing yet
     */
    static void require() {
        dig(FRAMES);
    }

    /** @return 0, once {@code frames} frames of at least 256 bytes each have been entered below this one */
    private static long dig(int frames) {
        if (frames <= 0) {
            return 0;
        }
        long[] s = LIVE;
        long a0 = s[0], a1 = s[1], a2 = s[2], a3 = s[3], a4 = s[4], a5 = s[5], a6 = s[6], a7 = s[7];
        long a8 = s[8], a9 = s[9], a10 = s[10], a11 = s[11], a12 = s[12], a13 = s[13], a14 = s[14], a15 = s[15];
        long b0 = s[16], b1 = s[17], b2 = s[18], b3 = s[19], b4 = s[20], b5 = s[21], b6 = s[22], b7 = s[23];
        long b8 = s[24], b9 = s[25], b10 = s[26], b11 = s[27], b12 = s[28], b13 = s[29], b14 = s[30], b15 = s[31];
        long below = dig(frames - 1);
        return below + (a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7 ^ a8 ^ a9 ^ a10 ^ a11 ^ a12 ^ a13 ^ a14 ^ a15)
                + (b0 ^ b1 ^ b2 ^ b3 ^ b4 ^ b5 ^ b6 ^ b7 ^ b8 ^ b9 ^ b10 ^ b11 ^ b12 ^ b13 ^ b14 ^ b15);
    }
}
