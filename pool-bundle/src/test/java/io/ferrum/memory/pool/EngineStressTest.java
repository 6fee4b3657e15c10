package io.ferrum.memory.pool;

import static org.junit.jupiter.api.Assertions.fail;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Phaser;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.EventHandle;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryMapping;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.OutOfDeviceMemoryException;
import io.ferrum.memory.api.StreamHandle;

/**
 * Seeded stress of the pool engine across two devices (two managers of one backend, mapped to each
 * other through {@link PoolSettings#peers()}): 2-4 threads mix allocate (plain and aligned), free,
 * copy, copyAsync on several streams, map/unmap, mappings across the devices, defragment, trim and
 * configurePool; every round the threads meet, the accounting is checked at that quiet point, and
 * then they race to free or use one shared set of handles, where exactly one free of each handle
 * must win. Every block is checked against the bytes its owner last put there.
 *
 * <p>What must hold: used = sum of live block sizes on each device at every quiet point (exact where
 * the sizes are known; within the thread caches' 12.5 % where a cache may hand out a larger block,
 * or while an alignment change races an allocation), every live block holds exactly its last
 * pattern, a fresh block is all zero under a zeroing policy, no exception reaches a caller but the
 * documented ones ({@link OutOfDeviceMemoryException} on allocation, {@link InvalidHandleException}
 * for a handle another thread freed, {@link InvalidMemoryRequestException} for a refused
 * configuration or an unmap of a view another thread closed, and {@link IllegalStateException} only
 * from reading a view another thread's free or unmap closed), and closing both managers gives every
 * chunk back. The upstream's memory is bounds-checked FFM memory, so a use after release is an
 * {@code IllegalStateException} from an engine call (a failure here), not a crash.
 *
 * <p>Time: {@code -Dferrum.stress.seconds} (default 5) for all enabled variants together, split evenly;
 * the long profile is {@code -Dferrum.stress.seconds=60}. The seed is random unless
 * {@code -Dferrum.stress.seed} gives one; every failure message names it (thread interleavings are
 * not replayed, each thread's operations are). {@code -Dferrum.stress.without=defragment,trim}
 * leaves operations out, to narrow a failure down. See docs/RELIABILITY.md.
 */
class EngineStressTest {
    private static final long KiB = 1024;
    private static final long MiB = 1024 * KiB;
    private static final Device DEV_A = Device.cpu(1);
    private static final Device DEV_B = Device.cpu(2);
    private static final long TOTAL_SECONDS = Long.getLong("ferrum.stress.seconds", 5);
    private static final long SEED = Long.getLong("ferrum.stress.seed", System.nanoTime());
    /** Operations left out, for narrowing a failure down: {@code -Dferrum.stress.without=defragment,copy_async}. */
    private static final Set<String> WITHOUT = Set.of(
            System.getProperty("ferrum.stress.without", "").toUpperCase(Locale.ROOT).split(","));
    /** A bound on a hang (a barrier, a stage, a join), never a figure any check relies on. */
    private static final long HANG_S = 30;
    /** Operations each thread runs between two quiet points. */
    private static final int OPS_PER_ROUND = 200;
    private static final int MAX_OWN = 48;
    private static final long BASE_ALIGN = 256;
    /** Largest thread-cached block (SizeClasses.MAX_BLOCK) and largest block rounded to a class (MAX_CLASS). */
    private static final long CACHE_MAX_BLOCK = 4 * MiB;
    private static final long CACHE_MAX_CLASS = 256 * KiB;

    /** One variant of the run. */
    private record Variant(String name, ZeroingPolicy zeroing, boolean alignmentChanges, boolean raceMappingHandles) {
    }

    enum Op {
        ALLOCATE, ALLOCATE_ALIGNED, CREATE_MAPPING, FREE, FREE_MAPPED, WRITE, VERIFY, COPY, COPY_ASYNC, EVENT,
        DEFRAGMENT, TRIM, CONFIGURE, RACE_FREE, RACE_USE
    }

    @Test
    void mixedTrafficOnTwoDevicesKeepsEveryByteAndEveryCount() throws Exception {
        run(new Variant("zeroing none", ZeroingPolicy.NONE, false, false));
    }

    @Test
    void zeroingOnAllocateUnderTheSameTraffic() throws Exception {
        run(new Variant("zeroing on-allocate", ZeroingPolicy.ON_ALLOCATE, false, false));
    }

    @Test
    void zeroingOnFreeUnderTheSameTraffic() throws Exception {
        run(new Variant("zeroing on-free", ZeroingPolicy.ON_FREE, false, false));
    }

    @Test
    void configurePoolChangingTheAlignmentUnderTraffic() throws Exception {
        run(new Variant("alignment changes", ZeroingPolicy.NONE, true, false));
    }

    @Test
    void racingFreesOfBothHandlesOfAMapping() throws Exception {
        run(new Variant("mapping handles raced", ZeroingPolicy.NONE, false, true));
    }

    // ================================================================ the model

    /** A name of a live block: a handle and the manager whose table issued it. */
    private record Name(PooledMemoryManager manager, MemoryHandle handle) {
        @Override
        public String toString() {
            return handle + "@" + manager.device();
        }
    }

    /** A block as its owner sees it: its names, its bytes, and bounds on the size the pool gave it. */
    private static final class Live {
        final PooledMemoryManager home;
        final MemoryHandle primary;
        final List<Name> names = new ArrayList<>(2);
        final byte[] bytes;
        final long lo;
        final long hi;
        CompletableFuture<Void> busy;

        Live(PooledMemoryManager home, MemoryHandle primary, long size, long lo, long hi) {
            this.home = home;
            this.primary = primary;
            this.bytes = new byte[(int) size];
            this.lo = lo;
            this.hi = hi;
        }

