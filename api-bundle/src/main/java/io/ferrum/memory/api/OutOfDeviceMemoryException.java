package io.ferrum.memory.api;

import java.io.Serial;

/**
 * An allocation that could not be satisfied: the device (or the pool's {@code maxSize}, or a pool
 * that may not grow) has less room than was requested. The pool is unchanged by the failed call.
 */
public class OutOfDeviceMemoryException extends MemoryException {
    @Serial
    private static final long serialVersionUID = 1L;

    private final long requestedBytes;
    private final long freeBytes;
    private final Device device;

    /**
     * @param device         the device asked (may be {@code null} when the request spanned devices)
     * @param requestedBytes bytes asked for
     * @param freeBytes      bytes that were free on the device or pool at the time
     * @param message        the full message, naming all of the above and the limit that was hit
     */
    public OutOfDeviceMemoryException(Device device, long requestedBytes, long freeBytes, String message) {
        super(message);
        this.device = device;
        this.requestedBytes = requestedBytes;
        this.freeBytes = freeBytes;
    }

    /** @return bytes that were requested */
    public long requestedBytes() {
        return requestedBytes;
    }

    /** @return bytes that were free when the request failed */
    public long freeBytes() {
        return freeBytes;
    }

    /** @return the device, or {@code null} when the request spanned devices */
    public Device device() {
        return device;
    }
}
