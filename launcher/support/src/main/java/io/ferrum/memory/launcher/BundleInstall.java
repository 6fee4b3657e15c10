package io.ferrum.memory.launcher;

import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;

import org.apache.felix.service.command.CommandSession;
import org.apache.felix.service.command.Descriptor;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.BundleException;
import org.osgi.framework.Constants;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;

/**
 * Gogo's {@code install} in the distribution, in place of Felix's own ({@code felix:install}, by a higher service
 * ranking). Felix's command answered a location it could not install with the exception's name as a result ({@code
 * java.util.zip.ZipException: zip file is empty}, {@code java.io.FileNotFoundException: ...}, exit code 0), installed a
 * jar without {@code Bundle-SymbolicName} (on which the Log Service then failed at every event), took a path as a
 * relative URL (a file name with a space "Illegal character in path"), and of {@code install a.jar b.jar} installed the
 * one that was a bundle and dropped the other's failure without a word. Here every location is read and checked first
 * ({@link BundleJar}), and either all are installed, or none is and one error line names the first refused and why.
 * A {@code reference:} location (a folder the framework reads in place) is the framework's to check, but for a pipe,
 * a socket or a device, which the framework would wait on for good.
 */
@Component(service = Object.class, property = {"osgi.command.scope=felix", "osgi.command.function=install",
        Constants.SERVICE_RANKING + ":Integer=1"})
public final class BundleInstall {
    /** How each refusal ends. */
    static final String NOTHING = "; nothing was installed";

    private final BundleContext context;

    @Activate
    public BundleInstall(BundleContext context) {
        this.context = context;
    }

    /** @return {@code Bundle ID: 27}, or {@code Bundle IDs: 27, 28}, as Felix's command answers, each id once */
    @Descriptor("install bundles from jar files or URLs: all of them, or none when one is no bundle jar")
    public String install(CommandSession session, @Descriptor("the jars: files' paths, or URLs") String[] locations) {
        if (locations == null || locations.length == 0) {
            throw new IllegalArgumentException("install needs the jar of a bundle: a file's path or a URL, e.g. install"
                    + " extra/x.jar" + NOTHING);
        }
        // A location given twice is one bundle: its id is said once (Felix's command said "Bundle IDs: 27, 27").
        List<Long> ids = installAll(context, session, List.of(locations), "install", NOTHING).stream()
                .map(Bundle::getBundleId).distinct().toList();
        return (ids.size() > 1 ? "Bundle IDs: " : "Bundle ID: ") + ids.stream().map(String::valueOf).collect(Collectors.joining(", "));
    }

    /**
     * Checks every location, then installs each in order, or none: the refusal, or the framework's failure, is an
     * {@link IllegalArgumentException} whose message is {@code Cannot VERB LOCATION: why} and {@code nothing}.
     *
     * @return the bundle of each location, in order (one installed already, by its location, is that one)
     */
    static List<Bundle> installAll(BundleContext context, CommandSession session, List<String> locations, String verb,
            String nothing) {
        List<BundleJar> jars = new ArrayList<>();
        try {
            for (String location : locations) {
                if (!location.strip().startsWith("reference:")) {
                    jars.add(unique(context, BundleJar.read(context, session, location), jars));
                } else {
                    BundleJar.checkReference(location);
                }
            }
            return installed(context, locations, jars, verb, nothing);
        } catch (BundleJar.Refused r) {
            throw new IllegalArgumentException("Cannot " + verb + " " + r.shown + ": " + r.why + nothing);
        } finally {
            jars.forEach(BundleJar::close);
        }
    }

    /**
     * @return {@code jar}, unless another bundle (installed from another location, or given before it) has its symbolic
     *         name and version: the framework refuses that, with the exception's name as Felix's answer
     */
    private static BundleJar unique(BundleContext context, BundleJar jar, List<BundleJar> before) throws BundleJar.Refused {
        for (Bundle b : context.getBundles()) {
            if (!b.getLocation().equals(jar.location) && jar.symbolicName.equals(b.getSymbolicName())
                    && jar.version.equals(b.getVersion())) {
                jar.close();
                throw new BundleJar.Refused(jar.shown, "it is " + jar.identity() + ", which bundle " + b.getBundleId()
                        + " is already (a symbolic name and version are one bundle's only)");
            }
        }
        for (BundleJar other : before) {
            if (!other.location.equals(jar.location) && jar.symbolicName.equals(other.symbolicName)
                    && jar.version.equals(other.version)) {
                jar.close();
                throw new BundleJar.Refused(jar.shown, "it is " + jar.identity() + ", as " + other.shown + " given before it is");
            }
        }
        return jar;
    }

    /** Installs each location in order; when one fails, uninstalls those this call installed and says why. */
    private static List<Bundle> installed(BundleContext context, List<String> locations, List<BundleJar> jars, String verb,
            String nothing) {
        List<Bundle> installedNow = new ArrayList<>();
        List<Bundle> bundles = new ArrayList<>();
        int next = 0;
        for (String given : locations) {
            String location = given.strip();
            BundleJar jar = location.startsWith("reference:") ? null : jars.get(next++);
            String shown = jar == null ? "'" + ControlCharacters.escaped(location) + "'" : jar.shown;
            try {
                Bundle b = context.getBundle(jar == null ? location : jar.location);
                if (b == null) {
                    if (jar == null) {
                        b = context.installBundle(location);
                    } else {
                        try (InputStream in = jar.open()) {
                            b = context.installBundle(jar.location, in);
                        }
                    }
                    installedNow.add(b);
                }
                bundles.add(b);
            } catch (Exception e) {
                for (Bundle b : installedNow) {
                    try {
                        b.uninstall();
                    } catch (BundleException | RuntimeException stays) {
                        // said below: the line names what was not installed; lb shows what stayed
                    }
                }
                Throwable cause = e instanceof BundleException be && be.getNestedException() != null ? be.getNestedException() : e;
                throw new IllegalArgumentException("Cannot " + verb + " " + shown + ": " + ControlCharacters.escaped(
                        cause.getMessage() != null ? cause.getMessage() : cause.toString()) + nothing);
            }
        }
        return bundles;
    }
}
