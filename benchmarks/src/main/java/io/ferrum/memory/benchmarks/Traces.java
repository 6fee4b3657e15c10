package io.ferrum.memory.benchmarks;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.function.LongSupplier;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.OutOfDeviceMemoryException;

/**
 * Workloads 2-4 on Ferrum's CPU pool: the random-allocation trace (RMM's random_allocations shape),
 * a KV-cache paging trace, and "swiss cheese". Prints Markdown tables. Not JMH: these measure memory
 * (peak reserved / peak live, fragmentation) more than time.
 */
public final class Traces {
    private static final long KiB = 1024;
    private static final long MiB = 1024 * KiB;
    private static final long GiB = 1024 * MiB;

    private Traces() {
    }

    public static void main(String[] args) {
        System.out.println("### Workload 2: random-allocation trace (100k steps, p(alloc) = 0.73, live <= 1 GiB)");
        System.out.println();
        System.out.println("| sizes | seed | chunks | ns/op | peak live | peak reserved | peak reserved / peak live | after defragment: reserved / live |");
        System.out.println("|---|---|---|---|---|---|---|---|");
        for (long chunk : new long[] {32 * MiB, 16 * MiB}) {
            for (long seed : new long[] {1, 2}) {
                Random r = new Random(seed);
                randomTrace("uniform 1 B - 1 MiB", seed, chunk, () -> 1 + (long) (r.nextDouble() * MiB));
            }
            for (long seed : new long[] {1, 2}) {
                Random r = new Random(seed);
                double lo = Math.log(64);
                double hi = Math.log(16 * MiB);
                randomTrace("log-uniform 64 B - 16 MiB", seed, chunk, () -> (long) Math.exp(lo + r.nextDouble() * (hi - lo)));
            }
        }
        System.out.println();
        kvCache();
        System.out.println();
        System.out.println("### Workload 4: swiss cheese (512 MiB of alternating 1 MiB / 64 KiB blocks, 1 MiB ones freed, then 64 x 2 MiB)");
        System.out.println();
        System.out.println("| run | 2 MiB blocks that fit before growth | growth for 64 blocks | fragmentation before defragment | blocks moved | MiB moved | defragment time | ms per GiB moved |");
        System.out.println("|---|---|---|---|---|---|---|---|");
        for (int run = 1; run <= 3; run++) {
            swissCheese(run);
        }
    }

    private static MemoryPoolConfig pool(long chunk) {
        return MemoryPoolConfig.builder().initialSize(chunk).growthIncrement(chunk).stats(false).build();
    }

    private static void randomTrace(String name, long seed, long chunk, LongSupplier sizes) {
        Random r = new Random(seed * 31 + 7);
        try (AdvancedMemoryManager m = Contenders.ferrum(pool(chunk))) {
            List<MemoryHandle> live = new ArrayList<>();
            List<Long> liveSizes = new ArrayList<>();
            long liveBytes = 0;
            long peakLive = 0;
            long peakReserved = 0;
            long nanos = 0;
            int steps = 100_000;
            for (int i = 0; i < steps; i++) {
                long size = sizes.getAsLong();
                if ((r.nextDouble() < 0.73 && liveBytes + size <= GiB) || live.isEmpty()) {
                    if (liveBytes + size > GiB) {
                        continue;
                    }
                    long t0 = System.nanoTime();
                    MemoryHandle h = m.allocate(size, Contenders.CPU);
                    nanos += System.nanoTime() - t0;
                    live.add(h);
                    liveSizes.add(size);
                    liveBytes += size;
                } else {
                    int k = r.nextInt(live.size());
                    MemoryHandle h = live.get(k);
                    live.set(k, live.get(live.size() - 1));
                    live.remove(live.size() - 1);
                    liveBytes -= liveSizes.get(k);
                    liveSizes.set(k, liveSizes.get(liveSizes.size() - 1));
                    liveSizes.remove(liveSizes.size() - 1);
                    long t0 = System.nanoTime();
                    m.deallocate(h);
                    nanos += System.nanoTime() - t0;
                }
                peakLive = Math.max(peakLive, liveBytes);
                peakReserved = Math.max(peakReserved, m.memoryInfo().reservedBytes());
            }
            m.defragment(Contenders.CPU).toCompletableFuture().join();
            MemoryInfo after = m.memoryInfo();
            System.out.printf(Locale.ROOT, "| %s | %d | %s | %.0f | %s | %s | %.3f | %.3f |%n", name, seed, mib(chunk),
                    (double) nanos / steps,
                    mib(peakLive), mib(peakReserved), (double) peakReserved / peakLive,
                    liveBytes == 0 ? 0.0 : (double) after.reservedBytes() / liveBytes);
        }
    }

