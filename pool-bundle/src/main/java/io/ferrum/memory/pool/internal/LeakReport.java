package io.ferrum.memory.pool.internal;

import java.util.ArrayList;
import java.util.List;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.pool.PoolLog;

/**
 * The close-time report of what was still allocated: how many blocks, how many bytes, and where
 * up to {@value #MAX_SITES} of them were allocated (recorded only with debug on: the first frame
 * outside the engine and the API). Filled by the
 * close under each pool's lock, told once after.
 */
final class LeakReport {
    static final int MAX_SITES = 20;
    private static final String ENGINE = LeakReport.class.getPackageName() + ".";
    private static final String API = io.ferrum.memory.api.MemoryHandle.class.getPackageName() + ".";

    private final Device device;
    private long count;
    private long bytes;
    private final List<String> sites = new ArrayList<>();

    LeakReport(Device device) {
        this.device = device;
    }

    /** Counts a block that a handle still names at close. */
    void add(Block b) {
        count++;
        bytes += b.requested;
        if (b.allocationSite != null && sites.size() < MAX_SITES) {
            sites.add(new MemoryHandle(b.handleId != 0 ? b.handleId : b.aliasId) + " (" + Bytes.count(b.requested) + ") at "
                    + caller(b.allocationSite.getStackTrace()));
        }
    }

    /** @return the first frame outside the engine and the API's default methods: the caller that allocated */
    private static Object caller(StackTraceElement[] st) {
        for (StackTraceElement e : st) {
            String c = e.getClassName();
            if (!c.startsWith(ENGINE) && !c.startsWith(API)) {
                return e;
            }
        }
        return st.length > 0 ? st[st.length - 1] : "?";
    }

    /** Logs the report when anything leaked. */
    void tell(PoolLog log) {
        if (count > 0) {
            log.warn(device + ": closed with " + count + (count == 1 ? " live allocation (" : " live allocations (")
                    + Bytes.exact(bytes)
                    + ") still allocated; their memory was released"
                    + (sites.isEmpty() ? " (enable debug to record allocation sites)" : ". Allocation sites: " + sites), null);
        }
    }
}