        boolean primaryAlive() {
            for (Name n : names) {
                if (n.handle.equals(primary)) {
                    return true;
                }
            }
            return false;
        }

        @Override
        public String toString() {
            return names + " " + bytes.length + " B";
        }
    }

    /** One handle of the shared set a round races on, and what happened to it. */
    private static final class Raced {
        final Name name;
        final Live block;
        final int designated;
        final AtomicInteger frees = new AtomicInteger();
        final AtomicInteger refused = new AtomicInteger();

        Raced(Name name, Live block, int designated) {
            this.name = name;
            this.block = block;
            this.designated = designated;
        }
    }

    /** An exception the API documents for what was done: not a failure of the engine. */
    private static final class Expected extends RuntimeException {
        Expected(Throwable cause) {
            super(cause);
        }
    }

    // ================================================================ the run

    private final class Run {
        final Variant variant;
        final long baseSeed;
        final long seed;
        final int threads;
        final ArenaUpstream upA = new ArenaUpstream(DEV_A, 256 * MiB, true);
        final ArenaUpstream upB = new ArenaUpstream(DEV_B, 256 * MiB, true);
        final Map<Device, PooledMemoryManager> running = new ConcurrentHashMap<>();
        final HostStreamManager streamsA = new HostStreamManager(DEV_A);
        final HostStreamManager streamsB = new HostStreamManager(DEV_B);
        final PooledMemoryManager a;
        final PooledMemoryManager b;
        final List<PooledMemoryManager> managers;
        final Map<PooledMemoryManager, HostStreamManager> streamsOf = new HashMap<>();
        final Map<PooledMemoryManager, ArenaUpstream> upstreamOf = new HashMap<>();
        final ConcurrentLinkedQueue<String> failures = new ConcurrentLinkedQueue<>();
        final ConcurrentLinkedQueue<String> warnings = new ConcurrentLinkedQueue<>();
        final Map<Op, LongAdder> counts = new EnumMap<>(Op.class);
        final LongAdder documented = new LongAdder();
        final LongAdder viewsClosedUnderReader = new LongAdder();
        final LongAdder interruptFlagsCleared = new LongAdder();
        /** The threads meet here at each quiet point; a timed-out wait does not break it, so a failing thread may just leave. */
        final Phaser barrier;
        final Worker[] workers;
        final long deadline;
        volatile boolean stop;
        volatile long stoppedAt;
        volatile boolean finish;
        /** Odd while a configurePool that changes the alignment runs; bumped before and after it. */
        final AtomicLong alignEpoch = new AtomicLong();
        final java.util.concurrent.locks.ReentrantLock alignChange = new java.util.concurrent.locks.ReentrantLock();
        volatile long poolAlign = BASE_ALIGN;
        volatile List<Raced> raceSet = List.of();
        /** Handles of the shared set that the leader frees after the race, not raced. */
        final List<Name> freedAfterRace = new ArrayList<>();
        final Map<PooledMemoryManager, Long> usedBeforeRace = new HashMap<>();
        int rounds;

        Run(Variant variant, long baseSeed, long millis) {
            this.variant = variant;
            this.baseSeed = baseSeed;
            // String hashes are stable across JVMs: the same base seed replays the same variant seeds.
            this.seed = baseSeed * 1_000_003 + variant.name.hashCode();
            Random r = new Random(seed);
            this.threads = 2 + r.nextInt(3);
            for (Op op : Op.values()) {
                counts.put(op, new LongAdder());
            }
            PoolLog log = new PoolLog() {
                @Override
                public void warn(String message, Throwable cause) {
                    warnings.add(message + (cause == null ? "" : " (" + cause + ")"));
                }

                @Override
                public void info(String message) {
                }
            };
            PoolSettings settings = PoolSettings.defaults().withZeroing(variant.zeroing).withLog(log).withPeers(running::get);
            MemoryManagerConfig cfg = MemoryManagerConfig.defaults()
                    .withPoolConfig(MemoryType.GENERAL, config(0))
                    .withAutoGc(true, 0.85);
            a = PooledMemoryManager.create(upA, cfg, settings, streamsA);
            b = PooledMemoryManager.create(upB, cfg, settings, streamsB);
            running.put(DEV_A, a);
            running.put(DEV_B, b);
            managers = List.of(a, b);
            streamsOf.put(a, streamsA);
            streamsOf.put(b, streamsB);
            upstreamOf.put(a, upA);
            upstreamOf.put(b, upB);
            barrier = new Phaser(threads);
            workers = new Worker[threads];
            for (int t = 0; t < threads; t++) {
                workers[t] = new Worker(t, seed * 31 + t);
            }
            deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        }

        String where() {
            return "[seed " + seed + ", " + variant.name + ", " + threads + " threads; replay with -Dferrum.stress.seed="
                    + baseSeed + "]";
        }

        /** The pool configurations configurePool switches between; alignment changes only in that variant. */
        MemoryPoolConfig config(int which) {
            MemoryPoolConfig.Builder c = MemoryPoolConfig.builder().initialSize(MiB).growthIncrement(MiB).alignment(BASE_ALIGN);
            return switch (which) {
                case 1 -> c.growthIncrement(2 * MiB).maxSize(48 * MiB).build();
                case 2 -> c.initialSize(2 * MiB).preAllocate(true).build();
                case 3 -> c.alignment(1024).build();
                case 4 -> c.alignment(4096).build();
                // Above the upstream's chunk alignment (4096): refused, or honoured (issue 13, defect 6).
                case 5 -> c.alignment(8192).build();
                default -> c.build();
            };
        }

