package io.ferrum.memory.cuda;

import java.util.HashMap;
import java.util.Map;
import java.util.TreeMap;

import jcuda.driver.JCudaDriver;

import org.osgi.framework.BundleContext;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.ConfigurationPolicy;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Modified;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.log.Logger;
import org.osgi.service.log.LoggerFactory;
import org.osgi.service.metatype.annotations.Designate;

import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryException;

/**
 * Every GPU the driver reports, one {@link CudaDevice} each: {@code cuda:0} ... {@code cuda:N-1}.
 * Active only under the {@value CudaBackend#AVAILABLE} condition, so without a GPU it never runs
 * and never calls the driver. The PID {@code io.ferrum.memory.cuda} configures every GPU; a GPU
 * with a factory configuration of its own ({@link ConfiguredCudaDevice}) runs with that one instead.
 *
 * <p>This component is the one owner of the running GPUs: a configuration arriving, changing or
 * leaving restarts just that GPU, but only while it holds no live block (a restart drops every
 * block; see {@link CudaDevice#stopIfUnused}): otherwise the GPU keeps running as it was and one
 * error line says what it holds. A change of pool attributes only is applied to the running pools
 * instead, keeping every block, as the CPU backend does. A refused configuration changes nothing and
 * says why (see {@link CudaDeviceConfigs#refusal}): in one log line, and in {@code mem:backends}
 * while it stands ({@link Rejections}).
 */
@Component(service = CudaDevices.class, configurationPid = CudaBackend.PID,
        configurationPolicy = ConfigurationPolicy.OPTIONAL, immediate = true, property = CudaBackend.REQUIRES_GPU)
@Designate(ocd = CudaDeviceConfig.class)
public final class CudaDevices {
    private final BundleContext context;
    private final Logger log;
    private final int count;
    private final PinnedRanges pinned = new PinnedRanges();
    private final Map<Integer, CudaDevice> running = new TreeMap<>();
    private final Map<Integer, CudaDeviceConfig> own = new HashMap<>();
    private final Rejections rejections;
    private CudaDeviceConfig defaults;

    @Activate
    public CudaDevices(BundleContext context, CudaDeviceConfig config, Map<String, Object> properties,
                       @Reference(service = LoggerFactory.class, cardinality = ReferenceCardinality.OPTIONAL) Logger log) {
        this(context, config, properties, log, deviceCount());
    }

    /** @param count the GPUs the driver reports (tests without a driver: 0, so that none starts) */
    CudaDevices(BundleContext context, CudaDeviceConfig config, Map<String, Object> properties, Logger log, int count) {
        this.context = context;
        this.log = log;
        this.count = count;
        this.rejections = new Rejections(context);
        String refusal = CudaDeviceConfigs.defaultsRefusal(config, properties);
        if (refusal != null) {
            reject(CudaBackend.PID, refusal + "; the GPUs start with their defaults" + Rejections.file(properties));
        }
        synchronized (this) {
            defaults = refusal == null ? config : CudaDeviceConfigs.DEFAULTS;
            for (int i = 0; i < count; i++) {
                startQuietly(i);
            }
        }
    }

    private static int deviceCount() {
        int[] n = new int[1];
        Cu.check(JCudaDriver.cuDeviceGetCount(n), null, "cuDeviceGetCount");
        return n[0];
    }

    /** Logs a refusal as one error line and shows it in mem:backends until {@code subject} applies. */
    private void reject(String subject, String reason) {
        if (log != null) {
            log.error("{}", reason);
        }
        rejections.reject(subject, reason);
    }

    /** @return the refusals that stand, which {@link ConfiguredCudaDevice} adds its own to */
    Rejections rejections() {
        return rejections;
    }

