package io.ferrum.memory.api;

import java.io.Serial;

/**
 * Root of every exception thrown by Ferrum Memory. Unchecked: memory errors are programming or
 * capacity errors that a caller handles where it can, not at every call site.
 *
 * <p>Messages name the device, the handle and the numbers involved, and say what to do.
 */
public class MemoryException extends RuntimeException {
    @Serial
    private static final long serialVersionUID = 1L;

    /**
     * @param message what went wrong, naming device, handle and numbers
     */
    public MemoryException(String message) {
        super(message);
    }

    /**
     * @param message what went wrong, naming device, handle and numbers
     * @param cause   the underlying failure
     */
    public MemoryException(String message, Throwable cause) {
        super(message, cause);
    }
}