        long blockSize(long requested, long align) {
            long unit = Math.max(align, 16);
            return (Math.max(requested, 16) + unit - 1) & -unit;
        }

        /** @return {lo, hi} bounds of the block size the pool gives a plain allocation of {@code size} */
        long[] plainBounds(long size, long alignLo, long alignHi) {
            boolean caches = variant.zeroing == ZeroingPolicy.NONE;
            long lo = blockSize(size, alignLo);
            long hi = blockSize(size, alignHi);
            if (caches) {
                lo = classSize(lo, Math.max(alignLo, 16));
                hi = classSize(hi, Math.max(alignHi, 16));
                if (hi >= CACHE_MAX_CLASS && hi <= CACHE_MAX_BLOCK) {
                    // A block a thread cache hands back may be up to two classes (1/8 of the power of two)
                    // larger. So may one of exactly MAX_CLASS: its bin also holds larger blocks above it.
                    hi += Long.highestOneBit(hi) >>> 3;
                }
            }
            return new long[] {lo, hi};
        }

        long classSize(long block, long unit) {
            if (block > CACHE_MAX_CLASS || block < 256) {
                return block;
            }
            long step = Math.max(unit, Long.highestOneBit(block) >>> 4);
            return (block + step - 1) & -step;
        }

        void failure(Worker w, String what, Throwable e) {
            StringBuilder s = new StringBuilder();
            s.append(where()).append(" thread ").append(w == null ? "main" : w.index)
                    .append(w == null ? "" : " op " + w.ops).append(": ").append(what);
            if (e != null) {
                s.append("\n  ").append(e);
                StackTraceElement[] st = e.getStackTrace();
                for (int i = 0; i < Math.min(st.length, 12); i++) {
                    s.append("\n    at ").append(st[i]);
                }
                if (e.getCause() != null) {
                    s.append("\n  caused by ").append(e.getCause());
                }
            }
            if (w != null) {
                s.append("\n  last operations of thread ").append(w.index).append(":");
                for (String line : w.recent) {
                    s.append("\n    ").append(line);
                }
            }
            failures.add(s.toString());
            if (!stop) {
                stoppedAt = System.nanoTime();
                stop = true;
            }
        }

        // ------------------------------------------------------------ quiet-point checks (one thread)

        void checkAccounting(String when) {
            for (PooledMemoryManager m : managers) {
                long lo = 0;
                long hi = 0;
                long count = 0;
                Map<MemoryHandle, Long> listed = new HashMap<>();
                for (Worker w : workers) {
                    for (Live l : w.mine) {
                        if (l.home == m) {
                            lo += l.lo;
                            hi += l.hi;
                            count++;
                        }
                        // Each manager lists the handles it issued: the device that holds a block, its
                        // first handle (or, that freed, its own alias); the peer that issued an alias, the alias.
                        Name own = null;
                        for (Name n : l.names) {
                            if (n.manager == m && (own == null || n.handle.equals(l.primary))) {
                                own = n;
                            }
                        }
                        if (own != null) {
                            listed.put(own.handle, (long) l.bytes.length);
                        }
                    }
                }
                MemoryInfo info = m.memoryInfo();
                MemoryInfo quick = m.quickInfo();
                String at = when + " on " + m.device();
                if (info.usedBytes() < lo || info.usedBytes() > hi) {
                    failure(null, at + ": used " + info.usedBytes() + " is not the sum of the live block sizes ("
                            + (lo == hi ? "exactly " + lo : "between " + lo + " and " + hi) + ")", null);
                }
                if (info.activeAllocations() != count) {
                    failure(null, at + ": " + info.activeAllocations() + " allocations counted, " + count + " live", null);
                }
                if (quick.usedBytes() != info.usedBytes() || quick.activeAllocations() != info.activeAllocations()) {
                    failure(null, at + ": quickInfo " + quick + " disagrees with memoryInfo " + info + " at a quiet point", null);
                }
                if (info.usedBytes() > info.reservedBytes() || info.reservedBytes() != upstreamOf.get(m).liveBytes()) {
                    failure(null, at + ": used " + info.usedBytes() + ", reserved " + info.reservedBytes()
                            + ", upstream holds " + upstreamOf.get(m).liveBytes(), null);
                }
                Map<MemoryHandle, Long> actual = new HashMap<>();
                for (MemoryHandleInfo i : m.handles()) {
                    actual.put(i.handle(), i.size());
                }
                if (!actual.equals(listed)) {
                    Map<MemoryHandle, Long> missing = new HashMap<>(listed);
                    missing.keySet().removeAll(actual.keySet());
                    Map<MemoryHandle, Long> extra = new HashMap<>(actual);
                    extra.keySet().removeAll(listed.keySet());
                    failure(null, at + ": handles() differs from the live blocks: missing " + missing + ", not live " + extra,
                            null);
                }
            }
        }

