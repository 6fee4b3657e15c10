package io.ferrum.memory.shell;

import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

import org.apache.felix.service.command.Descriptor;
import org.osgi.framework.BundleContext;
import org.osgi.framework.InvalidSyntaxException;
import org.osgi.framework.ServiceReference;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.api.StreamManager;

/**
 * The device commands: {@code mem:devices}, {@code mem:info}, {@code mem:pressure} and {@code
 * mem:streams}. They only read: figures from the monitor, a device's backend name from its
 * manager's service properties, and the streams of every {@link StreamManager} service.
 */
@Component(service = DeviceCommands.class)
@MemCommand(function = {"devices", "info", "pressure", "streams"})
public final class DeviceCommands {
    private final BundleContext context;

    @Reference(cardinality = ReferenceCardinality.OPTIONAL, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY)
    volatile GlobalMemoryMonitor monitor;

    @Activate
    public DeviceCommands(BundleContext context) {
        this.context = context;
    }

    private static final Syntax DEVICES = Syntax.of("devices");
    private static final Syntax INFO = Syntax.of("info").optional("DEVICE");
    private static final Syntax PRESSURE = Syntax.of("pressure");
    private static final Syntax STREAMS = Syntax.of("streams");

    @Descriptor("List every memory device: backend, capacity, use, fragmentation and pressure (mem:devices)")
    public Reply devices(@Descriptor("none") String... args) {
        return Reply.attempt("devices", () -> {
            DEVICES.parse(args);
            GlobalMemoryMonitor mon = Services.monitor(monitor);
            Map<Device, MemoryInfo> all = mon.globalMemoryInfo();
            if (all.isEmpty()) {
                return Reply.line("No memory devices. " + Services.START_A_BACKEND);
            }
            Table t = new Table("DEVICE", "BACKEND", "TOTAL", "USED", "FREE", "RESERVED", "ALLOCS", "FRAG", "PRESSURE");
            all.forEach((d, i) -> t.row(d, backendOf(d, mon.manager(d).orElse(null)), Sizes.human(i.totalBytes()), Sizes.human(i.usedBytes()),
                    Sizes.human(i.freeBytes()), Sizes.human(i.reservedBytes()), i.activeAllocations(),
                    percent(i.fragmentationRatio() * 100), i.pressureLevel()));
            return t;
        });
    }

    @Descriptor("Show everything known about every device, or about one: mem:info [DEVICE]")
    public Reply info(@Descriptor("[DEVICE], e.g. cpu:0") String... args) {
        return Reply.attempt("info", () -> {
            String device = INFO.parse(args).get("DEVICE", null);
            if (device != null) {
                Device d = Device.parse(device);
                return Reply.lines(info(d, Services.manager(monitor, d)));
            }
            GlobalMemoryMonitor mon = Services.monitor(monitor);
            List<String> lines = new ArrayList<>();
            for (Device d : new TreeMap<>(mon.globalMemoryInfo()).keySet()) {
                // A device gone since the listing (its backend stopped, its manager closed) has
                // nothing left to show.
                Optional<DeviceMemoryManager> m = mon.manager(d);
                try {
                    if (m.isPresent()) {
                        lines.addAll(info(d, m.get()));
                    }
                } catch (DeviceUnavailableException closedMeanwhile) {
                    // left out
                }
            }
            return lines.isEmpty() ? Reply.line("No memory devices. " + Services.START_A_BACKEND) : Reply.lines(lines);
        });
    }

    /** How often {@link #info(Device, DeviceMemoryManager)} reads a device again whose figures changed while it read them. */
    private static final int READINGS = 8;

