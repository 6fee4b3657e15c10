package io.ferrum.memory.pool;

import org.osgi.annotation.versioning.ConsumerType;

/**
 * Where the engine reports what a caller cannot be told through an exception: leaks found at close,
 * a throwing pressure callback. Backends adapt it to the OSGi Log Service; the engine itself has no
 * logging dependency.
 */
@ConsumerType
public interface PoolLog {

    /** A log that drops everything. */
    PoolLog NONE = new PoolLog() {
        @Override
        public void warn(String message, Throwable cause) {
        }

        @Override
        public void info(String message) {
        }
    };

    /**
     * @param message what happened, with numbers
     * @param cause   the failure, or {@code null}
     */
    void warn(String message, Throwable cause);

    /** @param message what happened */
    void info(String message);
}
