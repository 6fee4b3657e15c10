package io.ferrum.memory.api;

import java.io.Serial;

/**
 * The device is not (or no longer) served: its backend bundle was stopped or uninstalled, its
 * manager was closed, its driver is missing, or no manager for that device is registered.
 */
public class DeviceUnavailableException extends MemoryException {
    @Serial
    private static final long serialVersionUID = 1L;

    private final Device device;

    /**
     * @param device  the device that is unavailable (may be {@code null} when unknown)
     * @param message why, and what to do (start the backend, install the driver, ...)
     */
    public DeviceUnavailableException(Device device, String message) {
        super(message);
        this.device = device;
    }

    /**
     * @param device  the device that is unavailable (may be {@code null} when unknown)
     * @param message why, and what to do
     * @param cause   the underlying failure (a driver error, say)
     */
    public DeviceUnavailableException(Device device, String message, Throwable cause) {
        super(message, cause);
        this.device = device;
    }

    /** @return the unavailable device, or {@code null} when unknown */
    public Device device() {
        return device;
    }
}
