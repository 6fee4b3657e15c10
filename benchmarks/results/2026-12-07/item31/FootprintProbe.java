package io.ferrum.memory.benchmarks;

import java.lang.foreign.MemorySegment;
import java.util.HashSet;
import java.util.function.LongUnaryOperator;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.netty.buffer.AdaptiveByteBufAllocator;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.PooledByteBufAllocator;

/**
 * PERFORMANCE item 31: how many distinct 4 KiB pages the touch workload (AllocTouchBenchmark,
 * mixed sizes) writes, per contender. Each step allocates the next size of the mixed sequence,
 * notes the address of the block's first byte, frees it; the pages of the block (one per 4 KiB,
 * as the touch writes them) are counted over the second half of the steps. With {@code 2}, a second
 * thread runs the same steps on the same allocator meanwhile (as JMH's {@code -t 2}); only the
 * first thread's pages are counted.
 *
 * <pre>java --enable-native-access=ALL-UNNAMED -cp benchmarks.jar:. io.ferrum.memory.benchmarks.FootprintProbe THREADS</pre>
 */
public class FootprintProbe {
    static final int STEPS = 400_000;

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 1;
        long[] sizes = Contenders.sizes("mixed");
        for (String name : new String[] {"ferrum", "nettyAdaptive", "nettyPooled", "malloc"}) {
            AdvancedMemoryManager ferrum = Contenders.ferrum(true);
            AdaptiveByteBufAllocator adaptive = new AdaptiveByteBufAllocator(true, true);
            PooledByteBufAllocator pooled = Contenders.nettyPooled();
            LongUnaryOperator step = switch (name) { // allocate n bytes, free them, return the address
                case "ferrum" -> n -> {
                    MemoryHandle h = ferrum.allocate(n, Contenders.CPU);
                    long a = ferrum.withMapped(h, MemoryAccess.WRITE_ONLY, MemorySegment::address);
                    ferrum.deallocate(h);
                    return a;
                };
                case "nettyAdaptive" -> n -> release(adaptive.directBuffer((int) n));
                case "nettyPooled" -> n -> release(pooled.directBuffer((int) n));
                default -> n -> {
                    MemorySegment p = Contenders.malloc(n);
                    Contenders.free(p);
                    return p.address();
                };
            };
            Thread other = null;
            if (threads > 1) {
                other = new Thread(() -> {
                    for (int i = 0; !Thread.currentThread().isInterrupted(); i++) {
                        step.applyAsLong(sizes[(i * 7) & (sizes.length - 1)]);
                    }
                });
                other.start();
            }
            HashSet<Long> pages = new HashSet<>();
            HashSet<Long> window = new HashSet<>();
            long windowSum = 0;
            int windows = 0;
            for (int i = 0; i < STEPS; i++) {
                long n = sizes[i & (sizes.length - 1)];
                long a = step.applyAsLong(n);
                if (i >= STEPS / 2) {
                    for (long o = 0; o < n; o += 4096) {
                        pages.add((a + o) >>> 12);
                        window.add((a + o) >>> 12);
                    }
                    if ((i + 1) % 100 == 0) {
                        windowSum += window.size();
                        windows++;
                        window.clear();
                    }
                }
            }
            if (other != null) {
                other.interrupt();
                other.join();
            }
            System.out.printf("%-14s threads %d: pages written in the last %d steps %6d (%5.1f MiB), per 100 steps %6.0f (%4.1f MiB)%n",
                    name, threads, STEPS / 2, pages.size(), pages.size() / 256.0,
                    (double) windowSum / windows, windowSum / (double) windows / 256.0);
            ferrum.close();
        }
    }

    private static long release(ByteBuf b) {
        long a = b.memoryAddress();
        b.release();
        return a;
    }
}
