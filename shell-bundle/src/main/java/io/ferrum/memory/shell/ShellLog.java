package io.ferrum.memory.shell;

import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.FrameworkUtil;
import org.osgi.framework.ServiceReference;
import org.osgi.service.log.LoggerFactory;

/**
 * The shell's entries in the OSGi Log Service, which is optional as the Log Service is: without one
 * (its package not wired, no service, the bundle stopped or not in a framework, as in a unit test)
 * an entry is dropped rather than printed, since a command's output is its reply alone. Looked up at
 * each entry: entries are rare (an internal error), and the shell keeps no service between commands.
 */
final class ShellLog {
    private ShellLog() {
    }

    /**
     * Logs an error with its stack trace. Never throws: the caller is already reporting a failure.
     *
     * @param message what happened, in one line
     * @param cause   the failure, whose stack trace goes with the entry
     */
    static void error(String message, Throwable cause) {
        try {
            Bundle shell = FrameworkUtil.getBundle(ShellLog.class);
            BundleContext context = shell == null ? null : shell.getBundleContext();
            if (context == null) {
                return;
            }
            ServiceReference<LoggerFactory> ref = context.getServiceReference(LoggerFactory.class);
            LoggerFactory factory = ref == null ? null : context.getService(ref);
            if (factory == null) {
                return;
            }
            try {
                factory.getLogger(ShellLog.class).error(message, cause);
            } finally {
                context.ungetService(ref);
            }
        } catch (RuntimeException | LinkageError unavailable) {
            // No Log Service wired (NoClassDefFoundError), or the bundle stopping under the lookup
            // (IllegalStateException): the entry is dropped, and the reply still says what happened.
        }
    }
}
