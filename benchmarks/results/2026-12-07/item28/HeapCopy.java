import java.lang.foreign.*;
import java.lang.reflect.Field;
import java.util.Arrays;

public class HeapCopy {
    static sun.misc.Unsafe U;
    static { try { Field f = sun.misc.Unsafe.class.getDeclaredField("theUnsafe"); f.setAccessible(true); U = (sun.misc.Unsafe) f.get(null);} catch (Exception e) { throw new Error(e);} }
    static final int N = Integer.getInteger("n", 1 << 20);
    public static void main(String[] a) {
        byte[] heap = new byte[N];
        Arrays.fill(heap, (byte) 1);
        MemorySegment hs = MemorySegment.ofArray(heap);
        Arena arena = Arena.ofShared();
        MemorySegment base = arena.allocate(N + 8192L, 4096);
        int[] shifts = {0, 16, 32, 48, 64};
        MemorySegment[] dst = new MemorySegment[shifts.length*2];
        for (int i = 0; i < shifts.length*2; i++) { dst[i] = arena.allocate(N + 4096L, 4096).asSlice(shifts[i/2], N); dst[i].fill((byte)2); }
        java.util.Random rnd = new java.util.Random(7); int[] order = new int[shifts.length*2]; for (int i=0;i<order.length;i++) order[i]=i;
        int rounds = Integer.getInteger("rounds", 200), reps = 20;
        String[] names = new String[shifts.length * 2];
        long[][] t = new long[names.length][rounds];
        for (int r = -50; r < rounds; r++) {
            for (int i = order.length - 1; i > 0; i--) { int j = rnd.nextInt(i + 1); int x = order[i]; order[i] = order[j]; order[j] = x; }
            for (int v : order) {
                MemorySegment d = dst[v];
                boolean unsafe = v % 2 == 1;
                names[v] = (unsafe ? "unsafe" : "segcopy") + "/dst+" + shifts[v / 2];
                long addr = d.address();
                long t0 = System.nanoTime();
                for (int k = 0; k < reps; k++) {
                    if (unsafe) U.copyMemory(heap, 16L, null, addr, N);
                    else MemorySegment.copy(hs, 0, d, 0, N);
                }
                long e = (System.nanoTime() - t0) / reps;
                if (r >= 0) t[v][r] = e;
            }
        }
        for (int v = 0; v < names.length; v++) {
            long[] x = t[v].clone(); Arrays.sort(x);
            System.out.printf("%-18s min %7d  p25 %7d  median %7d ns%n", names[v], x[0], x[rounds/4], x[rounds/2]);
        }
    }
}
