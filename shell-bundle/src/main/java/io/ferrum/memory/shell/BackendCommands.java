package io.ferrum.memory.shell;

import java.util.ArrayList;
import java.util.List;

import org.apache.felix.service.command.Descriptor;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;
import org.osgi.framework.InvalidSyntaxException;
import org.osgi.framework.ServiceReference;
import org.osgi.framework.wiring.BundleRevision;
import org.osgi.framework.wiring.FrameworkWiring;
import org.osgi.resource.Namespace;
import org.osgi.resource.Requirement;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;

import io.ferrum.memory.api.DeviceMemoryManager;

/**
 * The {@code mem:backends} command: every bundle whose manifest has a {@value #BACKEND_HEADER}
 * header, with its state, the devices whose managers it registered, and a note that says why it
 * serves no device: the backend's own {@value #STATUS_PROPERTY} when it gives one, else one derived
 * from its state that says what to do (for a bundle that is only installed, the first mandatory
 * requirement no installed bundle provides, found through {@link FrameworkWiring#findProviders});
 * and each configuration the backend refused (a service it registered with {@value #REJECTED_PROPERTY}).
 */
@Component(service = BackendCommands.class)
@MemCommand(function = "backends")
public final class BackendCommands {
    /** Manifest header that marks a device backend bundle, with the device kind it serves. */
    static final String BACKEND_HEADER = "Ferrum-Backend";
    /** Service property of a backend's record of a configuration it refused: the reason, one line. */
    static final String REJECTED_PROPERTY = "ferrum.configuration.rejected";
    /**
     * Property of any service a backend registers, saying in one line what it serves or why it
     * serves nothing (the cuda backend's probe sets it, e.g. "inactive: no CUDA driver (...)").
     */
    static final String STATUS_PROPERTY = "memory.backend.status";

    private static final Syntax BACKENDS = Syntax.of("backends");

    private final BundleContext context;

    @Activate
    public BackendCommands(BundleContext context) {
        this.context = context;
    }

    @Descriptor("List the device backend bundles with their state, their devices, and what to do about an inactive one (mem:backends)")
    public Reply backends(@Descriptor("none") String... args) {
        return Reply.attempt("backends", () -> {
            BACKENDS.parse(args);
            Table t = new Table("ID", "BACKEND", "KIND", "STATE", "DEVICES", "NOTE").text("NOTE");
            for (Bundle b : context.getBundles()) {
                String kind = b.getHeaders().get(BACKEND_HEADER);
                if (kind == null) {
                    continue;
                }
                try {
                    List<String> devices = devices(b);
                    List<String> notes = new ArrayList<>(rejections(b));
                    String note = note(b, devices, status(b));
                    if (note.isEmpty()) {
                        note = standingBy(b, devices);
                    }
                    if (!note.isEmpty() || notes.isEmpty()) {
                        notes.add(0, note);
                    }
                    t.row(b.getBundleId(), b.getSymbolicName(), kind, state(b),
                            devices.isEmpty() ? "-" : String.join(",", devices), String.join(" | ", notes));
                } catch (IllegalStateException e) {
                    // Uninstalled since the listing (its services are asked of it, and it answers so):
                    // left out, as a device gone meanwhile is, rather than the whole table one error.
                    if (b.getState() != Bundle.UNINSTALLED) {
                        throw e;
                    }
                }
            }
            return t.isEmpty() ? Reply.line("No backend bundles are installed (bundles with a " + BACKEND_HEADER
                    + " header); install one, e.g. io.ferrum.memory.cpu.") : t;
        });
    }

    /** @return the devices of the {@link DeviceMemoryManager} services {@code b} registered, sorted */
    private static List<String> devices(Bundle b) {
        List<String> devices = new ArrayList<>();
        ServiceReference<?>[] refs = b.getRegisteredServices();
        if (refs != null) {
            for (ServiceReference<?> r : refs) {
                if (r.getProperty(Constants.OBJECTCLASS) instanceof String[] names
                        && List.of(names).contains(DeviceMemoryManager.class.getName())) {
                    devices.add(String.valueOf(r.getProperty(DeviceMemoryManager.DEVICE_PROPERTY)));
                }
            }
        }
        devices.sort(null);
        return devices;
    }

