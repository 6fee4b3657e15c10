package io.ferrum.memory.pool.internal;

import java.util.Map;

import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.ArenaUpstream;
import io.ferrum.memory.pool.PoolSettings;

/**
 * Run in a child JVM by {@link EngineConstructionOverflowTest}, as {@link ScopeOverflowProbe} is: a
 * caller recurses and, at each depth, constructs a manager (pre-allocating, on the coarse clock, with
 * a stream manager of its own) inside a {@code try} that catches {@code StackOverflowError}, so that
 * as the stack left shrinks frame by frame the overflow lands at every step of the construction in
 * turn; each run starts one small frame deeper. After each run every manager made is closed, and
 * the probe looks at what is left: uses of the coarse clock, open stream managers, chunks reserved.
 * Prints one line: {@code construction: clock use left 0/10; stream manager left 0/10; chunks left 0/10;
 * clock users 0, ticking false} (a stream manager may be left where the overflow lands in its own close).
 */
public final class EngineConstructionOverflowProbe {
    private static final MemoryManagerConfig CONFIG = MemoryManagerConfig.defaults().withAutoGc(false, 0.85)
            .withPoolConfig(MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(64 * 1024)
                    .growthIncrement(64 * 1024).alignment(256).preAllocate(true).build());
    private static final PoolSettings SETTINGS = PoolSettings.defaults();
    private static final PoolEngine[] MADE = new PoolEngine[1 << 16];
    private static int made;
    private static ArenaUpstream up;

    private EngineConstructionOverflowProbe() {
    }

    private static void recurse(long depth) {
        try {
            PoolEngine m = new PoolEngine(up, CONFIG, SETTINGS, null);
            MADE[made++] = m; // no call: kept for the close after the run
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

    private static int openStreamManagers() {
        Object devices = System.getProperties().get("io.ferrum.memory.pool.streamManagerDevices");
        return devices == null ? 0 : ((Map<?, ?>) devices).size();
    }

    public static void main(String[] args) {
        int runs = Integer.parseInt(args[0]);
        up = new ArenaUpstream(1L << 30);
        int clockLeft = 0;
        int streamsLeft = 0;
        int chunksLeft = 0;
        int clockUsers = 0;
        int streams = 0;
        for (int i = 0; i < runs; i++) {
            try {
                pad(i);
            } catch (StackOverflowError expected) {
                // the end of the run
            }
            for (int k = 0; k < made; k++) {
                MADE[k].close();
                MADE[k] = null;
            }
            made = 0;
            if (CoarseClock.users() != clockUsers) {
                clockLeft++;
                clockUsers = CoarseClock.users();
            }
            if (openStreamManagers() != streams) {
                streamsLeft++;
                streams = openStreamManagers();
            }
            if (up.liveBytes() != 0) {
                chunksLeft++;
            }
        }
        System.out.println("construction: clock use left " + clockLeft + "/" + runs + "; stream manager left "
                + streamsLeft + "/" + runs + "; chunks left " + chunksLeft + "/" + runs + "; clock users "
                + CoarseClock.users() + ", ticking " + CoarseClock.running());
    }
}
