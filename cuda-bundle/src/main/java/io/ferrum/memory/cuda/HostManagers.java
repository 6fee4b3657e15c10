package io.ferrum.memory.cuda;

import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * The host's running managers (devices of kind {@code cpu}), as the GPUs' peers for {@code
 * createMapping(cpu:n, cuda:i)}: the memory is the GPU's managed memory, and the host's manager names
 * it by an alias (issue 16). Only a pooled manager (the pool engine of the pool bundle this bundle
 * is wired to) can name another manager's block; any other is not kept, and a mapping with its
 * device is refused saying no such device is known. Active only with a GPU, as every GPU component.
 */
@Component(service = {}, property = CudaBackend.REQUIRES_GPU)
public final class HostManagers {

    @Reference(name = "hosts", service = AdvancedMemoryManager.class, cardinality = ReferenceCardinality.MULTIPLE,
            policy = ReferencePolicy.DYNAMIC,
            target = "(" + DeviceMemoryManager.DEVICE_KIND_PROPERTY + "=" + Device.CPU + ")")
    void bind(AdvancedMemoryManager manager) {
        if (manager instanceof PooledMemoryManager pooled) {
            CudaBackend.HOSTS.put(pooled.device(), pooled);
        }
    }

    void unbind(AdvancedMemoryManager manager) {
        if (manager instanceof PooledMemoryManager pooled) {
            // Only this one: another manager of the device registered since keeps its place.
            CudaBackend.HOSTS.remove(pooled.device(), pooled);
        }
    }
}