    /**
     * Several backends may register a manager for one device (another version of a backend dropped
     * into {@code plugins/}); the monitor lets the one of highest service ranking, then the oldest
     * service, serve it, which is the order of {@link ServiceReference#compareTo}. A manager registered
     * by hand through the monitor is not a service and is not seen here.
     *
     * @return "standing by for cpu:0, which bundle 2 serves" for each of {@code b}'s devices that a
     *         manager of another bundle serves, joined with "; "; empty when {@code b} serves them all
     */
    private String standingBy(Bundle b, List<String> devices) {
        List<String> out = new ArrayList<>();
        for (String device : devices) {
            try {
                ServiceReference<?>[] refs = context.getServiceReferences(DeviceMemoryManager.class.getName(),
                        "(" + DeviceMemoryManager.DEVICE_PROPERTY + "=" + device + ")");
                ServiceReference<?> serving = null;
                for (ServiceReference<?> r : refs == null ? new ServiceReference<?>[0] : refs) {
                    if (serving == null || r.compareTo(serving) > 0) {
                        serving = r;
                    }
                }
                Bundle server = serving == null ? null : serving.getBundle();
                if (server != null && server.getBundleId() != b.getBundleId() && !sameManager(serving, b, device)) {
                    out.add("standing by for " + device + ", which bundle " + server.getBundleId() + " serves");
                }
            } catch (InvalidSyntaxException e) {
                // a device name with filter characters: no device of a backend has one
            }
        }
        return String.join("; ", out);
    }

    /** @return whether {@code b} registered, for {@code device}, the very manager {@code serving} is (then it serves too) */
    private boolean sameManager(ServiceReference<?> serving, Bundle b, String device) {
        Object served = context.getService(serving);
        try {
            ServiceReference<?>[] own = b.getRegisteredServices();
            for (ServiceReference<?> r : own == null ? new ServiceReference<?>[0] : own) {
                if (device.equals(String.valueOf(r.getProperty(DeviceMemoryManager.DEVICE_PROPERTY)))) {
                    Object mine = context.getService(r);
                    context.ungetService(r);
                    if (mine != null && mine == served) {
                        return true;
                    }
                }
            }
            return false;
        } finally {
            context.ungetService(serving);
        }
    }

    /**
     * @return the configurations {@code b} refused, as it registered them: services with the property
     *         {@value #REJECTED_PROPERTY} (the reason and what it left running), sorted
     */
    private static List<String> rejections(Bundle b) {
        List<String> out = new ArrayList<>();
        ServiceReference<?>[] refs = b.getRegisteredServices();
        if (refs != null) {
            for (ServiceReference<?> r : refs) {
                if (r.getProperty(REJECTED_PROPERTY) instanceof String reason) {
                    out.add("rejected configuration: " + reason);
                }
            }
        }
        out.sort(null);
        return out;
    }

    /** @return the {@value #STATUS_PROPERTY} of a service {@code b} registered, or null */
    private static String status(Bundle b) {
        ServiceReference<?>[] refs = b.getRegisteredServices();
        if (refs != null) {
            for (ServiceReference<?> r : refs) {
                if (r.getProperty(STATUS_PROPERTY) instanceof String s) {
                    return s;
                }
            }
        }
        return null;
    }

    private static String state(Bundle b) {
        return switch (b.getState()) {
            case Bundle.ACTIVE -> "ACTIVE";
            case Bundle.RESOLVED -> "RESOLVED";
            case Bundle.INSTALLED -> "INSTALLED";
            case Bundle.STARTING -> "STARTING";
            case Bundle.STOPPING -> "STOPPING";
            default -> "UNINSTALLED";
        };
    }

    private String note(Bundle b, List<String> devices, String status) {
        return switch (b.getState()) {
            case Bundle.INSTALLED -> {
                String missing = missingRequirement(b);
                yield missing == null
                        ? "installed, not started (nothing is missing): start it with 'start " + b.getBundleId() + "'"
                        : "installed, not resolved: nothing provides " + missing;
            }
            case Bundle.RESOLVED -> "stopped: start it with 'start " + b.getBundleId() + "'";
            case Bundle.ACTIVE -> devices.isEmpty()
                    ? (status != null ? status : "active, but no device found (see the log)") : "";
            default -> "";
        };
    }

    /**
     * @return the first mandatory requirement of {@code b} that no installed bundle can satisfy, as
     *         {@code namespace filter} (e.g. {@code osgi.wiring.package (osgi.wiring.package=io.ferrum.memory.pool)}),
     *         or null when each has a provider (the bundle is merely not resolved yet)
     */
    private String missingRequirement(Bundle b) {
        BundleRevision revision = b.adapt(BundleRevision.class);
        FrameworkWiring framework = context.getBundle(Constants.SYSTEM_BUNDLE_LOCATION).adapt(FrameworkWiring.class);
        if (revision == null || framework == null) {
            return null;
        }
        for (Requirement r : revision.getRequirements(null)) {
            boolean optional = Namespace.RESOLUTION_OPTIONAL.equals(r.getDirectives().get(Namespace.REQUIREMENT_RESOLUTION_DIRECTIVE));
            String effective = r.getDirectives().get(Namespace.REQUIREMENT_EFFECTIVE_DIRECTIVE);
            boolean resolveTime = effective == null || Namespace.EFFECTIVE_RESOLVE.equals(effective);
            if (!optional && resolveTime && framework.findProviders(r).isEmpty()) {
                String filter = r.getDirectives().get(Namespace.REQUIREMENT_FILTER_DIRECTIVE);
                return r.getNamespace() + (filter == null ? "" : " " + filter);
            }
        }
        return null;
    }
}
