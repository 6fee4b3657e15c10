package io.ferrum.memory.cuda;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import jcuda.driver.JCudaDriver;

import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.log.Logger;
import org.osgi.service.log.LoggerFactory;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryManagerFactory;
import io.ferrum.memory.api.StreamManager;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * Creates private GPU managers and stream managers (kind {@code cuda}) that belong to the caller,
 * each over its own upstream and context retain. Registered only under the {@value
 * CudaBackend#AVAILABLE} condition. Whatever a caller forgot to close is closed when the bundle
 * stops, so no device memory outlives it.
 */
@Component(service = MemoryManagerFactory.class, property = {
        DeviceMemoryManager.DEVICE_KIND_PROPERTY + "=" + Device.CUDA, CudaBackend.REQUIRES_GPU})
public final class CudaMemoryManagerFactory implements MemoryManagerFactory {
    private final Set<AutoCloseable> created = ConcurrentHashMap.newKeySet();
    private final PinnedRanges pinned = new PinnedRanges();
    private final Logger log;
    private volatile boolean stopped;

    @Activate
    public CudaMemoryManagerFactory(
            @Reference(service = LoggerFactory.class, cardinality = ReferenceCardinality.OPTIONAL) Logger log) {
        this.log = log;
    }

    /**
     * @param device  the device asked for
     * @param devices GPUs the driver reports
     * @return why this factory cannot serve it, or null when it can
     */
    static String refusal(Device device, int devices) {
        if (device == null || !Device.CUDA.equals(device.kind())) {
            return "Device " + device + " is not served by the cuda backend; use the MemoryManagerFactory registered"
                    + " with memory.device.kind=" + (device == null ? "<kind>" : device.kind());
        }
        if (device.index() >= devices) {
            return "No " + device + ": the driver reports " + devices + " CUDA device" + (devices == 1 ? "" : "s");
        }
        return null;
    }

    private void check(Device device) {
        if (device == null || !Device.CUDA.equals(device.kind())) {
            throw new InvalidMemoryRequestException(refusal(device, 0));
        }
        if (stopped) {
            throw new DeviceUnavailableException(device, "The cuda backend has stopped");
        }
        int[] n = new int[1];
        Cu.check(JCudaDriver.cuDeviceGetCount(n), device, "cuDeviceGetCount");
        String refusal = refusal(device, n[0]);
        if (refusal != null) {
            throw new DeviceUnavailableException(device, refusal);
        }
    }

    @Override
    public DeviceMemoryManager createMemoryManager(Device device, MemoryManagerConfig config) {
        return createAdvancedMemoryManager(device, config);
    }

    @Override
    public AdvancedMemoryManager createAdvancedMemoryManager(Device device, MemoryManagerConfig config) {
        if (config == null) {
            throw new InvalidMemoryRequestException("Manager configuration is null; use MemoryManagerConfig.defaults()");
        }
        check(device);
        forgetClosed();
        CudaUpstream upstream = new CudaUpstream(PrimaryContext.retain(device), CudaSettings.DEFAULTS, pinned);
        PooledMemoryManager m;
        try {
            m = PooledMemoryManager.create(upstream, config, PoolSettings.defaults().withLog(new CudaPoolLog(log)), null);
        } catch (RuntimeException | Error e) {
            upstream.close();
            throw e;
        }
        return keep(m, device);
    }

    /**
     * Forgets what its user closed already: kept until the factory stopped, the managers and stream
     * managers a long-running user made and closed in turn grew the set without bound. Only closed
     * ones go, so the stop still closes every one left open.
     */
    private void forgetClosed() {
        created.removeIf(c -> c instanceof PooledMemoryManager m ? m.isClosed()
                : c instanceof CudaStreams s && s.isClosed());
    }

    /**
     * Keeps {@code c} for {@link #deactivate}, or closes it when the bundle stopped meanwhile: added
     * first, then {@code stopped} read, so either this sees the stop or the stop's sweep sees {@code c}.
     */
    private <T extends AutoCloseable> T keep(T c, Device device) {
        created.add(c);
        if (stopped) {
            created.remove(c);
            try {
                c.close();
            } catch (Exception e) {
                if (log != null) {
                    log.warn("Closing {} at stop failed: {}", c, e.getMessage());
                }
            }
            throw new DeviceUnavailableException(device, "The cuda backend has stopped");
        }
        return c;
    }

    @Override
    public StreamManager createStreamManager(Device device) {
        check(device);
        forgetClosed();
        return keep(new CudaStreams(PrimaryContext.retain(device)), device);
    }

    @Override
    public Set<String> deviceKinds() {
        return Set.of(Device.CUDA);
    }

    @Deactivate
    void deactivate() {
        stopped = true;
        for (AutoCloseable c : created) {
            try {
                c.close();
            } catch (Exception e) {
                if (log != null) {
                    log.warn("Closing {} at stop failed: {}", c, e.getMessage());
                }
            }
        }
        created.clear();
    }
}
