package io.ferrum.memory.cpu;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.pool.PooledMemoryManager;

/** Names and bundle-wide state of the CPU backend. */
final class CpuBackend {
    /** Configuration PID of cpu:0. */
    static final String DEFAULT_PID = "io.ferrum.memory.cpu";
    /** Factory PID of cpu:1, cpu:2, ... */
    static final String DEVICE_FACTORY_PID = "io.ferrum.memory.cpu.device";
    /** Bytes every upstream of this bundle holds from the C library right now. */
    static final AtomicLong HELD_BYTES = new AtomicLong();
    /** The running devices of this bundle, so that cpu:a can map memory with cpu:b. */
    static final ConcurrentHashMap<Device, PooledMemoryManager> DEVICES = new ConcurrentHashMap<>();

    private CpuBackend() {
    }
}
