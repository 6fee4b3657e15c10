package io.ferrum.memory.shell;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryRouter;

/**
 * The services a command works on, each optional for the bundle: an absent one becomes an error
 * that says what to start or where to look. Commands hold their own (dynamic, optional)
 * references and pass what they hold here, so this class owns every "not running" and "no such
 * device" message of the shell.
 */
final class Services {
    /** What to do when no device is there: the end of every "no devices" line. */
    static final String START_A_BACKEND = "Start a backend bundle (mem:backends lists them).";

    private Services() {
    }

    /**
     * @param monitor the monitor a command holds, or null
     * @return the monitor
     * @throws DeviceUnavailableException if none is running
     */
    static GlobalMemoryMonitor monitor(GlobalMemoryMonitor monitor) {
        if (monitor == null) {
            throw new DeviceUnavailableException(null, "No memory monitor is running: start the bundle io.ferrum.memory.monitor");
        }
        return monitor;
    }

    /**
     * @param router the router a command holds, or null
     * @return the router
     * @throws DeviceUnavailableException if none is running
     */
    static MemoryRouter router(MemoryRouter router) {
        if (router == null) {
            throw new DeviceUnavailableException(null, "No memory router is running: start the bundle io.ferrum.memory.monitor");
        }
        return router;
    }

    /**
     * @param monitor the monitor a command holds, or null
     * @param device  a device
     * @return the manager serving the device
     * @throws DeviceUnavailableException if no monitor runs or no manager serves the device
     */
    static DeviceMemoryManager manager(GlobalMemoryMonitor monitor, Device device) {
        return monitor(monitor).manager(device).orElseThrow(() -> new DeviceUnavailableException(device, "No device "
                + device + " is registered; mem:devices lists the devices there are"));
    }

    /**
     * @param monitor the monitor a command holds, or null
     * @param router  the router a command holds, or null
     * @param handle  a handle of any device
     * @return the manager of the handle's device, which can map it
     * @throws RuntimeException the router's error if no device knows the handle (freed, or its
     *                          device went away), or {@link InvalidMemoryRequestException} if its
     *                          manager cannot map
     */
    static AdvancedMemoryManager mappingManager(GlobalMemoryMonitor monitor, MemoryRouter router, MemoryHandle handle) {
        Device d = BlockAccess.info(router(router), handle).device();
        if (!(manager(monitor, d) instanceof AdvancedMemoryManager a)) {
            throw new InvalidMemoryRequestException("The manager of " + d + " cannot map memory");
        }
        return a;
    }
}
