package io.ferrum.memory.cpu;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

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
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryManagerFactory;
import io.ferrum.memory.api.StreamManager;
import io.ferrum.memory.pool.HostStreamManager;
import io.ferrum.memory.pool.PoolSettings;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * Creates private host-memory managers (kind {@code cpu}) that belong to the caller. Whatever a
 * caller forgot to close is closed when this bundle stops, so no native memory outlives it.
 */
@Component(service = MemoryManagerFactory.class, property = DeviceMemoryManager.DEVICE_KIND_PROPERTY + "=cpu")
public final class CpuMemoryManagerFactory implements MemoryManagerFactory {
    private final Set<AutoCloseable> created = ConcurrentHashMap.newKeySet();
    private final Logger log;
    private volatile boolean stopped;

    @Activate
    public CpuMemoryManagerFactory(
            @Reference(service = LoggerFactory.class, cardinality = ReferenceCardinality.OPTIONAL) Logger log) {
        this.log = log;
    }

    private static void checkKind(Device device) {
        if (device == null || !device.isCpu()) {
            throw new InvalidMemoryRequestException("Device " + device + " is not served by the cpu backend; use the"
                    + " MemoryManagerFactory registered with memory.device.kind=" + (device == null ? "<kind>" : device.kind()));
        }
    }

    @Override
    public DeviceMemoryManager createMemoryManager(Device device, MemoryManagerConfig config) {
        return createAdvancedMemoryManager(device, config);
    }

    @Override
    public AdvancedMemoryManager createAdvancedMemoryManager(Device device, MemoryManagerConfig config) {
        checkKind(device);
        if (config == null) {
            throw new InvalidMemoryRequestException("Manager configuration is null; use MemoryManagerConfig.defaults()");
        }
        checkRunning(device);
        forgetClosed();
        PooledMemoryManager m = PooledMemoryManager.create(new FfmUpstream(device, 0, CpuBackend.HELD_BYTES), config,
                PoolSettings.defaults().withLog(new OsgiPoolLog(log)), null);
        return keep(device, m);
    }

    @Override
    public StreamManager createStreamManager(Device device) {
        checkKind(device);
        checkRunning(device);
        forgetClosed();
        return keep(device, new HostStreamManager(device));
    }

    /**
     * Forgets what its user closed already: kept until the factory stopped, the managers and stream
     * managers a long-running user made and closed in turn grew the set without bound. Only closed
     * ones go, so the stop still closes every one left open.
     */
    private void forgetClosed() {
        created.removeIf(c -> c instanceof PooledMemoryManager m ? m.isClosed()
                : c instanceof HostStreamManager s && s.isClosed());
    }

    /** @return how many managers and stream managers this factory holds for its stop (tests) */
    int held() {
        return created.size();
    }

    private void checkRunning(Device device) {
        if (stopped) {
            throw new io.ferrum.memory.api.DeviceUnavailableException(device, "The cpu backend has stopped");
        }
    }

    /**
     * Keeps what was just created for the stop to close, then looks at {@code stopped} again: a stop
     * that came after the first check either finds it kept (it set the flag before it looked), or is
     * seen here, and then the creation is closed and refused. Checking once, before creating, handed
     * out a manager of a stopped bundle, with its native memory, when the stop came in between.
     */
    private <T extends AutoCloseable> T keep(Device device, T made) {
        created.add(made);
        if (stopped) {
            created.remove(made);
            try {
                made.close();
            } catch (Exception e) {
                if (log != null) {
                    log.warn("Closing {} created while the cpu backend stopped failed", made, e);
                }
            }
            checkRunning(device);
        }
        return made;
    }

    @Override
    public Set<String> deviceKinds() {
        return Set.of(Device.CPU);
    }

    @Deactivate
    void deactivate() {
        stopped = true; // before the loop: see keep()
        for (AutoCloseable c : created) {
            try {
                c.close();
            } catch (Exception e) {
                if (log != null) {
                    log.warn("Closing {} at stop failed", c, e);
                }
            }
        }
        created.clear();
    }
}
