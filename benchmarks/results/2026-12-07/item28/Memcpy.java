import java.lang.foreign.*;
import java.lang.invoke.MethodHandle;
import java.util.*;
public class Memcpy {
    public static void main(String[] a) throws Throwable {
        int N = Integer.getInteger("n", 1 << 20);
        Linker L = Linker.nativeLinker();
        MethodHandle memcpy = L.downcallHandle(L.defaultLookup().find("memcpy").orElseThrow(),
            FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.ADDRESS, ValueLayout.JAVA_LONG), Linker.Option.critical(true));
        byte[] heap = new byte[N]; Arrays.fill(heap, (byte) 1);
        MemorySegment hs = MemorySegment.ofArray(heap);
        Arena arena = Arena.ofShared();
        int[] shifts = {0, 16};
        MemorySegment[] dst = new MemorySegment[4];
        for (int i = 0; i < 4; i++) { dst[i] = arena.allocate(N + 4096L, 4096).asSlice(shifts[i % 2], N); dst[i].fill((byte) 2); }
        String[] names = {"segcopy/dst+0", "segcopy/dst+16", "memcpy/dst+0", "memcpy/dst+16"};
        int rounds = 200, reps = 20; long[][] t = new long[4][rounds];
        Random rnd = new Random(5); int[] order = {0,1,2,3};
        for (int r = -50; r < rounds; r++) {
            for (int i = 3; i > 0; i--) { int j = rnd.nextInt(i + 1); int x = order[i]; order[i] = order[j]; order[j] = x; }
            for (int v : order) {
                MemorySegment d = dst[v];
                long t0 = System.nanoTime();
                for (int k = 0; k < reps; k++) {
                    if (v < 2) MemorySegment.copy(hs, 0, d, 0, N);
                    else { MemorySegment ignored = (MemorySegment) memcpy.invokeExact(d, hs, (long) N); }
                }
                if (r >= 0) t[v][r] = (System.nanoTime() - t0) / reps;
            }
        }
        for (int v = 0; v < 4; v++) { long[] x = t[v].clone(); Arrays.sort(x);
            System.out.printf("%-16s min %7d p25 %7d median %7d ns%n", names[v], x[0], x[rounds/4], x[rounds/2]); }
        if (dst[2].get(ValueLayout.JAVA_BYTE, N - 1) != 1) throw new AssertionError("memcpy did not copy");
    }
}
