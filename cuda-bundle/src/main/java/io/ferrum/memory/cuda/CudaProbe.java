package io.ferrum.memory.cuda;

import java.util.Dictionary;
import java.util.Hashtable;

import org.osgi.framework.BundleContext;
import org.osgi.framework.ServiceRegistration;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.condition.Condition;
import org.osgi.service.log.Logger;
import org.osgi.service.log.LoggerFactory;

/**
 * Asks the driver once, when the bundle starts, whether there is a CUDA device, and says so with an
 * OSGi R8 condition: {@value CudaBackend#AVAILABLE} when there is one (the device and factory
 * components require it, so without it they never activate and touch no driver), {@value
 * CudaBackend#UNAVAILABLE} otherwise. Either carries the one-line reason as {@value
 * CudaBackend#STATUS_PROPERTY}, which {@code mem:backends} shows. Without a GPU the bundle is
 * ACTIVE, registers no manager, and logs exactly one line, with no stack trace.
 */
@Component(immediate = true, service = {})
public final class CudaProbe {
    private final ServiceRegistration<Condition> registration;

    @Activate
    public CudaProbe(BundleContext context,
                     @Reference(service = LoggerFactory.class, cardinality = ReferenceCardinality.OPTIONAL) Logger log) {
        this(context, log, DriverCalls.JCUDA);
    }

    CudaProbe(BundleContext context, Logger log, DriverCalls driver) {
        Availability found = Availability.probe(driver);
        if (log != null) {
            log.info("cuda backend {}", found.reason());
        }
        registration = context.registerService(Condition.class, Condition.INSTANCE, properties(found));
    }

    /** @return the condition's properties for what the probe found */
    static Dictionary<String, Object> properties(Availability found) {
        Hashtable<String, Object> props = new Hashtable<>();
        props.put(Condition.CONDITION_ID, found.available() ? CudaBackend.AVAILABLE : CudaBackend.UNAVAILABLE);
        props.put(CudaBackend.STATUS_PROPERTY, found.reason());
        props.put(CudaBackend.DEVICE_COUNT_PROPERTY, found.devices());
        return props;
    }

    @Deactivate
    void deactivate() {
        try {
            registration.unregister();
        } catch (IllegalStateException alreadyGone) {
            // The framework withdraws a stopping bundle's services itself.
        }
    }
}
