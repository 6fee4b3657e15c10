package io.ferrum.memory.pool;

import java.lang.foreign.MemorySegment;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Function;

import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryType;

/**
 * Run in a child JVM by {@link StagedActionOverflowTest}, as {@link StagedReadersOverflowProbe} is: a
 * caller recurses and, at each depth, runs an empty {@code withMapped} action of one access on a
 * block of memory the CPU cannot address inside a {@code try} that catches {@code StackOverflowError},
 * so that as the stack left shrinks frame by frame the overflow lands at every point of the staged
 * action's start (the push of its staging copy for the thread's nested calls) and end (its pop) in
 * turn; each run starts one small frame deeper. After each run, on the same thread: whether a
 * staging copy that would stand for a block is left in the thread's list ({@code DataPath.STAGED},
 * read by reflection; no action is open), whether a {@code read} of the block returns the device's bytes (another thread wrote new
 * ones meanwhile), whether a {@code write} goes through, and whether a read of the block the next
 * allocation gets (the same block object, once freed) returns its new owner's bytes; from another
 * thread, whether a write (refused while a hold or a reader's share is left) and the free (refused
 * while a scope is left) go through; and whether the pool's lock was left held. Prints one line per
 * access: {@code ACCESS: staging copy left 0/40; stale read 0/40; write failed 0/40; stale fresh
 * block 0/40; hold left 0/40; free refused 0/40; lock left held 0/40}, then a few of the refusals.
 */
public final class StagedActionOverflowProbe {
    private static final int SIZE = 1000;
    private static final Function<MemorySegment, Object> ACTION = v -> v;

    private static PooledMemoryManager m;
    private static MemoryHandle h;
    private static MemoryAccess access;
    private static ReentrantLock lock;
    /** The runs of the current access whose block's free was refused (a scope left inside). */
    private static int scopesLeft;
    /** DataPath's list of the calling thread's open staging copies. */
    private static ThreadLocal<?> staged;
    /** Its entries' block (null once their action ended) and the entry within which each was made. */
    private static Field block;
    private static Field outer;

    private StagedActionOverflowProbe() {
    }

    private static void recurse(long depth) {
        try {
            m.withMapped(h, access, ACTION);
        } catch (StackOverflowError caughtByTheCaller) {
            // a caller that survives an overflow goes on
        }
        recurse(depth + 1);
    }

    /** Takes {@code frames} small frames first, so that each run's overflow lands elsewhere. */
    private static void pad(int frames) {
        if (frames > 0) {
            pad(frames - 1);
        } else {
            recurse(0);
        }
    }

    /**
     * @return true if the thread's list of staging copies holds one that its calls would take for a
     *         block (an entry whose action ended and was marked so matches no block, and is harmless)
     */
    private static boolean liveStagingLeft() throws ReflectiveOperationException {
        for (Object s = staged.get(); s != null; s = outer.get(s)) {
            if (block.get(s) != null) {
                return true;
            }
        }
        return false;
    }

    private static MemorySegment pattern(int value) {
        byte[] bytes = new byte[SIZE];
        Arrays.fill(bytes, (byte) value);
        return MemorySegment.ofArray(bytes);
    }

