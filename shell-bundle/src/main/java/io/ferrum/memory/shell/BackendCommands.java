package io.ferrum.memory.shell;

import java.util.ArrayList;
import java.util.List;

import org.apache.felix.service.command.Descriptor;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;
import org.osgi.framework.ServiceReference;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;

import io.ferrum.memory.api.DeviceMemoryManager;

/**
 * The {@code mem:backends} command: every bundle whose manifest has a {@value #BACKEND_HEADER}
 * header, with its state, the devices whose managers it registered, and a note that says why it
 * serves no device: the backend's own {@value #STATUS_PROPERTY} when it gives one, else one derived
 * from its state that says what to do.
 */
@Component(service = BackendCommands.class)
@MemCommand(function = "backends")
public final class BackendCommands {
    /** Manifest header that marks a device backend bundle, with the device kind it serves. */
    static final String BACKEND_HEADER = "Ferrum-Backend";
    /**
     * Property of any service a backend registers, saying in one line what it serves or why it
     * serves nothing (the cuda backend's probe sets it, e.g. "inactive: no CUDA driver (...)").
     */
    static final String STATUS_PROPERTY = "memory.backend.status";

    private final BundleContext context;

    @Activate
    public BackendCommands(BundleContext context) {
        this.context = context;
    }

    @Descriptor("List the device backend bundles with their state, their devices, and what to do about an inactive one")
    public Reply backends() {
        return Reply.attempt(() -> {
            Table t = new Table("ID", "BACKEND", "KIND", "STATE", "DEVICES", "NOTE");
            for (Bundle b : context.getBundles()) {
                String kind = b.getHeaders().get(BACKEND_HEADER);
                if (kind == null) {
                    continue;
                }
                List<String> devices = devices(b);
                t.row(b.getBundleId(), b.getSymbolicName(), kind, state(b),
                        devices.isEmpty() ? "-" : String.join(",", devices), note(b, devices, status(b)));
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

    private static String note(Bundle b, List<String> devices, String status) {
        return switch (b.getState()) {
            case Bundle.INSTALLED -> "not resolved: a requirement is missing (see the framework log, or 'diag "
                    + b.getBundleId() + "')";
            case Bundle.RESOLVED -> "stopped: start it with 'start " + b.getBundleId() + "'";
            case Bundle.ACTIVE -> devices.isEmpty()
                    ? (status != null ? status : "active, but no device found (see the log)") : "";
            default -> "";
        };
    }
}
