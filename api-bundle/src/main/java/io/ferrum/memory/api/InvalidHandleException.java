package io.ferrum.memory.api;

import java.io.Serial;

/**
 * A handle that does not name a live allocation of the manager it was given to: the zero handle,
 * a handle already freed (a double free included), a stale handle from before a restart, or a
 * handle that belongs to another manager. Nothing was changed by the failed call.
 */
public class InvalidHandleException extends MemoryException {
    @Serial
    private static final long serialVersionUID = 1L;

    private final MemoryHandle handle;

    /**
     * @param handle  the offending handle (may be {@code null} when a null handle was passed)
     * @param message why the handle was refused
     */
    public InvalidHandleException(MemoryHandle handle, String message) {
        super(message);
        this.handle = handle;
    }

    /** @return the handle that was refused, or {@code null} if {@code null} was passed */
    public MemoryHandle handle() {
        return handle;
    }
}