    /** @return what {@code call} threw on another thread (so never this thread's staging copies), or null */
    private static Throwable elsewhere(Callable<?> call) throws InterruptedException, TimeoutException {
        try {
            CompletableFuture.supplyAsync(() -> {
                try {
                    return call.call();
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            }).get(30, TimeUnit.SECONDS);
            return null;
        } catch (ExecutionException e) {
            return e.getCause();
        }
    }

    /** @return null if {@code h} reads as {@code value} on this thread; else what it read or threw */
    private static String readsHere(MemoryHandle handle, int value) {
        MemorySegment got = MemorySegment.ofArray(new byte[SIZE]);
        try {
            m.read(handle, 0, got);
        } catch (RuntimeException e) {
            return String.valueOf(e);
        }
        return got.mismatch(pattern(value)) == -1 ? null : "byte 0 read as " + got.toArray(
                java.lang.foreign.ValueLayout.JAVA_BYTE)[0] + ", not " + value;
    }

    private static String run(MemoryAccess a, int runs) throws Exception {
        access = a;
        int staleRead = 0;
        int writeFailed = 0;
        int staleFresh = 0;
        int holdLeft = 0;
        int freeRefused = 0;
        scopesLeft = 0;
        int lockLeft = 0;
        int stagingLeft = 0;
        int actionRefused = 0;
        List<String> said = new ArrayList<>();
        for (int i = 0; i < runs; i++) {
            MemoryHandle run = m.allocate(SIZE, StagingRacesTest.GPU);
            h = run;
            elsewhere(() -> {
                m.write(run, 0, pattern(1));
                return null;
            });
            try {
                pad(i);
            } catch (StackOverflowError expected) {
                // the end of the run
            } catch (RuntimeException refusedAction) {
                // Refused by what an earlier run left on the block object (its free went through):
                // counted there already; this run proves nothing more.
                actionRefused++;
                said.add("action refused: " + refusedAction);
            }
            if (liveStagingLeft()) {
                stagingLeft++; // no action of this thread is open: none may hold a staging copy for it
                said.add("staging copy left for this thread's calls");
            }
            if (lock.isHeldByCurrentThread()) {
                lockLeft++;
                while (lock.isHeldByCurrentThread()) {
                    lock.unlock(); // so that the probe goes on and counts the rest
                }
            }
            Throwable refused = elsewhere(() -> {
                m.write(run, 0, pattern(2));
                return null;
            });
            if (refused != null) {
                holdLeft++;
                said.add("another thread's write: " + refused);
            }
            String read = readsHere(run, refused == null ? 2 : 1);
            if (read != null) {
                staleRead++;
                said.add("read here: " + read);
            }
            try {
                m.write(run, 0, pattern(3));
            } catch (RuntimeException e) {
                writeFailed++;
                said.add("write here: " + e);
            }
            Throwable free = elsewhere(() -> {
                m.deallocate(run);
                return null;
            });
            if (free != null) {
                freeRefused++;
                scopesLeft++;
                said.add("free: " + free);
                continue;
            }
            // The next owner of the block (the same Block object, from the pool's free list).
            MemoryHandle next = m.allocate(SIZE, StagingRacesTest.GPU);
            elsewhere(() -> {
                m.write(next, 0, pattern(4));
                return null;
            });
            String fresh = readsHere(next, 4);
            if (fresh != null) {
                staleFresh++;
                said.add("fresh block read here: " + fresh);
            }
            elsewhere(() -> {
                m.deallocate(next);
                return null;
            });
        }
        StringBuilder line = new StringBuilder(a + ": staging copy left " + stagingLeft + "/" + runs + "; stale read " + staleRead + "/" + runs + "; write failed "
                + writeFailed + "/" + runs + "; stale fresh block " + staleFresh + "/" + runs + "; hold left "
                + holdLeft + "/" + runs + "; free refused " + freeRefused + "/" + runs + "; lock left held " + lockLeft + "/" + runs
                + (actionRefused == 0 ? "" : "; action refused " + actionRefused + "/" + runs));
        said.stream().distinct().limit(4).forEach(s -> line.append("\n    ").append(s));
        return line.toString();
    }

    /**
     * @param args the runs per access; then, optionally, the accesses to run (comma-separated names
     *             of {@link MemoryAccess}; all by default), each on a manager of its own, so that
     *             what one access's runs left cannot refuse the next access's actions
     */
    public static void main(String[] args) throws Exception {
        int runs = Integer.parseInt(args[0]);
        List<MemoryAccess> accesses = args.length > 1
                ? Arrays.stream(args[1].split(",")).map(MemoryAccess::valueOf).toList()
                : List.of(MemoryAccess.values());
        Field field = Class.forName("io.ferrum.memory.pool.internal.DataPath").getDeclaredField("STAGED");
        field.setAccessible(true);
        staged = (ThreadLocal<?>) field.get(null);
        Class<?> staging = Class.forName("io.ferrum.memory.pool.internal.DataPath$Staging");
        block = staging.getDeclaredField("block");
        block.setAccessible(true);
        outer = staging.getDeclaredField("outer");
        outer.setAccessible(true);
        for (MemoryAccess a : accesses) {
            // Memory the CPU cannot address, and nothing recorded per copy (a JIT run makes thousands per run).
            DeviceUpstream up = new ForwardingUpstream(new ArenaUpstream(StagingRacesTest.GPU, 64 * RaceHarness.MiB, false)) {
            };
            m = PooledMemoryManager.create(up, RaceHarness.config(RaceHarness.pool(RaceHarness.MiB, RaceHarness.MiB, 256)),
                    PoolSettings.defaults().withThreadCache(0), null);
            lock = RaceHarness.poolLock(m, MemoryType.GENERAL);
            System.out.println(run(a, runs));
            if (scopesLeft == 0) {
                m.close(); // else left open: a close waits 30 s for each scope left, counted already
            }
        }
    }
}
