import java.lang.foreign.*;
import java.util.*;
public class Regions {
    public static void main(String[] a) {
        int size = 1 << 20;
        Arena arena = Arena.ofShared();
        if (Boolean.getBoolean("pad")) arena.allocate(64L << 20, 4096).fill((byte) 9);
        MemorySegment big = arena.allocate(256L << 20, 4096); if (Boolean.getBoolean("touchall")) big.fill((byte) 2); else big.asSlice(0, 1<<20).fill((byte)2); big.asSlice(128L<<20, 1<<20).fill((byte)2);
        MemorySegment big2 = arena.allocate(256L << 20, 4096); big2.fill((byte) 2);
        MemorySegment small = arena.allocate(4L << 20, 4096); small.fill((byte) 2);
        MemorySegment small2 = arena.allocate(4L << 20, 4096); small2.fill((byte) 2);
        MemorySegment[] dst = { big.asSlice(0, size), big2.asSlice(16, size), big.asSlice(128L << 20, size), big2.asSlice((128L << 20) + 16, size),
                small.asSlice(0, size), small2.asSlice(16, size) };
        String[] names = {"big@0", "big@16", "big@128M", "big@128M+16", "small@0", "small@16"};
        byte[] heap = new byte[size]; Arrays.fill(heap, (byte) 1);
        MemorySegment hs = MemorySegment.ofArray(heap);
        boolean fromNative = Boolean.getBoolean("native");
        MemorySegment src = fromNative ? arena.allocate(size, 4096).fill((byte) 1) : hs;
        int rounds = 200, reps = 20; long[][] t = new long[names.length][rounds];
        Random rnd = new Random(3); int[] order = {0,1,2,3,4,5};
        for (int r = -50; r < rounds; r++) {
            for (int i = order.length - 1; i > 0; i--) { int j = rnd.nextInt(i + 1); int x = order[i]; order[i] = order[j]; order[j] = x; }
            for (int k : order) {
                long t0 = System.nanoTime();
                for (int q = 0; q < reps; q++) MemorySegment.copy(src, 0, dst[k], 0, size);
                if (r >= 0) t[k][r] = (System.nanoTime() - t0) / reps;
            }
        }
        for (int k = 0; k < names.length; k++) { long[] x = t[k].clone(); Arrays.sort(x);
            System.out.printf("%-14s addr=%x %%4096=%4d min %7d p25 %7d median %7d ns%n", names[k], dst[k].address(), dst[k].address() % 4096, x[0], x[rounds/4], x[rounds/2]); }
    }
}