        /** The leader, between the barriers before the race: checks, then builds the shared set. */
        void prepareRace(Worker leader) {
            checkAccounting("round " + rounds + ", quiet point");
            usedBeforeRace.clear();
            for (PooledMemoryManager m : managers) {
                usedBeforeRace.put(m, m.memoryInfo().usedBytes());
            }
            Random rnd = leader.rnd;
            List<Raced> set = new ArrayList<>();
            int plain = 4 + rnd.nextInt(5);
            for (int i = 0; i < plain; i++) {
                PooledMemoryManager m = managers.get(rnd.nextInt(2));
                long size = leader.size();
                try {
                    MemoryHandle h = m.allocate(size, MemoryType.GENERAL, m.device());
                    long align = poolAlign;
                    long[] bounds = align > 0 ? plainBounds(size, align, align) : plainBounds(size, BASE_ALIGN, 8192);
                    Live l = new Live(m, h, size, bounds[0], bounds[1]);
                    l.names.add(new Name(m, h));
                    leader.fill(l, 0, l.bytes.length);
                    set.add(new Raced(l.names.getFirst(), l, rnd.nextInt(threads)));
                } catch (OutOfDeviceMemoryException e) {
                    documented.increment();
                }
            }
            {
                // A mapping, usually across the devices: its alias (issued by the other manager) is raced;
                // both of its handles only in the variant that races them (issue 13, defect 4).
                PooledMemoryManager m = managers.get(rnd.nextInt(2));
                PooledMemoryManager other = rnd.nextBoolean() ? m : managers.get(1 - managers.indexOf(m));
                long size = leader.size();
                try {
                    MemoryMapping mm = m.createMapping(m.device(), other.device(), size);
                    long bs = blockSize(size, BASE_ALIGN);
                    Live l = new Live(m, mm.source(), size, bs, bs);
                    l.names.add(new Name(m, mm.source()));
                    l.names.add(new Name(other, mm.target()));
                    leader.fill(l, 0, l.bytes.length);
                    int first = rnd.nextInt(threads);
                    int second = (first + 1 + rnd.nextInt(threads - 1)) % threads;
                    set.add(new Raced(l.names.get(1), l, second));
                    if (variant.raceMappingHandles) {
                        set.add(new Raced(l.names.get(0), l, first));
                    } else {
                        freedAfterRace.add(l.names.get(0));
                    }
                } catch (OutOfDeviceMemoryException e) {
                    documented.increment();
                }
            }
            raceSet = List.copyOf(set);
        }

        /** The leader, after the race: each handle freed exactly once, and the memory back to where it was. */
        void checkRace() {
            for (Raced r : raceSet) {
                if (r.frees.get() != 1) {
                    failure(null, "round " + rounds + ": " + r.name + " was freed " + r.frees.get() + " times by racing threads ("
                            + r.refused.get() + " refused); exactly one free must win", null);
                }
            }
            raceSet = List.of();
            for (Name n : freedAfterRace) {
                n.manager.deallocate(n.handle);
            }
            freedAfterRace.clear();
            for (PooledMemoryManager m : managers) {
                long now = m.memoryInfo().usedBytes();
                if (now != usedBeforeRace.get(m)) {
                    failure(null, "round " + rounds + " on " + m.device() + ": used " + now
                            + " after every raced block was freed, "
                            + usedBeforeRace.get(m) + " before they were allocated", null);
                }
            }
            checkAccounting("round " + rounds + ", after the race");
            rounds++;
            if (System.nanoTime() > deadline) {
                finish = true;
            }
        }

        // ------------------------------------------------------------ a worker

        final class Worker implements Runnable {
            final int index;
            final Random rnd;
            final List<Live> mine = new ArrayList<>();
            final ArrayDeque<String> recent = new ArrayDeque<>();
            final List<CompletableFuture<Void>> inflight = new ArrayList<>();
            final Map<PooledMemoryManager, StreamHandle[]> streams = new HashMap<>();
            long ops;

            Worker(int index, long seed) {
                this.index = index;
                this.rnd = new Random(seed);
            }

            void note(String s) {
                if (recent.size() == 24) {
                    recent.removeFirst();
                }
                recent.addLast(ops + ": " + s);
            }

            long size() {
                if (rnd.nextInt(32) == 0) {
                    return 256 * KiB + rnd.nextInt((int) (768 * KiB));
                }
                return 1 + (long) Math.exp(rnd.nextDouble() * Math.log(256 * KiB));
            }

            /** Writes a fresh pattern into {@code [from, from + len)} of the block, through a mapping. */
            void fill(Live l, int from, int len) {
                int p = rnd.nextInt();
                int k = 1 + 2 * rnd.nextInt(64);
                for (int i = from; i < from + len; i++) {
                    l.bytes[i] = (byte) (p + i * k);
                }
                Name n = l.names.get(rnd.nextInt(l.names.size()));
                MemoryAccess access = rnd.nextBoolean() ? MemoryAccess.WRITE_ONLY : MemoryAccess.READ_WRITE;
                MemorySegment view = n.manager.mapMemory(n.handle, access);
                MemorySegment.copy(l.bytes, from, view, ValueLayout.JAVA_BYTE, from, len);
                n.manager.unmapMemory(n.handle);
            }

            void verify(Live l, String why) {
                settle(l);
                Name n = l.names.get(rnd.nextInt(l.names.size()));
                MemorySegment view = n.manager.mapMemory(n.handle, MemoryAccess.READ_ONLY);
                try {
                    check(n, l.bytes, view, why);
                } finally {
                    n.manager.unmapMemory(n.handle);
                }
            }

            void check(Name n, byte[] expected, MemorySegment view, String why) {
                if (view.byteSize() != expected.length) {
                    throw new AssertionError(why + ": the view of " + n + " has " + view.byteSize() + " bytes, the block "
                            + expected.length);
                }
                long at = MemorySegment.mismatch(view, 0, view.byteSize(), MemorySegment.ofArray(expected), 0, expected.length);
                if (at >= 0) {
                    throw new AssertionError(why + ": byte " + at + " of " + n + " (" + expected.length + " bytes) is "
                            + view.get(ValueLayout.JAVA_BYTE, at) + ", its owner last put " + expected[(int) at] + " there");
                }
            }

            void checkFresh(Name n, long size) {
                if (variant.zeroing == ZeroingPolicy.NONE) {
                    return;
                }
                MemorySegment view = n.manager.mapMemory(n.handle, MemoryAccess.READ_ONLY);
                try {
                    check(n, new byte[(int) size], view, "a new block under zeroing " + variant.zeroing
                            + " must read as zeros (another owner's bytes?)");
                } finally {
                    n.manager.unmapMemory(n.handle);
                }
            }

