package io.ferrum.memory.itests;

import static org.ops4j.pax.exam.CoreOptions.bundle;
import static org.ops4j.pax.exam.CoreOptions.composite;
import static org.ops4j.pax.exam.CoreOptions.junitBundles;
import static org.ops4j.pax.exam.CoreOptions.systemProperty;

import java.io.File;

import org.ops4j.pax.exam.Option;

/**
 * Pax Exam options shared by every container test: the reactor's own jars (their paths come from
 * failsafe as {@code ferrum.bundle.<name>} system properties) and the test framework bundles.
 */
final class FerrumOptions {

    private FerrumOptions() {
    }

    /** @return {@code felix} or {@code equinox}: which failsafe execution runs this JVM */
    static String frameworkUnderTest() {
        String fw = System.getProperty("ferrum.framework");
        if (fw == null) {
            throw new IllegalStateException("ferrum.framework is not set: run the container tests through Maven (./ferrum test)");
        }
        return fw;
    }

    /** @return the symbolic name the system bundle must have for {@link #frameworkUnderTest()} */
    static String expectedSystemBundle() {
        return switch (frameworkUnderTest()) {
            case "felix" -> "org.apache.felix.framework";
            case "equinox" -> "org.eclipse.osgi";
            default -> throw new IllegalStateException("unknown framework " + frameworkUnderTest());
        };
    }

    /**
     * @param name the part after {@code ferrum.bundle.}, for example {@code api} (also used for the
     *             third-party bundles the failsafe configuration passes in the same way)
     * @return an option installing and starting that reactor jar
     */
    static Option reactorBundle(String name) {
        String key = "ferrum.bundle." + name;
        String path = System.getProperty(key);
        if (path == null || path.startsWith("${")) {
            throw new IllegalStateException(key + " is not set: add the module as a dependency of itests and"
                    + " pass its jar path in the failsafe systemPropertyVariables");
        }
        File jar = new File(path);
        if (!jar.isFile()) {
            throw new IllegalStateException(key + " points to " + path + ", which is not a file: build the reactor first");
        }
        return bundle(jar.toURI().toString());
    }

    /**
     * @return Declarative Services, Config Admin and (on Felix, where the framework has none) the Log
     *         Service: what our backends need at run time
     */
    static Option osgiServices() {
        Option log = "felix".equals(frameworkUnderTest()) ? reactorBundle("log") : composite();
        return composite(
                reactorBundle("function"), reactorBundle("promise"), reactorBundle("component"),
                reactorBundle("configadmin"), log, reactorBundle("scr"));
    }

    /** @return the API, the pool engine and the CPU backend with the services they need */
    static Option cpuBackend() {
        return composite(osgiServices(), reactorBundle("api"), reactorBundle("pool"), reactorBundle("cpu"));
    }

    /**
     * @return the CPU backend, the monitor, every strategy, the monitor plugins (log and the Event Admin
     *         bridge) and Event Admin
     */
    static Option wholeSystem() {
        return composite(cpuBackend(), reactorBundle("eventadmin"), reactorBundle("monitor"),
                reactorBundle("bestfit"), reactorBundle("mostfree"), reactorBundle("preferredorder"),
                reactorBundle("roundrobin"), reactorBundle("logmonitor"), reactorBundle("monitoreventadmin"));
    }

    /** @return what every container test needs besides the bundles under test */
    static Option testSupport() {
        return composite(
                junitBundles(),
                systemProperty("org.ops4j.pax.logging.DefaultServiceLog.level").value("WARN"));
    }
}