    private List<String> info(Device d, DeviceMemoryManager m) {
        // The device's figures and its pools' lines come from three calls (figures, handles, reserved
        // bytes by type): read again while the device changed meanwhile, so that the pools' reserved
        // bytes add up to the device's (a pool that grew between two calls showed under a reserved
        // line that did not hold it). A device that never stands still shows its last reading.
        MemoryInfo i;
        List<String> pools;
        int reading = 0;
        while (true) {
            i = m.memoryInfo();
            List<MemoryHandleInfo> handles = m.handles();
            Map<MemoryType, Long> reserved = m.reservedByType();
            pools = pools(handles, reserved, i);
            boolean byType = !reserved.isEmpty();
            long sum = reserved.values().stream().mapToLong(Long::longValue).sum();
            MemoryInfo after = m.memoryInfo();
            boolean still = after.usedBytes() == i.usedBytes() && after.reservedBytes() == i.reservedBytes()
                    && after.activeAllocations() == i.activeAllocations();
            if ((still && (!byType || sum == i.reservedBytes())) || ++reading == READINGS) {
                break;
            }
        }
        List<String> lines = new ArrayList<>(List.of(
                d + " (" + backendOf(d, m) + ")",
                "  total         " + Sizes.human(i.totalBytes()) + " (" + i.totalBytes() + " bytes)",
                "  used          " + Sizes.human(i.usedBytes()) + " (" + percent(i.utilizationPercent()) + ")",
                "  free          " + Sizes.human(i.freeBytes()),
                "  reserved      " + Sizes.human(i.reservedBytes()),
                "  allocations   " + i.activeAllocations(),
                "  fragmentation " + percent(i.fragmentationRatio() * 100),
                "  bandwidth     " + bandwidth(i),
                "  pressure      " + i.pressureLevel()));
        lines.addAll(5, pools); // under the reserved line
        return lines;
    }

    /**
     * @param handles  the handles the device issued, read before {@code reserved}: a block listed lies
     *                 in a chunk its pool held then, and still holds while it is live
     * @param reserved the pools' reserved bytes by type
     * @param i        the device's figures
     * @return one line per memory type whose pool holds memory or live blocks, under the device's
     *         reserved line: what the pool reserved, and the bytes its live blocks were asked for
     *         (handle sizes: the device's used bytes add each block's alignment and size-class
     *         rounding, so these lines need not add up to it). The blocks are those of the handles
     *         the device issued ({@link DeviceMemoryManager#handles}): the target handle of a mapping
     *         across devices names a block of the other device's pool, which shows on a type with
     *         nothing reserved here as that device's memory, not as this one's
     */
    private static List<String> pools(List<MemoryHandleInfo> handles, Map<MemoryType, Long> reserved, MemoryInfo i) {
        // A manager that reserves memory but reports none by type (reservedByType's default) says
        // nothing of where its blocks lie; one that reports by type reserves for each of its own blocks.
        boolean byType = !reserved.isEmpty() || i.reservedBytes() == 0;
        Map<MemoryType, long[]> live = new EnumMap<>(MemoryType.class); // bytes, blocks
        for (MemoryHandleInfo h : handles) {
            long[] sum = live.computeIfAbsent(h.memoryType(), t -> new long[2]);
            sum[0] += h.size();
            sum[1]++;
        }
        List<String> lines = new ArrayList<>();
        for (MemoryType t : MemoryType.values()) {
            Long r = reserved.get(t);
            long[] l = live.getOrDefault(t, new long[2]);
            if (r == null && l[1] == 0) {
                continue;
            }
            if (r == null && byType) {
                lines.add(String.format(Locale.ROOT, "    %-11s none reserved here, %s in %d %s of another device (a mapping's handle)",
                        t, Sizes.human(l[0]), l[1], l[1] == 1 ? "block" : "blocks"));
                continue;
            }
            lines.add(String.format(Locale.ROOT, "    %-11s %s reserved, %s in %d %s", t,
                    r == null ? "not reported" : Sizes.human(r), Sizes.human(l[0]), l[1], l[1] == 1 ? "block" : "blocks"));
        }
        return lines;
    }

    @Descriptor("Show the memory pressure of every device and overall (mem:pressure)")
    public Reply pressure(@Descriptor("none") String... args) {
        return Reply.attempt("pressure", () -> {
            PRESSURE.parse(args);
            Map<Device, MemoryInfo> all = Services.monitor(monitor).globalMemoryInfo();
            if (all.isEmpty()) { // the overall level would read LOW: there is no pressure to speak of
                return Reply.line("No memory devices: no pressure to show. " + Services.START_A_BACKEND);
            }
            Table t = new Table("DEVICE", "USED", "UTILISATION", "PRESSURE");
            MemoryPressure overall = MemoryPressure.LOW;
            for (Map.Entry<Device, MemoryInfo> e : all.entrySet()) {
                MemoryInfo i = e.getValue();
                t.row(e.getKey(), Sizes.human(i.usedBytes()), percent(i.utilizationPercent()), i.pressureLevel());
                // The rows' reading, as the monitor's globalMemoryPressure sums it up: asked again, a
                // device that changed meanwhile would read LOW in its row and HIGH overall.
                if (i.pressureLevel().isAtLeast(overall)) {
                    overall = i.pressureLevel();
                }
            }
            return Reply.lines(List.of(t.toString(), "overall: " + overall));
        });
    }