            /** Waits for the async copies that touch {@code l}, so that its bytes are what the model says. */
            void settle(Live l) {
                if (l.busy != null) {
                    join(l.busy, "an async copy on " + l);
                    l.busy = null;
                }
            }

            void settleAll() {
                for (CompletableFuture<Void> f : inflight) {
                    join(f, "an async copy");
                }
                inflight.clear();
                for (Live l : mine) {
                    l.busy = null;
                }
            }

            void join(CompletableFuture<?> f, String what) {
                long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(HANG_S);
                while (true) {
                    try {
                        f.get(Math.max(1, until - System.nanoTime()), TimeUnit.NANOSECONDS);
                        return;
                    } catch (InterruptedException e) {
                        // JDK 25: closing a shared arena under a reader can leave the reader's interrupt flag set.
                        interruptFlagsCleared.increment();
                    } catch (ExecutionException e) {
                        throw new AssertionError(what + " failed", e.getCause());
                    } catch (TimeoutException e) {
                        throw new AssertionError(what + " did not complete within " + HANG_S + " s");
                    }
                }
            }

            StreamHandle stream(PooledMemoryManager m) {
                StreamHandle[] s = streams.computeIfAbsent(m, k -> {
                    HostStreamManager sm = streamsOf.get(k);
                    return new StreamHandle[] {StreamHandle.DEFAULT, sm.createStream(k.device()), sm.createStream(k.device())};
                });
                return s[rnd.nextInt(s.length)];
            }

            Live pick() {
                return mine.get(rnd.nextInt(mine.size()));
            }

            /** A name of {@code l} that {@code m} issued, or null. */
            Name nameOn(Live l, PooledMemoryManager m) {
                for (Name n : l.names) {
                    if (n.manager == m) {
                        return n;
                    }
                }
                return null;
            }

            @Override
            public void run() {
                try {
                    while (!stop) {
                        for (int i = 0; i < OPS_PER_ROUND && !stop; i++) {
                            step();
                        }
                        if (stop) {
                            return;
                        }
                        settleAll();
                        for (Live l : mine) {
                            verify(l, "quiet point of round " + rounds);
                        }
                        if (!meet()) {
                            return;
                        }
                        if (index == 0) {
                            prepareRace(this);
                        }
                        if (!meet()) {
                            return;
                        }
                        race();
                        if (!meet()) {
                            return;
                        }
                        if (index == 0) {
                            checkRace();
                        }
                        if (!meet() || finish) {
                            return;
                        }
                    }
                } catch (Throwable e) {
                    failure(this, "unexpected", e);
                }
            }

            /** Waits for every other thread; @return false when the run stops instead (a failure somewhere). */
            boolean meet() {
                if (stop) {
                    return false;
                }
                int phase = barrier.arrive();
                long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(HANG_S);
                while (true) {
                    try {
                        barrier.awaitAdvanceInterruptibly(phase, 100, TimeUnit.MILLISECONDS);
                        return !stop;
                    } catch (InterruptedException e) {
                        interruptFlagsCleared.increment(); // see join
                    } catch (TimeoutException e) {
                        if (stop) {
                            return false;
                        }
                        if (System.nanoTime() > until) {
                            failure(this, "the other threads did not reach the quiet point within " + HANG_S
                                    + " s (a hang?)", null);
                            return false;
                        }
                    }
                }
            }

            void step() {
                ops++;
                int r = rnd.nextInt(100);
                Op op;
                if (mine.isEmpty() || (r < 24 && mine.size() < MAX_OWN)) {
                    op = Op.ALLOCATE;
                } else if (r < 30 && mine.size() < MAX_OWN) {
                    op = Op.ALLOCATE_ALIGNED;
                } else if (r < 33 && mine.size() < MAX_OWN) {
                    op = Op.CREATE_MAPPING;
                } else if (r < 50 || mine.size() >= MAX_OWN) {
                    op = Op.FREE;
                } else if (r < 51) {
                    op = Op.FREE_MAPPED;
                } else if (r < 60) {
                    op = Op.WRITE;
                } else if (r < 68) {
                    op = Op.VERIFY;
                } else if (r < 77) {
                    op = Op.COPY;
                } else if (r < 88) {
                    op = Op.COPY_ASYNC;
                } else if (r < 90) {
                    op = Op.EVENT;
                } else if (r < 93) {
                    op = Op.DEFRAGMENT;
                } else if (r < 96) {
                    op = Op.TRIM;
                } else {
                    op = Op.CONFIGURE;
                }
                if (WITHOUT.contains(op.name())) {
                    return;
                }
                try {
                    doStep(op);
                    counts.get(op).increment();
                } catch (Expected e) {
                    counts.get(op).increment();
                    documented.increment();
                } catch (CompletionException e) {
                    failure(this, op + " failed", e.getCause() != null ? e.getCause() : e);
                } catch (Throwable e) {
                    failure(this, op + " failed", e);
                }
            }

