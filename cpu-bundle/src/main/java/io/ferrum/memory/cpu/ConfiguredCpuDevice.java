package io.ferrum.memory.cpu;

import org.osgi.framework.BundleContext;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.ConfigurationPolicy;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.log.Logger;
import org.osgi.service.log.LoggerFactory;
import org.osgi.service.metatype.annotations.Designate;

import io.ferrum.memory.api.InvalidMemoryRequestException;

/**
 * {@code cpu:1}, {@code cpu:2}, ...: one per factory configuration of {@code io.ferrum.memory.cpu.device}
 * (for example a FileInstall file {@code io.ferrum.memory.cpu.device-tenant1.cfg} with
 * {@code index=1} and {@code capacity=268435456}).
 */
@Component(configurationPid = CpuBackend.DEVICE_FACTORY_PID, configurationPolicy = ConfigurationPolicy.REQUIRE,
        immediate = true, service = {})
@Designate(ocd = CpuDeviceConfig.class, factory = true)
public final class ConfiguredCpuDevice extends CpuDevice {

    @Activate
    public ConfiguredCpuDevice(BundleContext context, CpuDeviceConfig config,
                               @Reference(service = LoggerFactory.class, cardinality = ReferenceCardinality.OPTIONAL) Logger log) {
        if (config.index() < 1) {
            throw new InvalidMemoryRequestException("A " + CpuBackend.DEVICE_FACTORY_PID + " configuration needs index >= 1"
                    + " (got " + config.index() + "); cpu:0 is configured by the PID " + CpuBackend.DEFAULT_PID);
        }
        start(context, config, config.index(), log);
    }

    @Deactivate
    void deactivate() {
        stop();
    }
}
