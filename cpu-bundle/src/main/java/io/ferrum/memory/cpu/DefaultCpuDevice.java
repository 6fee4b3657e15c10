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

/** {@code cpu:0}: always present while the bundle runs; configured by the PID {@code io.ferrum.memory.cpu}. */
@Component(configurationPid = CpuBackend.DEFAULT_PID, configurationPolicy = ConfigurationPolicy.OPTIONAL,
        immediate = true, service = {})
@Designate(ocd = CpuDeviceConfig.class)
public final class DefaultCpuDevice extends CpuDevice {

    @Activate
    public DefaultCpuDevice(BundleContext context, CpuDeviceConfig config,
                            @Reference(service = LoggerFactory.class, cardinality = ReferenceCardinality.OPTIONAL) Logger log) {
        // The index attribute is ignored here: this component always serves cpu:0.
        start(context, config, 0, log);
    }

    @Deactivate
    void deactivate() {
        stop();
    }
}
