package io.ferrum.memory.benchmarks;
import java.lang.foreign.*;
import java.util.*;
import io.ferrum.memory.api.*;
public class Dst {
    public static void main(String[] a) throws Exception {
        int size = Integer.getInteger("n", 1 << 20);
        long init = Long.getLong("init", 256L << 20);
        io.netty.buffer.ByteBuf n0 = Boolean.getBoolean("nettyFirst") ? Contenders.nettyPooled().directBuffer(size, size) : null; if (n0 != null) n0.setZero(0, size);
        AdvancedMemoryManager m = Contenders.ferrum(io.ferrum.memory.api.MemoryPoolConfig.builder().initialSize(init).growthIncrement(init).stats(true).build());
        MemoryHandle b = m.allocate(size, Contenders.CPU);
        MemorySegment v = m.mapMemory(b, MemoryAccess.READ_WRITE);
        v.fill((byte) 2);
        io.netty.buffer.ByteBuf n = n0 != null ? n0 : Contenders.nettyPooled().directBuffer(size, size);
        n.setZero(0, size);
        MemorySegment nv = MemorySegment.ofAddress(n.memoryAddress()).reinterpret(size);
        Arena arena = Arena.ofShared();
        MemorySegment fresh = arena.allocate(Long.getLong("big", 256L << 20), 4096).asSlice(Long.getLong("at", 0L), size); fresh.fill((byte) 3);
        MemorySegment fresh16 = arena.allocate(size + 4096, 4096).asSlice(16, size); fresh16.fill((byte) 3);
        byte[] heap = new byte[size]; Arrays.fill(heap, (byte) 1);
        MemorySegment hs = MemorySegment.ofArray(heap);
        String[] names = {"ferrumWrite", "rawIntoFerrumView", "segIntoNettyBuf", "nettySetBytes", "segIntoFresh4096", "segIntoFresh+16"};
        int rounds = Integer.getInteger("rounds", 200), reps = Integer.getInteger("reps", 20); long[][] t = new long[names.length][rounds];
        Random rnd = new Random(3); int[] order = {0,1,2,3,4,5};
        for (int r = -50; r < rounds; r++) {
            for (int i = order.length - 1; i > 0; i--) { int j = rnd.nextInt(i + 1); int x = order[i]; order[i] = order[j]; order[j] = x; }
            for (int k : order) {
                long t0 = System.nanoTime();
                for (int q = 0; q < reps; q++) {
                    switch (k) {
                        case 0 -> m.write(b, 0, hs);
                        case 1 -> MemorySegment.copy(hs, 0, v, 0, size);
                        case 2 -> MemorySegment.copy(hs, 0, nv, 0, size);
                        case 3 -> n.setBytes(0, heap, 0, size);
                        case 4 -> MemorySegment.copy(hs, 0, fresh, 0, size);
                        default -> MemorySegment.copy(hs, 0, fresh16, 0, size);
                    }
                }
                if (r >= 0) t[k][r] = (System.nanoTime() - t0) / reps;
            }
        }
        for (int k = 0; k < names.length; k++) { long[] x = t[k].clone(); Arrays.sort(x);
            System.out.printf("%-20s min %9d p25 %9d median %9d ns%n", names[k], x[0], x[rounds/4], x[rounds/2]); }
        System.out.printf("addr%%4096: ferrum %d netty %d fresh %d fresh16 %d%n", v.address()%4096, n.memoryAddress()%4096, fresh.address()%4096, fresh16.address()%4096);
    }
}
