package io.ferrum.memory.cpu;

import java.util.Map;

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

import io.ferrum.memory.pool.ConfigurationCheck;

/**
 * {@code cpu:0}: always present while the bundle runs; configured by the PID {@code
 * io.ferrum.memory.cpu}. That PID configures {@code cpu:0} only: a configuration with any other
 * {@code index} is refused with an error that names the value and the factory PID to use instead.
 * A refused configuration changes nothing: at activation {@code cpu:0} starts with its defaults (as
 * without a configuration), and on an update it keeps running as it was.
 */
@Component(configurationPid = CpuBackend.DEFAULT_PID, configurationPolicy = ConfigurationPolicy.OPTIONAL,
        immediate = true, service = {})
@Designate(ocd = CpuDeviceConfig.class)
public final class DefaultCpuDevice extends CpuDevice {

    @Activate
    public DefaultCpuDevice(BundleContext context, CpuDeviceConfig config, Map<String, Object> properties,
                            @Reference(service = LoggerFactory.class, cardinality = ReferenceCardinality.OPTIONAL) Logger log) {
        pid(properties);
        String refusal = refusal(config, properties, 0, indexRefusal(config));
        start(context, refusal == null ? config : CpuDeviceConfigs.DEFAULTS, 0, log);
        if (refusal != null) {
            reject(refusal, "cpu:0 starts with its defaults");
        }
    }

    /** Tests: a configuration whose raw properties hold no list. */
    DefaultCpuDevice(BundleContext context, CpuDeviceConfig config, Logger log) {
        this(context, config, Map.of(), log);
    }

    /** @return why this component refuses the configuration's index, or null for index 0 */
    static String indexRefusal(CpuDeviceConfig config) {
        Integer index = index(config);
        if (index != null && index == 0) {
            return null;
        }
        if (index == null) {
            return "Configuration " + CpuBackend.DEFAULT_PID + " refused: index=" + ConfigurationCheck.quoted(config.index())
                    + ", but this PID configures cpu:0 only (leave index out or set it to 0)";
        }
        return "Configuration " + CpuBackend.DEFAULT_PID + " refused: index=" + index
                + ", but this PID configures cpu:0 only (leave index out or set it to 0); for cpu:" + index
                + " create a factory configuration of " + CpuBackend.DEVICE_FACTORY_PID + " with index=" + index;
    }

    /** Also called when the configuration is deleted: then DS gives no {@code service.pid}, and the defaults. */
    @Modified
    void modified(CpuDeviceConfig config, Map<String, Object> properties) {
        pid(properties);
        reconfigure(config, properties, 0, indexRefusal(config), !properties.containsKey("service.pid"));
    }

    /** Tests: {@link #modified} with raw properties that hold no list (not named modified: DS would see two). */
    void modify(CpuDeviceConfig config) {
        modified(config, Map.of("service.pid", CpuBackend.DEFAULT_PID));
    }

    @Deactivate
    void deactivate() {
        dispose();
    }
}
