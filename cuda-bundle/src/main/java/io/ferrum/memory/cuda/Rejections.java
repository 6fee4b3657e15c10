package io.ferrum.memory.cuda;

import java.util.HashMap;
import java.util.Hashtable;
import java.util.Map;

import org.osgi.framework.BundleContext;
import org.osgi.framework.ServiceRegistration;

/**
 * The refused configurations of the GPUs that stand, each registered as a service so that the
 * shell's {@code mem:backends} (which imports no class of this bundle) shows it, as it shows the CPU
 * backend's: it reads the property {@value #REASON_PROPERTY} of the services a backend bundle
 * registered. One line per subject, the configuration's PID or one GPU ({@code cuda:1}): a later
 * refusal replaces the line, and a configuration that applies, or goes, takes it away.
 */
final class Rejections {
    /** Service property: the refusal and what it left running, one line. */
    static final String REASON_PROPERTY = "ferrum.configuration.rejected";

    private final BundleContext context;
    private final Map<String, ServiceRegistration<?>> standing = new HashMap<>();

    /** @param context the bundle's context, or null where nothing is registered (tests of other parts) */
    Rejections(BundleContext context) {
        this.context = context;
    }

    /**
     * @param subject what was refused: a PID, or {@code cuda:N}
     * @param reason  the line the log got: the refusal and what it left running
     */
    synchronized void reject(String subject, String reason) {
        clear(subject);
        if (context != null) {
            Hashtable<String, Object> props = new Hashtable<>();
            props.put(REASON_PROPERTY, reason);
            standing.put(subject, context.registerService(Rejections.class.getName(), this, props));
        }
    }

    /** @param subject a PID, or {@code cuda:N}, whose refusal no longer stands (if one did) */
    synchronized void clear(String subject) {
        ServiceRegistration<?> r = standing.remove(subject);
        if (r != null) {
            try {
                r.unregister();
            } catch (IllegalStateException alreadyGone) {
                // the bundle stopped meanwhile
            }
        }
    }

    /**
     * @param properties a configuration's raw properties
     * @return {@code " (file PATH)"} naming the file FileInstall made it from, or {@code ""}: a
     *         refusal such as "needs a whole number index" says nothing of which file in {@code
     *         config/} to fix
     */
    static String file(Map<String, ?> properties) {
        Object name = properties.get("felix.fileinstall.filename");
        if (name == null) {
            return "";
        }
        try {
            return " (file " + java.nio.file.Path.of(java.net.URI.create(name.toString())) + ")";
        } catch (RuntimeException notAFileUri) {
            return " (file " + name + ")";
        }
    }

    /** Takes every line away: the GPUs' component goes. */
    synchronized void clearAll() {
        for (String subject : Map.copyOf(standing).keySet()) {
            clear(subject);
        }
    }
}
