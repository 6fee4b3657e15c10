package io.ferrum.memory.cpu;

import java.util.Locale;
import java.util.Map;
import java.util.OptionalLong;

import org.osgi.framework.BundleContext;
import org.osgi.service.log.Logger;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.DeviceRegistration;
import io.ferrum.memory.pool.HostStreamManager;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.ProvidesDeviceServices;
import io.ferrum.memory.pool.PooledMemoryManager;
import io.ferrum.memory.pool.ZeroingPolicy;

/**
 * One running host device: an FFM upstream, its pooled manager and its stream manager, registered
 * as services through {@link DeviceRegistration} for as long as the component is active. Stopping
 * the component (bundle stop or update, deletion of a factory configuration) unregisters the
 * services first, then closes the manager, which gives every chunk back to the C library.
 *
 * <p><b>Configuration changes</b> arrive at {@link #reconfigure}: a configuration that is valid
 * restarts the device with it (its handles become invalid, as after any restart); one that is not
 * (see {@link #refusal}) is logged as an error naming the bad value and changes nothing: the device
 * keeps running as it was.
 */
@ProvidesDeviceServices
abstract class CpuDevice {
    private Device device;
    private FfmUpstream upstream;
    private HostStreamManager streams;
    private PooledMemoryManager manager;
    private DeviceRegistration registration;
    private BundleContext context;
    private Logger log;

    final void start(BundleContext bundleContext, CpuDeviceConfig cfg, int index, Logger logger) {
        this.context = bundleContext;
        this.log = logger;
        this.device = Device.cpu(index);
        this.upstream = new FfmUpstream(device, cfg.capacity(), CpuBackend.HELD_BYTES);
        this.streams = new HostStreamManager(device);
        this.manager = newManager(upstream, cfg, logger, streams);
        CpuBackend.DEVICES.put(device, manager);

        try {
            registration = DeviceRegistration.of(manager).streams(streams)
                    .property("service.description", "Ferrum Memory host memory " + device + " (FFM)").register(bundleContext);
        } catch (RuntimeException | Error e) {
            // DS does not deactivate a component whose activation failed: give the memory back here.
            stop();
            throw e;
        }
        if (log != null) {
            log.info("{} started: capacity {} bytes, pool {}", device, upstream.physicalCapacity(),
                    manager.poolConfig(MemoryType.GENERAL));
        }
    }

    final void stop() {
        if (device != null) {
            CpuBackend.DEVICES.remove(device, manager);
        }
        if (registration != null) {
            registration.unregister();
            registration = null;
        }
        if (manager != null) {
            manager.close();
        }
        if (streams != null) {
            streams.close();
        }
        if (log != null && device != null) {
            log.info("{} stopped: its memory went back to the C library ({} bytes still held by the cpu backend)",
                    device, CpuBackend.HELD_BYTES.get());
        }
    }

    /**
     * Applies a changed configuration (a DS modification): restarts the device with it, or, when
     * it is refused, logs why as an error and keeps the device as it is.
     *
     * @param cfg          the new configuration
     * @param index        the device index it asks for
     * @param indexRefusal why the component refuses that index, or null when it accepts it
     */
    final void reconfigure(CpuDeviceConfig cfg, int index, String indexRefusal) {
        String refusal = refusal(cfg, index, indexRefusal);
        if (refusal != null) {
            if (log != null) {
                log.error("{}; {} keeps running as it was", refusal, device);
            }
            return;
        }
        stop();
        start(context, cfg, index, log);
    }

    /**
     * @param cfg          a configuration
     * @param index        the device index it asks for
     * @param indexRefusal why the component refuses that index, or null when it accepts it
     * @return why the configuration cannot apply, naming the bad value and what to do, or null if it can
     */
    static String refusal(CpuDeviceConfig cfg, int index, String indexRefusal) {
        if (indexRefusal != null) {
            return indexRefusal;
        }
        try {
            managerConfig(cfg);
            zeroing(cfg.zeroing());
            PoolSettings.defaults().withCapacity(cfg.capacity()).withThreadCache(cfg.threadCacheBytes());
            return null;
        } catch (InvalidMemoryRequestException e) {
            return "Configuration of cpu:" + index + " refused: " + e.getMessage();
        }
    }

    /**
     * The pooled manager of one configured device, exactly as a running device builds it (the
     * contract tests build theirs here too).
     *
     * @param streams the device's streams, on which its asynchronous copies run; null for private
     *                streams that close with the manager
     */
    static PooledMemoryManager newManager(FfmUpstream upstream, CpuDeviceConfig cfg, Logger logger, HostStreamManager streams) {
        PoolSettings settings = PoolSettings.defaults().withZeroing(zeroing(cfg.zeroing())).withLog(new OsgiPoolLog(logger))
                .withPeers(CpuBackend.DEVICES::get).withThreadCache(cfg.threadCacheBytes());
        return PooledMemoryManager.create(upstream, managerConfig(cfg), settings, streams);
    }

    static MemoryManagerConfig managerConfig(CpuDeviceConfig cfg) {
        MemoryPoolConfig pool = new MemoryPoolConfig(cfg.initialSize(),
                cfg.maxSize() > 0 ? OptionalLong.of(cfg.maxSize()) : OptionalLong.empty(),
                cfg.growthIncrement(), cfg.autoExpansion(), cfg.alignment(), cfg.preAllocate(), cfg.stats());
        return new MemoryManagerConfig(Map.of(MemoryType.GENERAL, pool), true, cfg.autoGc(), cfg.gcThreshold(),
                cfg.debug(), cfg.maxConcurrentTransfers());
    }

    static ZeroingPolicy zeroing(String value) {
        String v = value == null ? "none" : value.strip().toLowerCase(Locale.ROOT).replace('_', '-');
        return switch (v) {
            case "none" -> ZeroingPolicy.NONE;
            case "on-allocate" -> ZeroingPolicy.ON_ALLOCATE;
            case "on-free" -> ZeroingPolicy.ON_FREE;
            default -> throw new InvalidMemoryRequestException("Invalid zeroing '" + value
                    + "': use none, on-allocate or on-free");
        };
    }
}