            void doStep(Op op) {
                PooledMemoryManager m = managers.get(rnd.nextInt(2));
                switch (op) {
                    case ALLOCATE, ALLOCATE_ALIGNED -> {
                        long size = size();
                        long align = op == Op.ALLOCATE_ALIGNED ? 1L << (4 + rnd.nextInt(13)) : 0;
                        note(op + " " + size + (align > 0 ? " aligned " + align : "") + " on " + m.device());
                        long epoch = alignEpoch.get();
                        long alignNow = poolAlign;
                        MemoryHandle h;
                        try {
                            h = align > 0 ? m.allocateAligned(size, align, MemoryType.GENERAL, m.device())
                                    : m.allocate(size, MemoryType.GENERAL, m.device());
                        } catch (OutOfDeviceMemoryException e) {
                            throw new Expected(e);
                        }
                        boolean known = (epoch & 1) == 0 && alignEpoch.get() == epoch && alignNow > 0;
                        long lo = known ? alignNow : BASE_ALIGN;
                        long hi = known ? alignNow : 8192;
                        long[] bounds = align > 0
                                ? new long[] {blockSize(size, lo), blockSize(size, hi)}
                                : plainBounds(size, lo, hi);
                        Live l = new Live(m, h, size, bounds[0], bounds[1]);
                        l.names.add(new Name(m, h));
                        mine.add(l);
                        note("  -> " + h);
                        checkFresh(l.names.getFirst(), size);
                        if (align > 0) {
                            MemorySegment v = m.mapMemory(h, MemoryAccess.READ_ONLY);
                            long address = v.address();
                            m.unmapMemory(h);
                            if (address % align != 0) {
                                throw new AssertionError(h + " at " + Long.toHexString(address) + " is not aligned to " + align);
                            }
                        }
                        fill(l, 0, (int) size);
                    }
                    case CREATE_MAPPING -> {
                        PooledMemoryManager other = rnd.nextBoolean() ? m : managers.get(1 - managers.indexOf(m));
                        long size = Math.min(size(), 128 * KiB);
                        note("createMapping " + size + " " + m.device() + " -> " + other.device());
                        MemoryMapping mm;
                        try {
                            mm = m.createMapping(m.device(), other.device(), size);
                        } catch (OutOfDeviceMemoryException e) {
                            throw new Expected(e);
                        }
                        long bs = blockSize(size, BASE_ALIGN);
                        Live l = new Live(m, mm.source(), size, bs, bs);
                        l.names.add(new Name(m, mm.source()));
                        l.names.add(new Name(other, mm.target()));
                        mine.add(l);
                        note("  -> " + l.names);
                        checkFresh(l.names.get(1), size);
                        fill(l, 0, (int) size);
                        verify(l, "a mapping's other handle shows the same bytes");
                    }
                    case FREE -> {
                        Live l = pick();
                        Name n = l.names.get(rnd.nextInt(l.names.size()));
                        // Without waiting for its async copies half the time: a pinned block's memory
                        // returns when the copy ends.
                        if (rnd.nextBoolean()) {
                            settle(l);
                            if (l.names.size() == 1) {
                                verify(l, "before its free");
                            }
                        }
                        note("free " + n + (l.busy != null && !l.busy.isDone() ? " (copy in flight)" : ""));
                        n.manager.deallocate(n.handle);
                        l.names.remove(n);
                        if (l.names.isEmpty()) {
                            mine.remove(l);
                        }
                    }
                    case FREE_MAPPED -> {
                        Live l = pick();
                        if (l.names.size() != 1) {
                            return;
                        }
                        settle(l);
                        Name n = l.names.getFirst();
                        note("free while mapped " + n);
                        MemorySegment view = n.manager.mapMemory(n.handle, MemoryAccess.READ_ONLY);
                        n.manager.deallocate(n.handle);
                        mine.remove(l);
                        try {
                            view.get(ValueLayout.JAVA_BYTE, 0);
                            throw new AssertionError("a view of " + n + " still reads after its block was freed");
                        } catch (IllegalStateException closed) {
                            // The free closed it: documented.
                        }
                    }
                    case WRITE -> {
                        Live l = pick();
                        settle(l);
                        int from = rnd.nextInt(l.bytes.length);
                        int len = 1 + rnd.nextInt(l.bytes.length - from);
                        note("write " + l + " [" + from + ", +" + len + ")");
                        fill(l, from, len);
                    }
                    case VERIFY -> {
                        Live l = pick();
                        note("verify " + l);
                        verify(l, "a block's bytes");
                    }
                    case COPY, COPY_ASYNC -> copy(op, m);
                    case EVENT -> {
                        HostStreamManager sm = streamsOf.get(m);
                        StreamHandle from = stream(m);
                        StreamHandle to = stream(m);
                        note("event " + from.id() + " -> " + to.id() + " on " + m.device());
                        EventHandle e = sm.recordEvent(from);
                        sm.waitEvent(to, e);
                    }
                    case DEFRAGMENT -> {
                        note("defragment " + m.device());
                        m.defragment(m.device()).toCompletableFuture().join();
                    }
                    case TRIM -> {
                        note("trim " + m.device());
                        m.trim();
                    }
                    case CONFIGURE -> configure(m);
                    default -> throw new AssertionError(op);
                }
            }

            void copy(Op op, PooledMemoryManager m) {
                List<Live> here = new ArrayList<>();
                for (Live l : mine) {
                    if (nameOn(l, m) != null) {
                        here.add(l);
                    }
                }
                if (here.isEmpty()) {
                    return;
                }
                Live src = here.get(rnd.nextInt(here.size()));
                Live dst = rnd.nextInt(8) == 0 ? src : here.get(rnd.nextInt(here.size()));
                int size = rnd.nextInt(Math.min(src.bytes.length, dst.bytes.length) + 1);
                int so = rnd.nextInt(src.bytes.length - size + 1);
                int dO = rnd.nextInt(dst.bytes.length - size + 1);
                Name s = nameOn(src, m);
                Name d = nameOn(dst, m);
                if (op == Op.COPY) {
                    settle(src);
                    settle(dst);
                    note("copy " + size + " " + s + "+" + so + " -> " + d + "+" + dO);
                    m.copy(s.handle, d.handle, size, so, dO);
                    System.arraycopy(src.bytes, so, dst.bytes, dO, size); // memmove, like the manager
                    return;
                }
                // Earlier copies on either block must have run before this one reads or writes them:
                // copies on one stream run in order, on different streams they may not.
                settle(src);
                settle(dst);
                StreamHandle stream = stream(m);
                note("copyAsync " + size + " " + s + "+" + so + " -> " + d + "+" + dO + " on stream " + stream.id());
                CompletableFuture<Void> f = m.copyAsync(MemoryTransfer.of(s.handle, d.handle, size)
                        .withSrcOffset(so).withDstOffset(dO), stream).toCompletableFuture();
                System.arraycopy(src.bytes, so, dst.bytes, dO, size);
                src.busy = f;
                dst.busy = f;
                inflight.add(f);
                if (inflight.size() > 16) {
                    join(inflight.removeFirst(), "an async copy");
                }
            }

