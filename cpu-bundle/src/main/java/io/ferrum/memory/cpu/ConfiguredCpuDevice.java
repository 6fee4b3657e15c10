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
 * {@code cpu:1}, {@code cpu:2}, ...: one per factory configuration of {@code io.ferrum.memory.cpu.device}
 * (for example a FileInstall file {@code io.ferrum.memory.cpu.device-tenant1.cfg} with
 * {@code index=1} and {@code capacity=256m}). A configuration with an index below 1 or another
 * bad value creates no device: one error line naming the value, shown in {@code mem:backends} too;
 * an update to such a configuration is refused the same way and the device keeps running as it was.
 */
@Component(configurationPid = CpuBackend.DEVICE_FACTORY_PID, configurationPolicy = ConfigurationPolicy.REQUIRE,
        immediate = true, service = {})
@Designate(ocd = CpuDeviceConfig.class, factory = true)
public final class ConfiguredCpuDevice extends CpuDevice {

    @Activate
    public ConfiguredCpuDevice(BundleContext context, CpuDeviceConfig config, Map<String, Object> properties,
                               @Reference(service = LoggerFactory.class, cardinality = ReferenceCardinality.OPTIONAL) Logger log) {
        pid(properties);
        String refusal = refusal(config, properties, index(config) == null ? -1 : index(config), indexRefusal(config));
        if (refusal == null) {
            refusal = claimRefusal(index(config));
        }
        if (refusal != null) {
            // No exception: DS would log it with a stack trace. One error line, and mem:backends shows it.
            context(context, log);
            reject(refusal, "no device was created");
            return;
        }
        start(context, config, index(config), log);
    }

    /** Tests: a configuration whose raw properties hold no list. */
    ConfiguredCpuDevice(BundleContext context, CpuDeviceConfig config, Logger log) {
        this(context, config, Map.of(), log);
    }

    /** @return why a factory configuration may not have its index, or null for an index of 1 or more */
    static String indexRefusal(CpuDeviceConfig config) {
        Integer index = index(config);
        if (index != null && index >= 1) {
            return null;
        }
        return "A " + CpuBackend.DEVICE_FACTORY_PID + " configuration needs a whole number index >= 1 (got "
                + (index != null ? index : ConfigurationCheck.quoted(config.index())) + "); cpu:0 is configured by the PID " + CpuBackend.DEFAULT_PID;
    }

    @Modified
    void modified(CpuDeviceConfig config, Map<String, Object> properties) {
        pid(properties);
        Integer index = index(config);
        reconfigure(config, properties, index == null ? -1 : index, indexRefusal(config));
    }

    /** Tests: {@link #modified} with raw properties that hold no list (not named modified: DS would see two). */
    void modify(CpuDeviceConfig config) {
        modified(config, Map.of());
    }

    @Deactivate
    void deactivate() {
        dispose();
    }
}
