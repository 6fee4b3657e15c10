package io.ferrum.memory.cuda;

import java.util.concurrent.ConcurrentHashMap;

import org.osgi.annotation.bundle.Header;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * Names and bundle-wide state of the CUDA backend. The {@value #BACKEND_HEADER} manifest header
 * marks this bundle as a device backend of kind {@code cuda}; the shell's {@code mem:backends}
 * lists it with its state and, from the {@value #STATUS_PROPERTY} property of the probe's
 * condition service, why it serves no device.
 */
@Header(name = CudaBackend.BACKEND_HEADER, value = Device.CUDA)
final class CudaBackend {
    /** The manifest header that marks a device backend bundle; its value is the device kind. */
    static final String BACKEND_HEADER = "Ferrum-Backend";
    /**
     * Service property of a backend's services saying, in one line, what the backend serves or why
     * it serves nothing; {@code mem:backends} shows it.
     */
    static final String STATUS_PROPERTY = "memory.backend.status";
    /** Configuration PID of every GPU's settings (the defaults of each device). */
    static final String PID = "io.ferrum.memory.cuda";
    /** Condition registered by the probe when the driver reports at least one device. */
    static final String AVAILABLE = "io.ferrum.memory.cuda.available";
    /** Condition registered by the probe when there is no driver or no device, with the reason. */
    static final String UNAVAILABLE = "io.ferrum.memory.cuda.unavailable";
    /** What a component that must run only with a GPU declares (DS 1.5 satisfying condition). */
    static final String REQUIRES_GPU = "osgi.ds.satisfying.condition.target=(osgi.condition.id=" + AVAILABLE + ")";
    /** Service property of the conditions: how many CUDA devices the driver reports. */
    static final String DEVICE_COUNT_PROPERTY = "memory.cuda.devices";
    /** The running GPUs of this bundle, so that cuda:a can map memory with cuda:b. */
    static final ConcurrentHashMap<Device, PooledMemoryManager> DEVICES = new ConcurrentHashMap<>();
    /** The host's running pooled managers ({@link HostManagers}), so that cuda:i can map memory with cpu:n. */
    static final ConcurrentHashMap<Device, PooledMemoryManager> HOSTS = new ConcurrentHashMap<>();

    private CudaBackend() {
    }

    /**
     * The GPUs' peer lookup ({@link io.ferrum.memory.pool.PoolSettings#peers()}): another GPU of
     * this bundle, or a host device's manager.
     *
     * @return the running manager of {@code device}, or null
     */
    static PooledMemoryManager peer(Device device) {
        return Device.CUDA.equals(device.kind()) ? DEVICES.get(device) : HOSTS.get(device);
    }
}
