package io.ferrum.memory.cpu;

import java.util.concurrent.atomic.AtomicLong;

/** Names and bundle-wide state of the CPU backend. */
final class CpuBackend {
    /** Configuration PID of cpu:0. */
    static final String DEFAULT_PID = "io.ferrum.memory.cpu";
    /** Factory PID of cpu:1, cpu:2, ... */
    static final String DEVICE_FACTORY_PID = "io.ferrum.memory.cpu.device";
    /** Bytes every upstream of this bundle holds from the C library right now. */
    static final AtomicLong HELD_BYTES = new AtomicLong();

    private CpuBackend() {
    }
}
