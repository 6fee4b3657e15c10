package io.ferrum.memory.monitor;

import java.lang.annotation.Annotation;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import org.osgi.framework.Constants;
import org.osgi.service.log.Logger;

import io.ferrum.memory.api.AllocationStrategy;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.MemoryRouter;

/**
 * Builds a monitor and router without a framework, for tests and benchmarks: the same component DS
 * runs, configured and wired the way DS would, so that what is measured is what a distribution runs.
 * Nothing else of the monitor is public.
 *
 * <pre>{@code
 * try (MonitorBuilder.Standalone s = new MonitorBuilder().manager(cpu).strategy(new BestFitStrategy()).build()) {
 *     MemoryHandle h = s.router().allocate(4096, AllocationRequirements.defaults());
 *     s.router().deallocate(h);
 * }
 * }</pre>
 *
 * <p>Strategies are added as services in the order given (the first is the oldest service) under
 * their own names; managers are registered by hand ({@link GlobalMemoryMonitor#registerManager}), so
 * they serve their devices ahead of any service. Sampling is off unless a period is set. A builder
 * may build several monitors; each shares nothing with another.
 */
public final class MonitorBuilder {
    private String configuredStrategy = "";
    private long samplePeriodMs;
    private int maxAttempts = 4;
    private Logger log;
    private final List<DeviceMemoryManager> managers = new ArrayList<>();
    private final List<AllocationStrategy> strategies = new ArrayList<>();

    /** @param name the strategy to make active, as configuration {@code strategy} does; empty: by precedence */
    public MonitorBuilder configuredStrategy(String name) {
        configuredStrategy = name;
        return this;
    }

    /** @param ms milliseconds between samples sent to observers; 0 (the default here) turns sampling off */
    public MonitorBuilder samplePeriodMs(long ms) {
        samplePeriodMs = ms;
        return this;
    }

    /** @param attempts devices a routed allocation may try before it fails (4 by default) */
    public MonitorBuilder maxAttempts(int attempts) {
        maxAttempts = attempts;
        return this;
    }

    /** @param logger where the monitor logs; none by default */
    public MonitorBuilder logger(Logger logger) {
        log = logger;
        return this;
    }

    /** @param manager a manager to register for its own device */
    public MonitorBuilder manager(DeviceMemoryManager manager) {
        managers.add(manager);
        return this;
    }

    /** @param strategy a strategy to add under its own name */
    public MonitorBuilder strategy(AllocationStrategy strategy) {
        strategies.add(strategy);
        return this;
    }

    /**
     * @return a running monitor; close it to stop it (the managers stay open: they are the caller's)
     * @throws io.ferrum.memory.api.InvalidMemoryRequestException naming every bad value (a negative
     *                                                            period, fewer than 1 attempt)
     */
    public Standalone build() {
        MonitorConfig config = config(configuredStrategy, samplePeriodMs, maxAttempts);
        MonitorSettings.of(config); // a builder's caller gets the refusal, not a log line
        MemoryMonitor m = new MemoryMonitor(null, config, log);
        long serviceId = 1;
        for (AllocationStrategy s : strategies) {
            m.addStrategy(s, Map.of(AllocationStrategy.NAME_PROPERTY, s.name(), Constants.SERVICE_ID, serviceId++));
        }
        for (DeviceMemoryManager d : managers) {
            m.registerManager(d.device(), d);
        }
        return new Standalone(m);
    }

    /** @return a configuration with these values, as Config Admin and DS would hand it over */
    static MonitorConfig config(String strategy, long samplePeriodMs, int maxAttempts) {
        return new MonitorConfig() {
            @Override
            public Class<? extends Annotation> annotationType() {
                return MonitorConfig.class;
            }

            @Override
            public String strategy() {
                return strategy;
            }

            @Override
            public String samplePeriodMs() {
                return Long.toString(samplePeriodMs);
            }

            @Override
            public String maxAttempts() {
                return Integer.toString(maxAttempts);
            }
        };
    }

    /** A monitor built outside a framework; {@link #close()} deactivates it as DS would. */
    public static final class Standalone implements AutoCloseable {
        private final MemoryMonitor monitor;

        private Standalone(MemoryMonitor monitor) {
            this.monitor = monitor;
        }

        /** @return the monitor as the {@link MemoryRouter} service */
        public MemoryRouter router() {
            return monitor;
        }

        /** @return the monitor as the {@link GlobalMemoryMonitor} service */
        public GlobalMemoryMonitor monitor() {
            return monitor;
        }

        @Override
        public void close() {
            monitor.deactivate();
        }
    }
}
