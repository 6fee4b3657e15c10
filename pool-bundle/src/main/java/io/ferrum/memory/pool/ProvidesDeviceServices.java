package io.ferrum.memory.pool;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

import org.osgi.annotation.bundle.Capability;

import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.StreamManager;

/**
 * Declares, for the resolver, the services that {@link DeviceRegistration} registers by hand: a
 * device's manager ({@link DeviceMemoryManager}, {@link io.ferrum.memory.api.AdvancedMemoryManager})
 * and its {@link StreamManager}. DS declares the services of components itself; these are
 * registered once per device, not per component, so a backend puts this annotation on the class
 * that registers them and bnd writes the {@code osgi.service} capabilities into its manifest. A
 * backend that also registers a {@link io.ferrum.memory.api.MemoryManagerFactory} per device
 * declares that one itself (or lets DS register its factory, as the CPU backend does).
 */
@Documented
@Retention(RetentionPolicy.CLASS)
@Target(ElementType.TYPE)
@Capability(namespace = "osgi.service", uses = DeviceMemoryManager.class,
        attribute = "objectClass:List<String>=\"io.ferrum.memory.api.DeviceMemoryManager,io.ferrum.memory.api.AdvancedMemoryManager\"")
@Capability(namespace = "osgi.service", uses = StreamManager.class,
        attribute = "objectClass:List<String>=\"io.ferrum.memory.api.StreamManager\"")
public @interface ProvidesDeviceServices {
}
