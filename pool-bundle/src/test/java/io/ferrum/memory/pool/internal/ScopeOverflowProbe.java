package io.ferrum.memory.pool.internal;

import java.lang.foreign.MemorySegment;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * Run in a child JVM by {@link ScopeOverflowTest} (as {@code AccessTrackerTest} runs its overflow
 * probe): a caller recurses and, at each depth, calls {@code write}, {@code read}, {@code withMapped}
 * or {@code copy} inside a {@code try} that catches {@code StackOverflowError} (a request loop that
 * survives an overflow), so that as the stack left shrinks frame by frame the overflow lands at every
 * point of the call in turn; each run starts one small frame deeper. After each call's runs (a fresh
 * manager each) it checks, through the public API: the block can still be freed (a scope left inside
 * refuses every free for good), the free releases it, and after close the upstream holds nothing.
 * Prints one line per call: {@code write: free refused 0/40; never released 0/40; after close 0 bytes}.
 */
public final class ScopeOverflowProbe {
    private static PooledMemoryManager m;
    private static MemoryHandle h;
    private static MemoryHandle h2;
    private static int mode;
    private static final MemorySegment SEG = MemorySegment.ofArray(new byte[64]);
    private static final MemorySegment DST = MemorySegment.ofArray(new byte[64]);
    private static final String[] NAMES = {"write", "read", "withMapped", "copy"};

    private ScopeOverflowProbe() {
    }

    private static void recurse(long depth) {
        try {
            switch (mode) {
                case 0 -> m.write(h, 0, SEG);
                case 1 -> m.read(h, 0, DST);
                case 2 -> m.withMapped(h, MemoryAccess.READ_WRITE, v -> v);
                default -> m.copy(h, h2, 64, 0, 0);
            }
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
     * @param args the runs per call; then, optionally, {@code staged}: the blocks are on memory the
     *             CPU cannot address (a device whose bytes go through host copies), else host memory
     */
    public static void main(String[] args) throws Exception {
        int runs = Integer.parseInt(args[0]);
        boolean staged = args.length > 1 && args[1].equals("staged");
        Device device = staged ? Device.cuda(0) : Device.cpu();
        for (mode = 0; mode < NAMES.length; mode++) {
            ArenaUpstream up = staged ? new ArenaUpstream(device, 64L << 20, false) : new ArenaUpstream(64L << 20);
            m = PooledMemoryManager.create(up, MemoryManagerConfig.defaults(),
                    PoolSettings.defaults().withThreadCache(0), null);
            h2 = m.allocate(4096, device);
            int refused = 0;
            int neverReleased = 0;
            String message = null;
            for (int i = 0; i < runs; i++) {
                h = m.allocate(4096, device);
                try {
                    pad(i);
                } catch (StackOverflowError expected) {
                    // the end of the run
                }
                long liveBefore = m.quickInfo().activeAllocations();
                try {
                    m.deallocate(h);
                    if (m.quickInfo().activeAllocations() == liveBefore) {
                        neverReleased++;
                    }
                } catch (InvalidMemoryRequestException e) {
                    refused++;
                    message = e.getMessage();
                }
            }
            // Close without the 30 s wait for scopes that never leave: an interrupted close defers instead.
            Thread.currentThread().interrupt();
            m.close();
            Thread.interrupted();
            System.out.println(NAMES[mode] + ": free refused " + refused + "/" + runs + "; never released "
                    + neverReleased + "/" + runs + "; after close " + up.liveBytes() + " bytes");
            if (message != null) {
                System.out.println("    deallocate said: " + message);
            }
        }
    }
}