    @Modified
    synchronized void modified(CudaDeviceConfig config, Map<String, Object> properties) {
        String refusal = CudaDeviceConfigs.defaultsRefusal(config, properties);
        if (refusal != null) {
            reject(CudaBackend.PID, refusal + "; the GPUs keep running as they were" + Rejections.file(properties));
            return;
        }
        rejections.clear(CudaBackend.PID);
        defaults = config;
        for (int i = 0; i < count; i++) {
            String refused = own.containsKey(i) ? null : restart(i);
            if (refused != null) {
                reject("cuda:" + i, "Configuration " + CudaBackend.PID + " (every GPU) not applied to cuda:" + i + ": " + refused
                        + "; cuda:" + i + " keeps running as it was, and takes the new settings at its next restart");
            }
        }
    }

    /**
     * Gives {@code cuda:index} a configuration of its own and restarts it with it.
     *
     * @param index      the GPU, or null when the configuration's index is no whole number (refused)
     * @param properties the configuration's raw properties (a list is refused)
     * @throws InvalidMemoryRequestException naming every bad value; nothing changes then
     */
    synchronized void configure(Integer index, CudaDeviceConfig config, Map<String, ?> properties) {
        String refusal = CudaDeviceConfigs.refusal(config, properties, index, count);
        if (refusal != null) {
            throw new InvalidMemoryRequestException(refusal);
        }
        CudaDeviceConfig before = own.put(index, config);
        String refused = restart(index);
        if (refused != null) {
            if (before == null) {
                own.remove(index);
            } else {
                own.put(index, before);
            }
            throw new InvalidMemoryRequestException("Configuration of cuda:" + index + " refused: " + refused);
        }
    }

    /** Takes {@code cuda:index}'s own configuration away if it is {@code config}: back to the defaults. */
    synchronized void unconfigure(int index, CudaDeviceConfig config) {
        if (own.get(index) == config && own.remove(index) != null) {
            String refused = restart(index);
            if (refused != null) {
                reject("cuda:" + index, "The configuration of cuda:" + index + " was removed: going back to the settings of "
                        + CudaBackend.PID + " restarts it, but " + refused + "; cuda:" + index + " keeps running with the"
                        + " removed settings until its next restart (a change of " + CudaBackend.PID + ")");
            }
        }
    }

    /** @return the running GPUs by index; a snapshot */
    synchronized Map<Integer, CudaDevice> running() {
        return Map.copyOf(running);
    }

    /**
     * Gives {@code cuda:index} the configuration it now has: to its running pools when only pool
     * attributes changed, else by a restart, which only a GPU holding no live block takes.
     *
     * @return null when it applied (or the GPU started); else why not: the GPU runs on unchanged
     */
    private String restart(int index) {
        CudaDeviceConfig cfg = own.getOrDefault(index, defaults);
        CudaDevice d = running.get(index);
        if (d != null && CudaDeviceConfigs.onlyPoolsDiffer(d.config(), cfg)) {
            try {
                d.configurePools(cfg);
            } catch (MemoryException e) {
                return e.getMessage();
            }
            if (log != null) {
                log.info("cuda:{}: pool configuration applied without a restart", index);
            }
            rejections.clear("cuda:" + index); // it runs with the settings it should have now
            return null;
        }
        if (d != null) {
            String refused = d.stopIfUnused();
            if (refused != null) {
                return refused;
            }
            running.remove(index);
        }
        startQuietly(index);
        rejections.clear("cuda:" + index);
        return null;
    }

    /** Starts a GPU; a failure is logged in one line and leaves that GPU off, the others on. */
    private void startQuietly(int index) {
        CudaDeviceConfig cfg = own.getOrDefault(index, defaults);
        try {
            running.put(index, CudaDevice.start(context, index, cfg, log, pinned));
        } catch (RuntimeException e) {
            if (log != null) {
                log.error("cuda:{} did not start: {}", index, e.getMessage());
            }
        }
    }

    @Deactivate
    synchronized void deactivate() {
        rejections.clearAll();
        for (CudaDevice d : running.values()) {
            try {
                d.stop();
            } catch (RuntimeException e) {
                if (log != null) {
                    log.error("Stopping {} failed: {}", d.device(), e.getMessage());
                }
            }
        }
        running.clear();
    }
}
