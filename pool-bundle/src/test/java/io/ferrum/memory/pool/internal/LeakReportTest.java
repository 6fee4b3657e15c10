package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.pool.PoolLog;

/**
 * The close-time leak report: silent when nothing leaked; otherwise one warning with the count
 * and bytes of what was still allocated, and with debug on up to {@value LeakReport#MAX_SITES}
 * allocation sites, each the first frame outside the engine and the API.
 */
class LeakReportTest {
    private final List<String> warnings = new ArrayList<>();
    private final PoolLog log = new PoolLog() {
        @Override
        public void warn(String message, Throwable cause) {
            warnings.add(message);
        }

        @Override
        public void info(String message) {
            throw new AssertionError("a leak report only warns");
        }
    };

    private static Block leaked(long id, long requested, StackTraceElement... site) {
        Block b = new Block(null, 0, requested);
        b.requested = requested;
        b.handleId = id;
        if (site.length > 0) {
            b.allocationSite = new Throwable("allocated here");
            b.allocationSite.setStackTrace(site);
        }
        return b;
    }

    private static StackTraceElement frame(String className, String method) {
        return new StackTraceElement(className, method, className.substring(className.lastIndexOf('.') + 1) + ".java", 10);
    }

    private static final StackTraceElement ENGINE = frame(Allocator.class.getName(), "allocate");
    private static final StackTraceElement API = frame("io.ferrum.memory.api.DeviceMemoryManager", "allocate");
    private static final StackTraceElement CALLER = frame("com.example.Tensors", "make");
    private static final StackTraceElement RUNNER = frame("org.junit.Runner", "run");

    @Test
    void nothingLeakedTellsNothing() {
        new LeakReport(Device.cpu()).tell(log);
        assertEquals(List.of(), warnings);
    }

    @Test
    void leaksAreCountedInOneWarning() {
        LeakReport r = new LeakReport(Device.cpu());
        r.add(leaked(1, 3000));
        r.add(leaked(2, 5000));
        r.tell(log);
        assertEquals(1, warnings.size());
        assertEquals("cpu:0: closed with 2 live allocations (8000 bytes (7.8 KiB)) still allocated; their memory was"
                + " released (enable debug to record allocation sites)", warnings.get(0));
    }

    @Test
    void oneLeakOfOneByteIsSaidInTheSingular() {
        LeakReport r = new LeakReport(Device.cpu());
        r.add(leaked(7, 1, ENGINE, API, CALLER, RUNNER));
        r.tell(log);
        assertEquals("cpu:0: closed with 1 live allocation (1 byte) still allocated; their memory was released."
                + " Allocation sites: [" + new MemoryHandle(7) + " (1 byte) at " + CALLER + "]", warnings.get(0));
    }

    @Test
    void aSiteIsTheFirstFrameOutsideTheEngineAndTheApi() {
        LeakReport r = new LeakReport(Device.cpu());
        r.add(leaked(7, 100, ENGINE, API, CALLER, RUNNER));
        r.tell(log);
        String w = warnings.get(0);
        assertTrue(w.contains(new MemoryHandle(7) + " (100 bytes) at " + CALLER), w);
        assertFalse(w.contains("Allocator") || w.contains("DeviceMemoryManager") || w.contains("Runner"), w);
    }

    @Test
    void aSiteWithNoFrameOutsideIsItsLastFrame() {
        LeakReport r = new LeakReport(Device.cpu());
        r.add(leaked(7, 100, ENGINE, API));
        r.tell(log);
        assertTrue(warnings.get(0).endsWith("at " + API + "]"), warnings.get(0));
    }

    @Test
    void aBlockNamedOnlyByItsAliasIsReportedUnderTheAlias() {
        LeakReport r = new LeakReport(Device.cpu());
        Block b = leaked(0, 64, CALLER);
        b.aliasId = 42;
        r.add(b);
        r.tell(log);
        assertTrue(warnings.get(0).contains(new MemoryHandle(42) + " (64 bytes)"), warnings.get(0));
    }

    @Test
    void everyLeakIsCountedButAtMostMaxSitesAreListed() {
        LeakReport r = new LeakReport(Device.cuda(1));
        for (int i = 1; i <= LeakReport.MAX_SITES + 5; i++) {
            r.add(leaked(i, 10, CALLER));
        }
        r.tell(log);
        String w = warnings.get(0);
        assertTrue(w.startsWith("cuda:1: closed with " + (LeakReport.MAX_SITES + 5) + " live allocations (250 bytes)"), w);
        assertEquals(LeakReport.MAX_SITES, w.split(" at com\\.example\\.Tensors", -1).length - 1, w);
        assertTrue(w.contains(new MemoryHandle(LeakReport.MAX_SITES) + " "));
        assertFalse(w.contains(new MemoryHandle(LeakReport.MAX_SITES + 1) + " "));
    }
}
