package io.ferrum.memory.launcher;

import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.apache.felix.service.command.CommandSession;
import org.apache.felix.service.command.Descriptor;
import org.apache.felix.service.command.Parameter;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.BundleException;
import org.osgi.framework.Constants;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;

/**
 * Gogo's {@code start} in the distribution, in place of Felix's own ({@code felix:start}, by a higher service ranking).
 * Felix's command starts a bundle by its id, and installs anything else as a location first, handing it to the
 * framework unchecked: {@code start file:/x/pipe.jar} hung the console on the pipe's open, {@code start file:/dev/zero}
 * filled the disk, a jar that is no bundle failed with a trace, and every failure ({@code start io.ferrum.memory.cpu}:
 * {@code java.net.MalformedURLException: no protocol: io.ferrum.memory.cpu}) was a result, exit code 0. Here a
 * bundle is named as {@code update} takes it (its id, its symbolic name, its location), anything else is a jar to
 * install, read and checked as {@code install} does ({@link BundleInstall}, a path from the session's folder or a
 * URL), all of them before any is installed; each refusal or failure is one error line naming it. The options are
 * Felix's: {@code -t} starts transiently, {@code -p} by the bundle's declared activation policy.
 */
@Component(service = Object.class, property = {"osgi.command.scope=felix", "osgi.command.function=start",
        Constants.SERVICE_RANKING + ":Integer=1"})
public final class BundleStart {
    /** How a refusal before any start ends. */
    static final String NOTHING = "; nothing was installed or started";

    private final BundleContext context;

    @Activate
    public BundleStart(BundleContext context) {
        this.context = context;
    }

    @Descriptor("start bundles: installed ones by id or symbolic name, or jars (files' paths or URLs) installed first")
    public String start(CommandSession session,
            @Descriptor("start bundle transiently") @Parameter(names = {"-t", "--transient"}, presentValue = "true",
                    absentValue = "false") boolean transientStart,
            @Descriptor("use declared activation policy") @Parameter(names = {"-p", "--policy"}, presentValue = "true",
                    absentValue = "false") boolean policy,
            @Descriptor("the bundles: ids, symbolic names, or jars' paths or URLs") String[] targets) {
        if (targets == null || targets.length == 0) {
            throw new IllegalArgumentException("start needs a bundle: its id or symbolic name, or a jar's path or URL to"
                    + " install and start, e.g. start 27" + NOTHING);
        }
        List<Bundle> bundles = new ArrayList<>();
        List<Integer> toInstall = new ArrayList<>();
        List<String> locations = new ArrayList<>();
        for (String target : targets) {
            // an installed bundle by its id, its symbolic name (when one bundle has it) or its location; else a location
            Bundle named = BundleConverter.findOrRefuse(context, target, "start", NOTHING);
            if (named == null && !BundleJar.isUrl(target.strip())) {
                Path file = BundleJar.file(session, target);
                if (file != null && !Files.exists(file, LinkOption.NOFOLLOW_LINKS)) {
                    // A mistyped name is more likely than a missing jar: say both.
                    throw new IllegalArgumentException("Cannot start '" + ControlCharacters.escaped(target.strip())
                            + "': no bundle is so named (lb -s lists the installed bundles' names), and there is no file "
                            + ControlCharacters.escaped(file) + NOTHING);
                }
            }
            if (named == null) {
                toInstall.add(bundles.size());
                locations.add(target);
            }
            bundles.add(named);
        }
        if (!locations.isEmpty()) {
            List<Bundle> installed = BundleInstall.installAll(context, session, locations, "start", NOTHING);
            for (int i = 0; i < installed.size(); i++) {
                bundles.set(toInstall.get(i), installed.get(i));
            }
        }
        int options = (transientStart ? Bundle.START_TRANSIENT : 0) | (policy ? Bundle.START_ACTIVATION_POLICY : 0);
        for (Bundle b : bundles) {
            try {
                b.start(options);
            } catch (BundleException | RuntimeException e) {
                Throwable shown = e instanceof BundleException be && be.getNestedException() != null ? be.getNestedException() : e;
                throw new IllegalArgumentException("Cannot start " + b.getSymbolicName() + " [" + b.getBundleId() + "]: "
                        + ControlCharacters.escaped(shown.getMessage() != null ? shown.getMessage() : shown.toString()));
            }
        }
        return null;
    }
}
