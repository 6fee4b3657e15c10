package io.ferrum.memory.monitor;

import io.ferrum.memory.api.DeviceUnavailableException;

/**
 * Whether the monitor still runs, shared by every room that answers a public call.
 *
 * <p>Invariant: once {@link #stop()} is called the state never goes back, and from then on every call
 * of {@code GlobalMemoryMonitor} and {@code MemoryRouter} is refused with {@link #refusal(String)},
 * the queries that answer an {@code Optional} included. The flag is set first thing on deactivation:
 * DS unbinds every manager after deactivation, and without it a stopped router would answer from an
 * emptying registry and call a block that is live on a running manager released (issue 13, defect
 * 20). A stopped monitor frees nothing and forgets nothing; the next instance serves the blocks.
 */
final class RunState {
    private volatile boolean stopped;

    void stop() {
        stopped = true;
    }

    boolean isStopped() {
        return stopped;
    }

    /**
     * @param call the call refused, with the values it was given
     * @return the refusal of a stopped monitor (device {@code null}: it concerns no one device)
     */
    static DeviceUnavailableException refusal(String call) {
        return new DeviceUnavailableException(null, "The memory router and global monitor (" + MemoryMonitor.PID
                + ") is stopped: " + call + " was not carried out. Blocks allocated through it are untouched and"
                + " stay live on their managers; get the running MemoryRouter or GlobalMemoryMonitor service and"
                + " call it there");
    }
}