    @Descriptor("List the streams of every device (mem:streams)")
    public Reply streams(@Descriptor("none") String... args) {
        return Reply.attempt("streams", () -> {
            STREAMS.parse(args);
            Table t = new Table("DEVICE", "STREAM", "STATE");
            for (ServiceReference<StreamManager> ref : context.getServiceReferences(StreamManager.class, null)) {
                StreamManager s = context.getService(ref);
                if (s == null) {
                    continue;
                }
                List<Object[]> rows = new ArrayList<>();
                try {
                    for (StreamHandle h : s.streams()) {
                        boolean ready;
                        try {
                            ready = s.isStreamReady(h);
                        } catch (InvalidMemoryRequestException destroyedMeanwhile) {
                            // Destroyed by its user since the list was read: gone, as it would be a moment later.
                            continue;
                        }
                        rows.add(new Object[] {s.device(), h.isDefault() ? "default" : Long.toString(h.id()),
                            ready ? "ready" : "busy"});
                    }
                } catch (DeviceUnavailableException stoppedMeanwhile) {
                    // Its backend stopped while it was listed: its streams went with it, as its device did.
                    rows.clear();
                } finally {
                    context.ungetService(ref);
                }
                rows.forEach(t::row);
            }
            return t.isEmpty() ? Reply.line("No stream managers are registered.") : t;
        });
    }

    /**
     * Several backends may register a manager for one device (another backend in {@code plugins/});
     * the registry lists them in no set order, and the figures are those of the one the monitor lets
     * serve. The backend shown is that one's: the service that is the monitor's manager, else (a
     * service factory hands each bundle its own object) the one the monitor's rule picks, the highest
     * in {@link ServiceReference#compareTo} (ranking, then the older).
     *
     * @param serving the manager the monitor gives for {@code d}, or null
     * @return the backend property of the manager service serving {@code d}, or {@code -}
     */
    private String backendOf(Device d, DeviceMemoryManager serving) {
        ServiceReference<?>[] refs;
        try {
            refs = context.getServiceReferences(DeviceMemoryManager.class.getName(),
                    "(" + DeviceMemoryManager.DEVICE_PROPERTY + "=" + d + ")");
        } catch (InvalidSyntaxException e) {
            return "-";
        }
        if (refs == null) {
            return "-";
        }
        ServiceReference<?> first = null;
        for (ServiceReference<?> r : refs) {
            Object m = context.getService(r);
            if (m != null) {
                context.ungetService(r);
                if (m == serving) {
                    return String.valueOf(r.getProperty(DeviceMemoryManager.BACKEND_PROPERTY));
                }
            }
            if (first == null || r.compareTo(first) > 0) {
                first = r;
            }
        }
        return String.valueOf(first.getProperty(DeviceMemoryManager.BACKEND_PROPERTY));
    }

    /**
     * @return the measured copy bandwidth, or {@code not measured} when there is none or it rounds to
     *         zero (copies too small or too few to time): {@code 0.00 GB/s} would read as a dead link
     */
    static String bandwidth(MemoryInfo i) {
        double gbps = i.bandwidthGbps().orElse(0);
        if (gbps >= 0.995) {
            return String.format(Locale.ROOT, "%.2f GB/s", gbps);
        }
        return gbps * 1000 >= 0.05 ? String.format(Locale.ROOT, "%.1f MB/s", gbps * 1000)
                : "not measured (no copy large enough to time yet)";
    }

    /**
     * @return the percentage to one decimal, rounded down: a utilisation just under a pressure
     *         threshold (94.97 %, HIGH) must not read as the threshold itself (95.0 %, CRITICAL's).
     *         The nudge of 1e-9 keeps a value that binary fractions put a hair under its decimal one
     *         (1.1 % computes as 1.0999999999999999) from reading 0.1 lower; it is far below a byte of
     *         any device under a terabyte.
     */
    static String percent(double value) {
        return String.format(Locale.ROOT, "%.1f%%", Math.floor(value * 10 + 1e-9) / 10);
    }
}
