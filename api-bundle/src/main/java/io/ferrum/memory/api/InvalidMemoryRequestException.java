package io.ferrum.memory.api;

import java.io.Serial;

/**
 * A request that can never succeed as asked: a size that is zero or negative, an alignment that is
 * not a power of two, an offset or length outside a block, a device this manager does not serve, a
 * configuration whose values contradict each other. Nothing was changed by the failed call.
 */
public class InvalidMemoryRequestException extends MemoryException {
    @Serial
    private static final long serialVersionUID = 1L;

    /**
     * @param message which value was wrong, the value itself, and what is accepted
     */
    public InvalidMemoryRequestException(String message) {
        super(message);
    }
}
