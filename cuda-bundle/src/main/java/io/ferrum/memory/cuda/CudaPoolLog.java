package io.ferrum.memory.cuda;

import org.osgi.service.log.Logger;

import io.ferrum.memory.pool.PoolLog;

/** The engine's log, written to the OSGi Log Service when there is one. */
record CudaPoolLog(Logger logger) implements PoolLog {
    @Override
    public void warn(String message, Throwable cause) {
        if (logger != null) {
            if (cause != null) {
                logger.warn(message, cause);
            } else {
                logger.warn(message);
            }
        }
    }

    @Override
    public void info(String message) {
        if (logger != null) {
            logger.info(message);
        }
    }
}