    private static void kvCache() {
        long block = 64 * KiB; // 16 tokens x 8 KV heads x 128 dims x fp16 x 2 (K and V)
        MemoryPoolConfig cfg = MemoryPoolConfig.builder().initialSize(64 * MiB).growthIncrement(64 * MiB).maxSize(GiB)
                .stats(false).build();
        Random r = new Random(7);
        try (AdvancedMemoryManager m = Contenders.ferrum(cfg)) {
            record Seq(List<MemoryHandle> blocks, long[] tokens, long target) {
            }
            List<Seq> active = new ArrayList<>();
            long admitted = 0;
            long blockAllocs = 0;
            long nanos = 0;
            long stalls = 0;
            double peakFragmentation = 0;
            long liveBlocks = 0;
            long peakLive = 0;
            long peakReserved = 0;
            for (int step = 0; step < 3000; step++) {
                // Admit sequences while their prompt fits.
                while (true) {
                    long prompt = 64 + r.nextInt(2048 - 64 + 1);
                    long output = 1 + (long) Math.floor(Math.log(1 - r.nextDouble()) / Math.log(1 - 1.0 / 256));
                    long blocks = (prompt + 15) / 16;
                    List<MemoryHandle> got = new ArrayList<>();
                    try {
                        for (int b = 0; b < blocks; b++) {
                            long t0 = System.nanoTime();
                            got.add(m.allocate(block, Contenders.CPU));
                            nanos += System.nanoTime() - t0;
                            blockAllocs++;
                        }
                    } catch (OutOfDeviceMemoryException full) {
                        got.forEach(m::deallocate);
                        break;
                    }
                    active.add(new Seq(got, new long[] {prompt}, prompt + output));
                    liveBlocks += got.size();
                    admitted++;
                }
                // One decode step: every sequence gains a token; a new block every 16 tokens.
                for (int i = active.size() - 1; i >= 0; i--) {
                    Seq s = active.get(i);
                    if (s.tokens[0] % 16 == 0) {
                        try {
                            long t0 = System.nanoTime();
                            s.blocks.add(m.allocate(block, Contenders.CPU));
                            nanos += System.nanoTime() - t0;
                            blockAllocs++;
                            liveBlocks++;
                        } catch (OutOfDeviceMemoryException full) {
                            stalls++;
                            continue;
                        }
                    }
                    s.tokens[0]++;
                    if (s.tokens[0] >= s.target) {
                        s.blocks.forEach(m::deallocate);
                        liveBlocks -= s.blocks.size();
                        active.remove(i);
                    }
                }
                MemoryInfo now = m.memoryInfo();
                peakFragmentation = Math.max(peakFragmentation, now.fragmentationRatio());
                peakLive = Math.max(peakLive, liveBlocks * block);
                peakReserved = Math.max(peakReserved, now.reservedBytes());
            }
            MemoryInfo before = m.memoryInfo();
            DefragmentationStats d = m.defragment(Contenders.CPU).toCompletableFuture().join();
            System.out.println("### Workload 3: KV-cache paging (64 KiB blocks, 1 GiB budget, 3000 decode steps)");
            System.out.println();
            System.out.println("| admitted sequences | block allocations | ns per block allocation | stalled token steps | peak live | peak reserved | peak reserved / peak live | peak fragmentation | fragmentation before / after defragment | reserved / used at end |");
            System.out.println("|---|---|---|---|---|---|---|---|---|---|");
            System.out.printf(Locale.ROOT, "| %d | %d | %.0f | %d | %s | %s | %.3f | %.3f | %.3f / %.3f | %.3f |%n", admitted, blockAllocs,
                    (double) nanos / blockAllocs, stalls, mib(peakLive), mib(peakReserved), (double) peakReserved / peakLive,
                    peakFragmentation, d.fragmentationBefore(), d.fragmentationAfter(),
                    before.usedBytes() == 0 ? 0.0 : (double) before.reservedBytes() / before.usedBytes());
        }
    }

    private static void swissCheese(int run) {
        MemoryPoolConfig cfg = MemoryPoolConfig.builder().initialSize(512 * MiB).growthIncrement(64 * MiB)
                .preAllocate(true).stats(false).build();
        try (AdvancedMemoryManager m = Contenders.ferrum(cfg)) {
            List<MemoryHandle> big = new ArrayList<>();
            List<MemoryHandle> small = new ArrayList<>();
            long used = 0;
            boolean large = true;
            while (used + (large ? MiB : 64 * KiB) <= 512 * MiB) {
                long size = large ? MiB : 64 * KiB;
                MemoryHandle h = m.allocate(size, Contenders.CPU);
                // Write every block once: memory in use has been touched (no first-touch page faults later).
                m.mapMemory(h, io.ferrum.memory.api.MemoryAccess.WRITE_ONLY).fill((byte) 1);
                m.unmapMemory(h);
                (large ? big : small).add(h);
                used += size;
                large = !large;
            }
            big.forEach(m::deallocate);
            long reserved0 = m.memoryInfo().reservedBytes();
            int fitBeforeGrowth = 0;
            List<MemoryHandle> twos = new ArrayList<>();
            for (int i = 0; i < 64; i++) {
                twos.add(m.allocate(2 * MiB, Contenders.CPU));
                if (m.memoryInfo().reservedBytes() == reserved0) {
                    fitBeforeGrowth++;
                }
            }
            long growth = m.memoryInfo().reservedBytes() - reserved0;
            twos.forEach(m::deallocate);
            double fragBefore = m.memoryInfo().fragmentationRatio();
            long t0 = System.nanoTime();
            DefragmentationStats d = m.defragment(Contenders.CPU).toCompletableFuture().join();
            long ns = System.nanoTime() - t0;
            double movedGiB = d.blocksMoved() * 64.0 * KiB / GiB;
            System.out.printf(Locale.ROOT, "| %d | %d | %s | %.3f | %d | %.1f | %.1f ms | %.0f |%n", run, fitBeforeGrowth, mib(growth),
                    fragBefore, d.blocksMoved(), movedGiB * 1024, ns / 1e6, movedGiB == 0 ? 0.0 : ns / 1e6 / movedGiB);
        }
    }

    private static String mib(long bytes) {
        return String.format(Locale.ROOT, "%.1f MiB", bytes / (double) MiB);
    }
}
