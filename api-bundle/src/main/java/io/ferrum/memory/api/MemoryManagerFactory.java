package io.ferrum.memory.api;

import java.util.Set;

import org.osgi.annotation.versioning.ProviderType;

/**
 * Creates managers for devices of the kinds a backend serves. Registered by each backend as an OSGi
 * service with the {@link DeviceMemoryManager#DEVICE_KIND_PROPERTY} it serves. Managers and stream
 * managers created here belong to the caller, who must close them ({@link DeviceMemoryManager#close()},
 * {@link StreamManager#close()}); what is still open when the backend stops is closed then.
 */
@ProviderType
public interface MemoryManagerFactory {

    /**
     * @param device a device of one of {@link #deviceKinds()}
     * @param config the manager's configuration
     * @return a new manager
     * @throws DeviceUnavailableException    if the device does not exist
     * @throws InvalidMemoryRequestException if the kind is not served here
     */
    DeviceMemoryManager createMemoryManager(Device device, MemoryManagerConfig config);

    /**
     * @param device a device of one of {@link #deviceKinds()}
     * @param config the manager's configuration
     * @return a new advanced manager
     * @throws DeviceUnavailableException    if the device does not exist
     * @throws InvalidMemoryRequestException if the kind is not served here
     */
    AdvancedMemoryManager createAdvancedMemoryManager(Device device, MemoryManagerConfig config);

    /**
     * @param device a device of one of {@link #deviceKinds()}
     * @return a new stream manager, which the caller closes
     */
    StreamManager createStreamManager(Device device);

    /** @return the device kinds this factory serves, for example {@code cpu} */
    Set<String> deviceKinds();
}
