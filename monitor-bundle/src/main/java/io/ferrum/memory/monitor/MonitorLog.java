package io.ferrum.memory.monitor;

import org.osgi.service.log.Logger;

/**
 * The monitor's logger, optional as the Log Service is: without one, messages are dropped rather
 * than written to {@code System.out}. One instance is shared by every room of the monitor.
 *
 * @param logger the OSGi logger, or null when no Log Service is present
 */
record MonitorLog(Logger logger) {

    void info(String message) {
        if (logger != null) {
            logger.info(message);
        }
    }

    /** @param cause the failure to log with the message, or null */
    void warn(String message, Throwable cause) {
        if (logger != null) {
            if (cause != null) {
                logger.warn(message, cause);
            } else {
                logger.warn(message);
            }
        }
    }

    /** One line, never a stack trace: for refusals whose message says everything. */
    void error(String message) {
        if (logger != null) {
            logger.error(message);
        }
    }
}
