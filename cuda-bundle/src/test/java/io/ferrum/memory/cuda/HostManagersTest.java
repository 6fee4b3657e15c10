package io.ferrum.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.lang.reflect.Proxy;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.pool.PooledMemoryManager;

/**
 * The GPUs' peer lookup: GPUs of this bundle and the host's pooled managers that {@link
 * HostManagers} was given, each under its own device; a manager that cannot name another's block
 * is not kept, and an unbind takes away only the manager it names.
 */
class HostManagersTest {

    @AfterEach
    void forget() {
        CudaBackend.HOSTS.clear();
        CudaBackend.DEVICES.clear();
    }

    /** A manager of {@code device} that answers only {@code device()}. */
    private static <T extends AdvancedMemoryManager> T manager(Class<T> type, Device device) {
        return type.cast(Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, (p, m, a) -> switch (m.getName()) {
            case "device" -> device;
            case "hashCode" -> System.identityHashCode(p);
            case "equals" -> p == a[0];
            default -> throw new AssertionError(m.getName() + " called");
        }));
    }

    @Test
    void theHostsPooledManagersAreTheGpusPeersUnderTheirDevices() {
        HostManagers hosts = new HostManagers();
        PooledMemoryManager cpu0 = manager(PooledMemoryManager.class, Device.cpu(0));
        PooledMemoryManager gpu1 = manager(PooledMemoryManager.class, Device.cuda(1));
        CudaBackend.DEVICES.put(Device.cuda(1), gpu1);
        hosts.bind(cpu0);
        assertSame(cpu0, CudaBackend.peer(Device.cpu(0)));
        assertSame(gpu1, CudaBackend.peer(Device.cuda(1)));
        assertNull(CudaBackend.peer(Device.cpu(1)));
        assertNull(CudaBackend.peer(Device.cuda(0)));

        // A manager of the host that is not the pool engine cannot name a GPU's block: not kept.
        hosts.bind(manager(AdvancedMemoryManager.class, Device.cpu(1)));
        assertNull(CudaBackend.peer(Device.cpu(1)));

        // A newer manager of cpu:0 keeps its place when the older one goes.
        PooledMemoryManager newer = manager(PooledMemoryManager.class, Device.cpu(0));
        hosts.bind(newer);
        hosts.unbind(cpu0);
        assertSame(newer, CudaBackend.peer(Device.cpu(0)));
        hosts.unbind(newer);
        assertNull(CudaBackend.peer(Device.cpu(0)));
    }
}