            void configure(PooledMemoryManager m) {
                int which = variant.alignmentChanges ? rnd.nextInt(6) : rnd.nextInt(3);
                MemoryPoolConfig cfg = config(which);
                note("configurePool " + m.device() + " " + which + " (alignment " + cfg.alignment() + ")");
                // One configuration at a time, decided under the lock: two alignment changes at once would
                // leave the epoch even while both run, and a configuration that keeps the base alignment
                // would undo a concurrent change the model already counts.
                alignChange.lock();
                boolean changesAlignment = cfg.alignment() != BASE_ALIGN || poolAlign != BASE_ALIGN;
                if (changesAlignment) {
                    alignEpoch.incrementAndGet();
                }
                try {
                    m.configurePool(m.device(), MemoryType.GENERAL, cfg);
                    if (changesAlignment) {
                        // Both devices share one figure: a model bound, so the other device's pool is
                        // set to the same alignment before the epoch closes.
                        PooledMemoryManager other = managers.get(1 - managers.indexOf(m));
                        other.configurePool(other.device(), MemoryType.GENERAL, cfg);
                        poolAlign = cfg.alignment();
                    }
                } catch (InvalidMemoryRequestException | OutOfDeviceMemoryException e) {
                    // maxSize below what is in use, an alignment the device cannot honour, no room to pre-allocate.
                    note("  refused: " + e.getMessage());
                    if (changesAlignment) {
                        // One device may have taken it: the alignment is unknown until the next change.
                        poolAlign = -1;
                    }
                    throw new Expected(e);
                } finally {
                    if (changesAlignment) {
                        alignEpoch.incrementAndGet();
                    }
                    alignChange.unlock();
                }
            }

            /**
             * Frees a raced block as a caller must since issue 15: a free during another thread's
             * synchronous use (copy, read, write, withMapped) is refused and changes nothing, so the
             * caller frees again once that use has returned.
             */
            private void freeWhenNotInUse(Raced r) {
                for (int attempt = 0; ; attempt++) {
                    try {
                        r.name.manager.deallocate(r.name.handle);
                        return;
                    } catch (InvalidMemoryRequestException inUse) {
                        if (attempt > 10_000 || !inUse.getMessage().contains("is in use by")) {
                            throw inUse;
                        }
                        documented.increment();
                        Thread.yield();
                    }
                }
            }

            /** Every thread goes through the shared set at once: free or use, in its own order. */
            void race() {
                List<Raced> order = new ArrayList<>(raceSet);
                Collections.shuffle(order, rnd);
                for (Raced r : order) {
                    boolean free = r.designated == index || rnd.nextInt(3) == 0 || WITHOUT.contains(Op.RACE_USE.name());
                    ops++;
                    if (free) {
                        note("race: free " + r.name);
                        try {
                            freeWhenNotInUse(r);
                            r.frees.incrementAndGet();
                        } catch (InvalidHandleException e) {
                            r.refused.incrementAndGet();
                            documented.increment();
                        } catch (Throwable e) {
                            failure(this, "racing free of " + r.name, e);
                            return;
                        }
                        counts.get(Op.RACE_FREE).increment();
                    } else {
                        note("race: use " + r.name);
                        try {
                            use(r);
                        } catch (Throwable e) {
                            failure(this, "racing use of " + r.name, e);
                            return;
                        }
                        counts.get(Op.RACE_USE).increment();
                    }
                }
            }

            /** Reads a raced block (a view or a copy): its bytes, or a documented refusal, never another's bytes. */
            void use(Raced r) {
                Name n = r.name;
                if (rnd.nextBoolean()) {
                    MemorySegment view;
                    try {
                        view = n.manager.mapMemory(n.handle, MemoryAccess.READ_ONLY);
                    } catch (InvalidHandleException freed) {
                        documented.increment();
                        return;
                    }
                    try {
                        check(n, r.block.bytes, view, "a raced block read through a view");
                    } catch (IllegalStateException closed) {
                        // Another thread's free or unmap closed the view while this one read it.
                        viewsClosedUnderReader.increment();
                        if (Thread.interrupted()) {
                            interruptFlagsCleared.increment();
                        }
                    }
                    try {
                        n.manager.unmapMemory(n.handle);
                    } catch (InvalidHandleException | InvalidMemoryRequestException gone) {
                        // Freed meanwhile, or another thread's unmap closed every view already.
                        documented.increment();
                    }
                } else {
                    PooledMemoryManager m = n.manager;
                    Live scratch = null;
                    for (Live l : mine) {
                        if (l.names.size() == 1 && l.home == m && l.bytes.length >= r.block.bytes.length) {
                            scratch = l;
                            break;
                        }
                    }
                    if (scratch == null) {
                        return;
                    }
                    settle(scratch);
                    int size = r.block.bytes.length;
                    try {
                        m.copy(n.handle, scratch.names.getFirst().handle, size, 0, 0);
                    } catch (InvalidHandleException freed) {
                        documented.increment();
                        return;
                    }
                    System.arraycopy(r.block.bytes, 0, scratch.bytes, 0, size);
                    verify(scratch, "a copy out of a raced block");
                }
            }
        }
    }

