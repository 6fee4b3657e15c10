package io.ferrum.memory.api;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

import org.osgi.service.component.annotations.ComponentPropertyType;

/**
 * The service properties of a device's services ({@link DeviceMemoryManager}, {@link
 * AdvancedMemoryManager}, {@link StreamManager}, {@link MemoryManagerFactory}), for a backend whose
 * device services are Declarative Services components. Each element maps to one constant of
 * {@link DeviceMemoryManager}: {@code device()} to {@value DeviceMemoryManager#DEVICE_PROPERTY},
 * {@code device_kind()} to {@value DeviceMemoryManager#DEVICE_KIND_PROPERTY} and {@code backend()}
 * to {@value DeviceMemoryManager#BACKEND_PROPERTY}.
 */
@ComponentPropertyType
@Retention(RetentionPolicy.CLASS)
@Target(ElementType.TYPE)
public @interface DeviceServiceProperties {

    /** Prefix of every property name: the elements below name the rest. */
    String PREFIX_ = "memory.";

    /** @return the device, as {@link Device#toString()} ({@code cpu:0}) */
    String device();

    /** @return the device kind, as {@link Device#kind()} ({@code cpu}) */
    String device_kind();

    /** @return the backend's name ({@code ffm}, {@code jcuda}) */
    String backend();
}
