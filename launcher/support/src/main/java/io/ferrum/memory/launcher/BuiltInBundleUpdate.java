package io.ferrum.memory.launcher;

import java.io.InputStream;

import org.apache.felix.service.command.CommandSession;
import org.apache.felix.service.command.Descriptor;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.BundleException;
import org.osgi.framework.Constants;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;

/**
 * Gogo's {@code update} in the distribution, in place of Felix's own ({@code felix:update}, by a higher service
 * ranking). Felix's command stopped the bundle before it read what to update from, so a wrong call was paid for with a
 * restart of the bundle (a backend's blocks gone with it), an {@code ERROR: ... Unable to update the bundle} line and
 * a stack trace, and its answer was a result (exit code 0) where a failure is one {@code error:} line. Here:
 * <ul>
 * <li>a bare {@code update} of a bundle built into the distribution's jar (the bnd launcher installs those from a path
 * inside that jar, {@code jar/io.ferrum.memory.cpu-0.1.0.jar}, which no URL reads) restarts it as Felix did, and one
 * line says so and how to replace it ({@code update ID file:...});</li>
 * <li>{@code update 0} is refused: it restarts the framework inside the process, and as the framework stops the bnd
 * launcher deletes its storage, so the restarted framework lost bundles and the process ended with exit code 0;</li>
 * <li>what an update reads (a jar's path or URL, or a bare update's location) is read and checked first ({@link
 * BundleJar}): one that cannot be read or is no bundle jar, or whose symbolic name and version another bundle has, is
 * refused in one error line naming it and why, and the bundle is left as it was;</li>
 * <li>a bundle that is not installed is named as such, not as an argument {@code update} "cannot take".</li>
 * </ul>
 */
@Component(service = Object.class, property = {"osgi.command.scope=felix", "osgi.command.function=update",
        Constants.SERVICE_RANKING + ":Integer=1"})
public final class BuiltInBundleUpdate {
    /** Why {@code update 0} is refused, in the words of the console's one error line. */
    static final String SYSTEM_UPDATE_REFUSED = "update 0 would restart the framework inside this process, which the"
            + " distribution cannot do (the restarted framework loses bundles); nothing was done: to restart, stop 0 (or"
            + " exit) and start the distribution again";
    /** How each refusal of an update ends: nothing was touched. */
    static final String LEFT = "; the bundle is as it was";

    private final BundleContext context;

    @Activate
    public BuiltInBundleUpdate(BundleContext context) {
        this.context = context;
    }

    /**
     * @param given the bundle: a {@link Bundle}, or its id, symbolic name or location as typed (taken as Object, so that
     *              one not installed reaches this command and is named, where Gogo said it "cannot take" it)
     */
    @Descriptor("update a bundle from its location")
    public String update(@Descriptor("bundle to update: its id or symbolic name") Object given) {
        Bundle bundle = bundle(given);
        refuseSystemBundle(bundle);
        String location = bundle.getHeaders().get(Constants.BUNDLE_UPDATELOCATION);
        if (location == null) {
            location = bundle.getLocation();
        }
        try {
            if (!BundleJar.isUrl(location.strip())) {
                return restarted(bundle, location);
            }
            if (location.strip().startsWith("reference:")) {
                BundleJar.checkReference(location); // else a folder or jar the framework reads in place: its to check
                bundle.update();
                return null;
            }
        } catch (BundleException e) {
            throw new IllegalArgumentException("Cannot update " + name(bundle) + ": " + message(e));
        } catch (BundleJar.Refused r) {
            throw new IllegalArgumentException("Cannot update " + name(bundle) + " from its location " + r.shown + ": "
                    + r.why + LEFT);
        }
        try (BundleJar jar = BundleJar.read(context, null, location)) {
            return updated(bundle, jar, "its location ");
        } catch (BundleJar.Refused r) {
            throw new IllegalArgumentException("Cannot update " + name(bundle) + " from its location " + r.shown + ": "
                    + r.why + LEFT);
        }
    }

    @Descriptor("update a bundle from a jar file or URL")
    public String update(CommandSession session, @Descriptor("bundle to update: its id or symbolic name") Object given,
            @Descriptor("the jar: a file's path, or a URL") String location) {
        Bundle bundle = bundle(given);
        refuseSystemBundle(bundle);
        try (BundleJar jar = BundleJar.read(context, session, location)) {
            return updated(bundle, jar, "");
        } catch (BundleJar.Refused r) {
            throw new IllegalArgumentException("Cannot update " + name(bundle) + " from " + r.shown + ": " + r.why + LEFT);
        }
    }

    /**
     * Updates {@code bundle} from {@code jar}, checked already, unless another bundle has its symbolic name and version
     * (the framework refuses that only once it has stopped the bundle).
     */
    private String updated(Bundle bundle, BundleJar jar, String from) {
        for (Bundle other : context.getBundles()) {
            if (other.getBundleId() != bundle.getBundleId() && jar.symbolicName.equals(other.getSymbolicName())
                    && jar.version.equals(other.getVersion())) {
                throw new IllegalArgumentException("Cannot update " + name(bundle) + " from " + from + jar.shown + ": it is "
                        + jar.identity() + ", which bundle " + other.getBundleId() + " is already (a symbolic name and"
                        + " version are one bundle's only)" + LEFT);
            }
        }
        try (InputStream in = jar.open()) {
            bundle.update(in);
            return null;
        } catch (BundleException e) {
            throw new IllegalArgumentException("Cannot update " + name(bundle) + " from " + from + jar.shown + ": " + message(e));
        } catch (Exception e) {
            throw new IllegalArgumentException("Cannot update " + name(bundle) + " from " + from + jar.shown + ": "
                    + ControlCharacters.escaped(e));
        }
    }

    /** @return the bundle {@code given} names; else {@link IllegalArgumentException} naming what was given */
    private Bundle bundle(Object given) {
        if (given instanceof Bundle b) {
            return b;
        }
        String text = String.valueOf(given).strip();
        Bundle found = BundleConverter.findOrRefuse(context, text, "update", "; nothing was updated");
        if (found != null) {
            return found;
        }
        String shown = ControlCharacters.escaped(text);
        throw new IllegalArgumentException("No bundle is named '" + shown + "' (lb -s lists the installed bundles' names);"
                + " nothing was updated");
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

    /** @throws IllegalArgumentException for the system bundle ({@link #SYSTEM_UPDATE_REFUSED}) */
    private static void refuseSystemBundle(Bundle bundle) {
        if (bundle.getBundleId() == Constants.SYSTEM_BUNDLE_ID) {
            throw new IllegalArgumentException(SYSTEM_UPDATE_REFUSED);
        }
    }

    private static String name(Bundle bundle) {
        return bundle.getSymbolicName() + " [" + bundle.getBundleId() + "]";
    }

    private static String message(BundleException e) {
        Throwable shown = e.getNestedException() != null ? e.getNestedException() : e;
        return ControlCharacters.escaped(shown.getMessage() != null ? shown.getMessage() : shown.toString());
    }
}
