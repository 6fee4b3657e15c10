package io.ferrum.memory.cuda;

import org.osgi.framework.BundleContext;
import org.osgi.service.log.Logger;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.pool.DeviceRegistration;
import io.ferrum.memory.pool.DeviceUpstream;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;
import io.ferrum.memory.pool.ProvidesDeviceServices;

/**
 * One running GPU: its upstream and streams (each with its own retain of the primary context), its
 * pooled manager, and the services {@link DeviceRegistration} registers for it, exactly as the CPU
 * backend registers {@code cpu:N}. {@link #stop()} unregisters first, then closes the manager (every
 * chunk goes back to the driver, the staging ring and bounce buffer too), then the streams (every
 * {@code CUstream} destroyed, one with work still running when that work ends); each close releases
 * its context retain, the streams' after their last {@code CUstream}.
 */
@ProvidesDeviceServices
final class CudaDevice {
    private final Device device;
    /** The configuration it runs with: its start's, then that of each edit of its pools. */
    private CudaDeviceConfig config;
    private final CudaStreams streams;
    private final PooledMemoryManager manager;
    private final DeviceRegistration registration;
    private final Logger log;

    private CudaDevice(BundleContext context, Device device, CudaDeviceConfig cfg, Logger log, PinnedRanges pinned) {
        this.device = device;
        this.config = cfg;
        this.log = log;
        CudaStreams s = new CudaStreams(PrimaryContext.retain(device));
        PooledMemoryManager m = null;
        try {
            m = newManager(new CudaUpstream(PrimaryContext.retain(device), CudaDeviceConfigs.settings(cfg), pinned),
                    cfg, log, s);
            CudaBackend.DEVICES.put(device, m);
            registration = DeviceRegistration.of(m).streams(s)
                    .property("service.description", "Ferrum Memory GPU memory " + device + " (JCuda driver API)")
                    .register(context);
        } catch (RuntimeException | Error e) {
            if (m != null) {
                CudaBackend.DEVICES.remove(device, m);
                m.close();
            }
            s.close();
            throw e;
        }
        this.streams = s;
        this.manager = m;
    }

    /**
     * Starts {@code cuda:index} and registers its services.
     *
     * @throws io.ferrum.memory.api.MemoryException when the driver refuses (nothing stays held)
     */
    static CudaDevice start(BundleContext context, int index, CudaDeviceConfig cfg, Logger log, PinnedRanges pinned) {
        CudaDevice d = new CudaDevice(context, Device.cuda(index), cfg, log, pinned);
        if (log != null) {
            log.info("{} started: {} bytes of device memory, staging {} x {} bytes", d.device,
                    d.manager.memoryInfo().totalBytes(), CudaDeviceConfigs.settings(cfg).stagingSlots(), CudaDeviceConfigs.settings(cfg).stagingSlotBytes());
        }
        return d;
    }

    /**
     * The pooled manager of one GPU, as a running device builds it.
     *
     * @param upstream the GPU's {@link CudaUpstream} (tests without a GPU: host memory standing in
     *                 for it); closed here when the manager cannot be made
     * @param streams  the device's streams; null for private host streams that close with the manager
     */
    static PooledMemoryManager newManager(DeviceUpstream upstream, CudaDeviceConfig cfg, Logger log,
                                          io.ferrum.memory.pool.StreamExecutor streams) {
        PoolSettings settings = PoolSettings.defaults().withCapacity(CudaDeviceConfigs.capacity(cfg))
                .withZeroing(CudaDeviceConfigs.zeroing(cfg.zeroing())).withLog(new CudaPoolLog(log))
                .withPeers(CudaBackend::peer).withThreadCache(CudaDeviceConfigs.threadCacheBytes(cfg));
        try {
            return PooledMemoryManager.create(upstream, CudaDeviceConfigs.managerConfig(cfg), settings, streams);
        } catch (RuntimeException | Error e) {
            upstream.close();
            throw e;
        }
    }

    Device device() {
        return device;
    }

    PooledMemoryManager manager() {
        return manager;
    }

    /**
     * Stops this GPU for a restart, but only while it holds no live block: a restart drops every
     * block, and a configuration edit must not take its users' memory. The check and the close are
     * one step ({@link PooledMemoryManager#closeIfUnused}), so a block allocated meanwhile either
     * makes it refuse or is refused as on a closed manager.
     *
     * @return null when the GPU stopped; else why not, for the refusal (nothing changed then)
     */
    String stopIfUnused() {
        String refusal = whyInUse(manager, device);
        if (refusal == null) {
            stop();
        }
        return refusal;
    }

    /**
     * Closes {@code manager} if it holds no live block.
     *
     * @return null when it is closed on return; else what it holds that a restart would drop
     */
    static String whyInUse(PooledMemoryManager manager, Device device) {
        if (manager.isClosed() || manager.closeIfUnused()) {
            return null;
        }
        MemoryInfo info = manager.memoryInfo();
        long blocks = info.activeAllocations();
        // closeIfUnused also counts the names it holds for other devices' blocks (createMapping's
        // aliases), which the manager's own figures leave out.
        // A block of its own named only by a peer's alias (a mapping whose source handle was freed)
        // counts here but is the peer's to list: the user looks for it there.
        String elsewhere = blocks > manager.handles().size()
                ? " (mem:handles lists a block named only by another device's handle, the target of a mapping,"
                        + " under that device: free it there)"
                : "";
        return device + " holds " + (blocks > 0
                ? blocks + (blocks == 1 ? " live block (" : " live blocks (") + info.usedBytes() + " bytes)"
                : "names of another device's blocks (mappings)")
                + " that a restart would drop" + elsewhere + ": free them first";
    }

    CudaDeviceConfig config() {
        return config;
    }

    /**
     * Applies the pools of {@code next}, a configuration that differs from the running one in pool
     * attributes only ({@link CudaDeviceConfigs#onlyPoolsDiffer}): every block and handle stays.
     *
     * @throws io.ferrum.memory.api.MemoryException naming the pool that refused; no pool changed
     */
    void configurePools(CudaDeviceConfig next) {
        manager.configurePools(CudaDeviceConfigs.managerConfig(next));
        config = next;
    }

    /** Unregisters, then gives everything back: memory, staging, streams, contexts. */
    void stop() {
        CudaBackend.DEVICES.remove(device, manager);
        try {
            registration.unregister();
        } finally {
            try {
                manager.close();
            } finally {
                streams.close();
            }
        }
        if (log != null) {
            log.info("{} stopped: its memory, streams and context went back to the driver", device);
        }
    }
}
