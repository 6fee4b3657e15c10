package io.ferrum.memory.cuda;

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

/**
 * Settings of one GPU: a factory configuration of {@code io.ferrum.memory.cuda.device} with
 * {@code index=N} (a FileInstall file {@code io.ferrum.memory.cuda.device-big.cfg}, say) restarts
 * {@code cuda:N} with them; deleting it restarts {@code cuda:N} with the defaults of {@code
 * io.ferrum.memory.cuda}. An index the driver does not report, or another bad value, is refused with
 * a message naming it: at activation the component fails (DS logs the message), on an update it
 * logs the error and {@code cuda:N} keeps running as it was.
 */
@Component(configurationPid = ConfiguredCudaDevice.FACTORY_PID, configurationPolicy = ConfigurationPolicy.REQUIRE,
        immediate = true, service = {}, property = CudaBackend.REQUIRES_GPU)
@Designate(ocd = CudaDeviceConfig.class, factory = true)
public final class ConfiguredCudaDevice {
    /** Factory PID of a GPU's own settings. */
    static final String FACTORY_PID = "io.ferrum.memory.cuda.device";

    private final CudaDevices devices;
    private final Logger log;
    private CudaDeviceConfig config;

    @Activate
    public ConfiguredCudaDevice(CudaDeviceConfig config, @Reference CudaDevices devices,
                                @Reference(service = LoggerFactory.class, cardinality = ReferenceCardinality.OPTIONAL) Logger log) {
        this.devices = devices;
        this.log = log;
        devices.configure(config.index(), config);
        this.config = config;
    }

    @Modified
    void modified(CudaDeviceConfig changed) {
        try {
            devices.configure(changed.index(), changed);
        } catch (RuntimeException refused) {
            if (log != null) {
                log.error("{}; cuda:{} keeps running as it was", refused.getMessage(), config.index());
            }
            return;
        }
        if (changed.index() != config.index()) {
            devices.unconfigure(config.index(), config);
        }
        config = changed;
    }

    @Deactivate
    void deactivate() {
        devices.unconfigure(config.index(), config);
    }
}
