package io.ferrum.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import org.apache.felix.framework.FrameworkFactory;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;
import org.osgi.framework.ServiceReference;
import org.osgi.framework.launch.Framework;

/**
 * A refused GPU configuration reaches {@code mem:backends} as a CPU device's does: while it stands,
 * a service of the bundle whose property {@code ferrum.configuration.rejected} holds the log's line
 * (the shell reads that property of the services a backend bundle registered). The checks need no
 * driver: the components run here with no GPU reported, so none starts, in a real framework.
 */
class ConfigurationRefusalsTest {
    private Framework framework;
    private Path storage;

    @BeforeEach
    void start() throws Exception {
        storage = Files.createTempDirectory("cuda-refusals-framework");
        framework = new FrameworkFactory().newFramework(Map.of(Constants.FRAMEWORK_STORAGE, storage.toString(),
                Constants.FRAMEWORK_STORAGE_CLEAN, Constants.FRAMEWORK_STORAGE_CLEAN_ONFIRSTINIT));
        framework.start();
    }

    @AfterEach
    void stop() throws Exception {
        framework.stop();
        framework.waitForStop(10_000);
        try (Stream<Path> files = Files.walk(storage)) {
            for (Path p : files.sorted(Comparator.reverseOrder()).toList()) {
                Files.delete(p);
            }
        }
    }

    /** @return the refusals as mem:backends reads them: the property of the services the bundle registered */
    private List<String> shown() {
        List<String> out = new ArrayList<>();
        ServiceReference<?>[] refs = framework.getRegisteredServices();
        for (ServiceReference<?> r : refs == null ? new ServiceReference<?>[0] : refs) {
            if (r.getProperty("ferrum.configuration.rejected") instanceof String reason) {
                out.add(reason);
            }
        }
        return out;
    }

    @Test
    void aRefusedConfigurationOfEveryGpuShowsUntilOneApplies() {
        BundleContext context = framework.getBundleContext();
        Map<String, Object> bad = Map.of("capacity", "12XB", "felix.fileinstall.filename",
                "file:/opt/ferrum/config/io.ferrum.memory.cuda.cfg");
        CudaDevices devices = new CudaDevices(context, CudaDeviceConfigs.of(bad), bad, null, 0);
        String refusal = CudaDeviceConfigs.defaultsRefusal(CudaDeviceConfigs.of(bad), bad);
        assertEquals(List.of(refusal + "; the GPUs start with their defaults (file /opt/ferrum/config/io.ferrum.memory.cuda.cfg)"),
                shown(), "refused at activation");

        Map<String, Object> worse = Map.of("zeroing", "often");
        devices.modified(CudaDeviceConfigs.of(worse), worse);
        assertEquals(List.of(CudaDeviceConfigs.defaultsRefusal(CudaDeviceConfigs.of(worse), worse)
                + "; the GPUs keep running as they were"), shown(), "a later refusal replaces the line");

        devices.modified(CudaDeviceConfigs.DEFAULTS, Map.of());
        assertEquals(List.of(), shown(), "a configuration that applies takes the line away");
        devices.deactivate();
    }

    @Test
    void aRefusedConfigurationOfOneGpuShowsUntilItIsDeleted() {
        BundleContext context = framework.getBundleContext();
        CudaDevices devices = new CudaDevices(context, CudaDeviceConfigs.DEFAULTS, Map.of(), null, 0);
        Map<String, Object> bad = Map.of("index", "one", "service.pid", "io.ferrum.memory.cuda.device.big",
                "felix.fileinstall.filename", "file:/opt/ferrum/config/io.ferrum.memory.cuda.device-big.cfg");
        CudaDeviceConfig cfg = CudaDeviceConfigs.of(bad);
        ConfiguredCudaDevice own = new ConfiguredCudaDevice(cfg, bad, devices, null);
        String refusal = CudaDeviceConfigs.refusal(cfg, bad, null, 0);
        assertEquals(List.of(refusal + "; no GPU was configured (file /opt/ferrum/config/io.ferrum.memory.cuda.device-big.cfg)"),
                shown());

        own.deactivate(); // the file deleted
        assertEquals(List.of(), shown(), "a deleted configuration's refusal no longer stands");
        devices.deactivate();
    }
}
