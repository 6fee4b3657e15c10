package io.ferrum.memory.cuda;

import java.util.Map;

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

/**
 * Settings of one GPU: a factory configuration of {@code io.ferrum.memory.cuda.device} with
 * {@code index=N} (a FileInstall file {@code io.ferrum.memory.cuda.device-big.cfg}, say) restarts
 * {@code cuda:N} with them; deleting it restarts {@code cuda:N} with the defaults of {@code
 * io.ferrum.memory.cuda}. An index the driver does not report, or another bad value, is refused with
 * one error line naming every bad value (no stack trace), shown in {@code mem:backends} until a
 * configuration of it applies or it is deleted: at activation {@code cuda:N} keeps the settings of
 * {@code io.ferrum.memory.cuda}, on an update it keeps running as it was.
 */
@Component(configurationPid = ConfiguredCudaDevice.FACTORY_PID, configurationPolicy = ConfigurationPolicy.REQUIRE,
        immediate = true, service = {}, property = CudaBackend.REQUIRES_GPU)
@Designate(ocd = CudaDeviceConfig.class, factory = true)
public final class ConfiguredCudaDevice {
    /** Factory PID of a GPU's own settings. */
    static final String FACTORY_PID = "io.ferrum.memory.cuda.device";

    private final CudaDevices devices;
    private final Logger log;
    /** The configuration's PID: what its refusal in mem:backends is kept under. */
    private final String pid;
    /** The configuration applied, or null while none of this component's applied. */
    private CudaDeviceConfig config;

    @Activate
    public ConfiguredCudaDevice(CudaDeviceConfig config, Map<String, Object> properties, @Reference CudaDevices devices,
                                @Reference(service = LoggerFactory.class, cardinality = ReferenceCardinality.OPTIONAL) Logger log) {
        this.devices = devices;
        this.log = log;
        this.pid = String.valueOf(properties.getOrDefault("service.pid", FACTORY_PID));
        Integer index = CudaDeviceConfigs.index(config);
        try {
            devices.configure(index, config, properties);
            this.config = config;
        } catch (InvalidMemoryRequestException refused) {
            // No exception: DS would log it with a stack trace. One error line naming every bad value.
            reject(refused.getMessage() + "; " + (index == null ? "no GPU was configured"
                    : "cuda:" + index + " keeps the settings of " + CudaBackend.PID) + Rejections.file(properties));
        }
    }

    /** Logs a refusal as one error line and shows it in mem:backends until a configuration of this PID applies. */
    private void reject(String reason) {
        if (log != null) {
            log.error("{}", reason);
        }
        devices.rejections().reject(pid, reason);
    }

    @Modified
    void modified(CudaDeviceConfig changed, Map<String, Object> properties) {
        Integer index = CudaDeviceConfigs.index(changed);
        try {
            devices.configure(index, changed, properties);
        } catch (InvalidMemoryRequestException refused) {
            reject(refused.getMessage() + "; " + (config == null ? "no GPU was configured"
                    : "cuda:" + CudaDeviceConfigs.index(config) + " keeps running as it was") + Rejections.file(properties));
            return;
        }
        devices.rejections().clear(pid);
        if (config != null && !index.equals(CudaDeviceConfigs.index(config))) {
            devices.unconfigure(CudaDeviceConfigs.index(config), config);
        }
        config = changed;
    }

    @Deactivate
    void deactivate() {
        devices.rejections().clear(pid);
        if (config != null) {
            devices.unconfigure(CudaDeviceConfigs.index(config), config);
        }
    }
}