    // ================================================================ driver

    private void run(Variant variant) throws Exception {
        long millis = Math.max(500, TimeUnit.SECONDS.toMillis(TOTAL_SECONDS) / enabledVariants());
        Run run = new Run(variant, SEED, millis);
        long t0 = System.nanoTime();
        List<Thread> threads = new ArrayList<>();
        for (Run.Worker w : run.workers) {
            Thread t = new Thread(w, "stress-" + w.index);
            t.setDaemon(true); // a hung engine must not keep the test JVM alive
            threads.add(t);
            t.start();
        }
        // Until every thread ends, or 5 s after a failure stopped the run, or long after the end.
        long joinBy = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis) + TimeUnit.SECONDS.toNanos(2 * HANG_S);
        for (Thread t : threads) {
            while (t.isAlive() && System.nanoTime() < joinBy
                    && !(run.stop && System.nanoTime() - run.stoppedAt > TimeUnit.SECONDS.toNanos(5))) {
                t.join(100);
            }
        }
        double seconds = (System.nanoTime() - t0) / 1e9;
        List<String> hung = new ArrayList<>();
        for (Thread t : threads) {
            if (t.isAlive()) {
                StringBuilder s = new StringBuilder(t.getName());
                for (StackTraceElement e : t.getStackTrace()) {
                    s.append("\n    at ").append(e);
                }
                hung.add(s.toString());
            }
        }
        if (!hung.isEmpty()) {
            // Leave the managers as they are: closing them would wait on the same locks.
            fail(run.where() + " threads still running after the end:\n" + String.join("\n", hung)
                    + "\nfailures so far:\n" + String.join("\n", run.failures));
        }
        if (run.failures.isEmpty()) {
            finishAndClose(run);
        } else {
            closeWithin(run, 10);
        }
        System.out.println(report(run, seconds));
        if (!run.failures.isEmpty()) {
            fail(run.failures.size() + " failure(s) " + run.where() + ":\n" + String.join("\n\n", run.failures));
        }
    }

    /** @return how many variants run: the budget is shared by them */
    private static long enabledVariants() {
        long n = Arrays.stream(EngineStressTest.class.getDeclaredMethods())
                .filter(m -> m.isAnnotationPresent(Test.class) && !m.isAnnotationPresent(Disabled.class)).count();
        return Math.max(1, n);
    }

    /** After the run: every block's bytes, the accounting once more, then close with blocks still live. */
    private static void finishAndClose(Run run) {
        if (Thread.interrupted()) {
            run.interruptFlagsCleared.increment();
        }
        Run.Worker any = run.workers[0];
        try {
            for (Run.Worker w : run.workers) {
                w.settleAll();
                for (Live l : w.mine) {
                    any.verify(l, "after the run");
                }
            }
            run.checkAccounting("after the run");
            // Half the blocks freed, the rest left to close, which must give every chunk back anyway.
            for (Run.Worker w : run.workers) {
                for (Live l : new ArrayList<>(w.mine)) {
                    if (any.rnd.nextBoolean()) {
                        for (Name n : List.copyOf(l.names)) {
                            n.manager.deallocate(n.handle);
                            l.names.remove(n);
                        }
                        w.mine.remove(l);
                    }
                }
            }
            run.checkAccounting("after freeing half");
        } catch (Throwable e) {
            run.failure(null, "checking after the run", e);
        }
        for (PooledMemoryManager m : run.managers) {
            m.close();
        }
        run.streamsA.close();
        run.streamsB.close();
        for (PooledMemoryManager m : run.managers) {
            ArenaUpstream up = run.upstreamOf.get(m);
            if (up.liveBytes() != 0) {
                run.failure(null, m.device() + " holds " + up.liveBytes() + " bytes after close", null);
            }
        }
    }

    /** After a failure: close what can be closed, on a thread of its own, in case a broken engine hangs. */
    private static void closeWithin(Run run, long seconds) throws InterruptedException {
        Thread closer = new Thread(() -> {
            for (PooledMemoryManager m : run.managers) {
                m.close();
            }
            run.streamsA.close();
            run.streamsB.close();
        }, "stress-close");
        closer.setDaemon(true);
        closer.start();
        closer.join(TimeUnit.SECONDS.toMillis(seconds));
    }

    private static String report(Run run, double seconds) {
        StringBuilder s = new StringBuilder();
        s.append("EngineStressTest ").append(run.variant.name).append(": seed ").append(run.seed)
                .append(" (-Dferrum.stress.seed=").append(run.baseSeed).append("), ").append(run.threads)
                .append(" threads, ").append(String.format(Locale.ROOT, "%.1f", seconds)).append(" s, ")
                .append(run.rounds).append(" rounds;");
        long total = 0;
        for (Map.Entry<Op, LongAdder> e : run.counts.entrySet()) {
            s.append(' ').append(e.getKey().name().toLowerCase(Locale.ROOT)).append('=').append(e.getValue().sum());
            total += e.getValue().sum();
        }
        s.append("; total ").append(total).append(", documented refusals ").append(run.documented.sum())
                .append(", views closed under a reader ").append(run.viewsClosedUnderReader.sum())
                .append(", interrupt flags cleared ").append(run.interruptFlagsCleared.sum())
                .append(", engine warnings ").append(run.warnings.size());
        return s.toString();
    }
}
