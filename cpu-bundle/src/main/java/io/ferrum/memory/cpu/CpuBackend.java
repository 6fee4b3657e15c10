package io.ferrum.memory.cpu;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import org.osgi.annotation.bundle.Header;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.pool.BundleClasses;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * Names and bundle-wide state of the CPU backend. The {@value #BACKEND_HEADER} manifest header marks
 * this bundle as a device backend of kind {@code cpu}: the shell's {@code mem:backends} lists the
 * bundles that carry it, with their state. Initialised before the first upstream is made, it defines
 * every class of the bundle then ({@link BundleClasses}).
 */
@Header(name = CpuBackend.BACKEND_HEADER, value = "cpu")
final class CpuBackend {
    static {
        // Every class of the bundle before its first manager serves: see BundleClasses (Equinox, uninstall).
        BundleClasses.defineAll(CpuBackend.class);
    }

    /** The manifest header that marks a device backend bundle; its value is the device kind. */
    static final String BACKEND_HEADER = "Ferrum-Backend";
    /** Configuration PID of cpu:0. */
    static final String DEFAULT_PID = "io.ferrum.memory.cpu";
    /** Factory PID of cpu:1, cpu:2, ... */
    static final String DEVICE_FACTORY_PID = "io.ferrum.memory.cpu.device";
    /** Bytes every upstream of this bundle holds from the C library right now. */
    static final AtomicLong HELD_BYTES = new AtomicLong();
    /** The running devices of this bundle, so that cpu:a can map memory with cpu:b. */
    static final ConcurrentHashMap<Device, PooledMemoryManager> DEVICES = new ConcurrentHashMap<>();
    /**
     * Which component holds each device index: the first configuration to claim {@code cpu:N} runs
     * it, and another that asks for the same index is refused (two managers of one device would
     * overwrite each other here and in the monitor).
     */
    static final ConcurrentHashMap<Device, CpuDevice> CLAIMS = new ConcurrentHashMap<>();

    private CpuBackend() {
    }
}
