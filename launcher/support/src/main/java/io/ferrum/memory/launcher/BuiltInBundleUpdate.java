package io.ferrum.memory.launcher;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.net.MalformedURLException;
import java.net.URI;
import java.net.URL;
import java.util.regex.Pattern;

import org.apache.felix.service.command.CommandSession;
import org.apache.felix.service.command.Descriptor;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleException;
import org.osgi.framework.Constants;
import org.osgi.service.component.annotations.Component;

/**
 * Gogo's {@code update} in the distribution, in place of Felix's own ({@code felix:update}, by a higher
 * service ranking), for one case: a bare {@code update} of a bundle built into the distribution's jar. The
 * bnd launcher installs those from a location that is a path inside that jar ({@code
 * jar/io.ferrum.memory.cpu-0.1.0.jar}), which no URL reads: Felix stopped the bundle, failed to read the
 * location, logged {@code Unable to update the bundle} with the {@code MalformedURLException}'s stack
 * trace, started the bundle again, and Gogo answered that exception once more, as a result (the script
 * exited 0). So a failed update was told three times over, while the bundle had in fact been restarted (a
 * backend's blocks went with it). Here the bundle is restarted as Felix did, and one line says so and how
 * to replace it ({@code update ID file:...}). An update of the system bundle ({@code update 0}) is refused: it
 * restarts the framework inside the process, and as the framework stops the bnd launcher deletes its storage, so the
 * restarted framework lost bundles ("Error reloading cached bundle, removing it", a stack trace each) and the
 * process ended with exit code 0, the statements after it never run. A bare update from a {@code file:} location
 * that cannot be read (the jar deleted) answers as an update from that location does and touches no bundle. Every
 * other call does what Felix's command does, and answers as it does.
 */
@Component(service = Object.class, property = {"osgi.command.scope=felix", "osgi.command.function=update",
        Constants.SERVICE_RANKING + ":Integer=1"})
public final class BuiltInBundleUpdate {
    /** Why {@code update 0} is refused, in the words of the console's one error line. */
    static final String SYSTEM_UPDATE_REFUSED = "update 0 would restart the framework inside this process, which the"
            + " distribution cannot do (the restarted framework loses bundles); nothing was done: to restart, stop 0 (or"
            + " exit) and start the distribution again";
    /** A URL's scheme: what a location Felix can read an update from begins with. */
    private static final Pattern SCHEME = Pattern.compile("[A-Za-z][A-Za-z0-9+.-]*:.*", Pattern.DOTALL);

    @Descriptor("update bundle")
    public String update(@Descriptor("bundle to update") Bundle bundle) {
        if (bundle == null) {
            return "Must specify a bundle.";
        }
        refuseSystemBundle(bundle);
        String location = bundle.getHeaders().get(Constants.BUNDLE_UPDATELOCATION);
        if (location == null) {
            location = bundle.getLocation();
        }
        try {
            if (SCHEME.matcher(location).matches()) {
                String unreadable = unreadableFile(location);
                if (unreadable != null) {
                    return unreadable;
                }
                bundle.update();
                return null;
            }
            return restarted(bundle, location);
        } catch (BundleException e) {
            return e.getNestedException() != null ? e.getNestedException().toString() : e.toString();
        } catch (Exception e) {
            return e.toString();
        }
    }

    /**
     * Restarts {@code bundle}, built into the distribution's jar, if it runs, as Felix's update did.
     *
     * @return the line that says so; made before the stop, as this bundle may be the one restarted
     */
    private static String restarted(Bundle bundle, String location) throws BundleException {
        String which = bundle.getSymbolicName() + " [" + bundle.getBundleId() + "] is built into the distribution's jar ("
                + ControlCharacters.escaped(location) + "), which holds it as it is: ";
        String replace = "; to replace it, give a jar: update " + bundle.getBundleId() + " file:/path/to/bundle.jar";
        if (bundle.getState() != Bundle.ACTIVE) {
            return which + "nothing was done, as it is not running" + replace;
        }
        String said = which + "it was restarted" + replace;
        bundle.stop(Bundle.STOP_TRANSIENT);
        bundle.start(Bundle.START_TRANSIENT);
        return said;
    }

    @Descriptor("update bundle from URL")
    public String update(CommandSession session, @Descriptor("bundle to update") Bundle bundle,
            @Descriptor("URL from where to retrieve bundle") String location) {
        if (bundle == null) {
            return "Must specify a bundle.";
        }
        if (location == null) {
            return "Must specify a location.";
        }
        refuseSystemBundle(bundle);
        try (InputStream in = new URL(resolved(session, location.strip())).openStream()) {
            bundle.update(in);
            return null;
        } catch (MalformedURLException e) {
            return "Unable to parse URL";
        } catch (IOException e) {
            return "Unable to open input stream: " + e;
        } catch (BundleException e) {
            return e.getNestedException() != null ? e.getNestedException().toString() : e.toString();
        } catch (Exception e) {
            return e.toString();
        }
    }

    /**
     * @return for a {@code file:} location that cannot be read (its jar deleted since the install), what an update
     *         from it answers; else null. Felix's bare update stopped the bundle before it read the location, then
     *         printed the failure with its stack trace and started the bundle again: a failed update told three times,
     *         while the bundle had been restarted (a backend's blocks gone with it)
     */
    private static String unreadableFile(String location) {
        if (!location.regionMatches(true, 0, "file:", 0, 5)) {
            return null;
        }
        try (InputStream in = new URL(location).openStream()) {
            return null;
        } catch (IOException e) {
            return "Unable to open input stream: " + e;
        }
    }

    /** @throws IllegalArgumentException for the system bundle ({@link #SYSTEM_UPDATE_REFUSED}) */
    private static void refuseSystemBundle(Bundle bundle) {
        if (bundle.getBundleId() == Constants.SYSTEM_BUNDLE_ID) {
            throw new IllegalArgumentException(SYSTEM_UPDATE_REFUSED);
        }
    }

    /**
     * @return {@code location} as a URL: a path is taken from the session's current folder, as Felix's command does;
     *         an empty one stays empty (no URL), as there: taken from that folder, it named the folder itself, and the
     *         update read it, failed with a stack trace and restarted the bundle
     */
    private static String resolved(CommandSession session, String location) throws IOException {
        if (location.isEmpty()) {
            return location;
        }
        Object cwd = session.get("_cwd");
        File dir = cwd instanceof File f ? f : new File("").getCanonicalFile();
        return dir.toURI().resolve(location).toString();
    }
}
