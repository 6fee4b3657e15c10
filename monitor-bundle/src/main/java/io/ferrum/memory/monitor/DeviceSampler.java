package io.ferrum.memory.monitor;

import java.util.Collections;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.MemoryInfo;

/**
 * Reads every serving device's full figures ({@link DeviceMemoryManager#memoryInfo()}), on demand
 * for {@code globalMemoryInfo} and periodically on its own thread: each sample derives the pressure
 * levels of managers that do not report their own ({@link PressureLevels#derive}) and is then handed
 * to the observers.
 *
 * <p>Invariants: a sample reads each manager of one reading of the registry once, and derives each
 * level from that manager's own figures; a device whose manager fails to answer is left out of that
 * reading, never fails it;
 * at most one sampling schedule is active (a new period cancels the old one); after {@link #stop()}
 * nothing is sampled.
 */
final class DeviceSampler {
    private final DeviceRegistry registry;
    private final PressureLevels levels;
    private final ObserverNotifier notifier;
    private final MonitorLog log;
    private final ScheduledExecutorService thread = Executors.newSingleThreadScheduledExecutor(
            MemoryMonitor.daemon("ferrum-monitor-sampler"));
    /** Guarded by the monitor's configuration lock (schedule is called from apply only). */
    private ScheduledFuture<?> sampling;
    /** Guarded like {@link #sampling}: the period it runs at, 0 when none runs. */
    private long periodMs;

    DeviceSampler(DeviceRegistry registry, PressureLevels levels, ObserverNotifier notifier, MonitorLog log) {
        this.registry = registry;
        this.levels = levels;
        this.notifier = notifier;
        this.log = log;
    }

    /** @param periodMs milliseconds between samples; 0 or less: no sampling */
    void schedule(long periodMs) {
        if (sampling != null) {
            sampling.cancel(false);
            sampling = null;
        }
        this.periodMs = Math.max(0, periodMs);
        if (periodMs > 0) {
            sampling = thread.scheduleAtFixedRate(this::sample, periodMs, periodMs, TimeUnit.MILLISECONDS);
        }
    }

    /** @return milliseconds between samples as last scheduled; 0: no sampling */
    long periodMs() {
        return periodMs;
    }

    void stop() {
        thread.shutdownNow();
    }

    /**
     * Runs a task once on the sampler's thread (which also serves the monitor's other delayed checks);
     * after {@link #stop()} it never runs.
     */
    void later(Runnable task, long delayMs) {
        try {
            thread.schedule(task, delayMs, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.RejectedExecutionException stopped) {
            // the monitor stopped: nothing left to check
        }
    }

    /** @return the manager's full figures, or null if it fails to answer (a plugin's failure stays its own) */
    static MemoryInfo safeInfo(DeviceMemoryManager m) {
        try {
            return m.memoryInfo();
        } catch (VirtualMachineError fatal) {
            throw fatal;
        } catch (Throwable e) {
            return null;
        }
    }

    /** @return every serving device's full figures, in device order, leaving out those that fail */
    Map<Device, MemoryInfo> figures() {
        return figures(registry.active());
    }

    /** @return the full figures of each of {@code managers}, read once each, leaving out those that fail */
    private static Map<Device, MemoryInfo> figures(Map<Device, DeviceMemoryManager> managers) {
        Map<Device, MemoryInfo> out = new TreeMap<>();
        for (Map.Entry<Device, DeviceMemoryManager> e : managers.entrySet()) {
            MemoryInfo info = safeInfo(e.getValue());
            if (info != null) {
                out.put(e.getKey(), info);
            }
        }
        return Collections.unmodifiableMap(out);
    }

    /** One sample (the schedule's task; tests call it directly). */
    void sample() {
        try {
            // One reading of the registry for the whole sample: each level is derived from the figures
            // of the manager it is derived for, never from those of a manager it replaced meanwhile
            // (PressureLevels.derive drops a manager no longer followed).
            Map<Device, DeviceMemoryManager> active = registry.active();
            Map<Device, MemoryInfo> all = new TreeMap<>();
            for (Map.Entry<Device, DeviceMemoryManager> e : active.entrySet()) {
                // Numbered before it is read: figures a newer reading derived from meanwhile win.
                long reading = levels.readingFor(e.getKey(), e.getValue());
                MemoryInfo info = safeInfo(e.getValue());
                if (info != null) {
                    all.put(e.getKey(), info);
                    levels.derive(e.getKey(), e.getValue(), info, reading);
                }
            }
            notifier.sample(Collections.unmodifiableMap(all));
        } catch (RuntimeException e) {
            // Logged and not rethrown: an exception would cancel the schedule for good.
            log.warn("Sampling device memory failed", e);
        }
    }
}
