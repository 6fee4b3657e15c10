package io.ferrum.memory.shell;

import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryRouter;
import io.ferrum.memory.api.MemoryType;

/**
 * The allocation commands: {@code mem:alloc} (through the router, or on one device), {@code
 * mem:free} and {@code mem:handles}. They own the life of blocks; what is inside a block is {@link
 * BytesCommands}'s.
 */
@Component(service = AllocationCommands.class)
@MemCommand(function = {"alloc", "free", "handles"})
public final class AllocationCommands {

    @Reference(cardinality = ReferenceCardinality.OPTIONAL, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY)
    volatile GlobalMemoryMonitor monitor;

    @Reference(cardinality = ReferenceCardinality.OPTIONAL, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY)
    volatile MemoryRouter router;

    private static final Syntax ALLOC = Syntax.of("alloc").option("-t", "--type", "TYPE").option("-a", "--align", "ALIGN")
            .required("SIZE").optional("DEVICE");
    private static final Syntax FREE = Syntax.of("free").required("HANDLE");
    private static final Syntax HANDLES = Syntax.of("handles").optional("DEVICE");

    @Descriptor("Allocate memory: mem:alloc [-t TYPE] [-a ALIGN] SIZE [DEVICE]. Without DEVICE the router (the active"
            + " strategy) picks the device. TYPE: GENERAL (default), TENSOR, CACHE, TEMPORARY, PINNED or MAPPED; ALIGN:"
            + " bytes, a power of two (0: the pool's); SIZE: 4096, 64k, 64KiB, 512MiB, 2g. Prints the handle")
    public Reply alloc(@Descriptor("[-t TYPE] [-a ALIGN] SIZE [DEVICE]") String... args) {
        return Reply.attempt("alloc", () -> {
            Syntax.Words w = ALLOC.parse(args);
            MemoryType t = Arguments.memoryType(w.option("--type", "GENERAL"));
            long a = Sizes.parse("alignment", w.option("--align", "0"));
            long size = Sizes.parse(w.get("SIZE"));
            String device = w.get("DEVICE", null);
            if (device == null) {
                MemoryRouter r = Services.router(router);
                AllocationRequirements req = AllocationRequirements.defaults().withMemoryType(t);
                if (a != 0) {
                    req = req.withAlignment(a);
                }
                MemoryHandle h = r.allocate(size, req);
                Optional<Device> on = r.owner(h);
                if (on.isEmpty()) {
                    // Its device went away as it was allocated (its backend stopped): no success to
                    // report. The router says why, as for any handle no device knows.
                    try {
                        on = Optional.of(BlockAccess.info(r, h).device());
                    } catch (RuntimeException gone) {
                        throw new DeviceUnavailableException(null, h + " was allocated, but is gone already: " + gone.getMessage());
                    }
                }
                return Reply.line(h + " on " + on.get());
            }
            Device d = Device.parse(device);
            DeviceMemoryManager m = Services.manager(monitor, d);
            MemoryHandle h = a == 0 ? m.allocate(size, t, d) : m.allocateAligned(size, a, t, d);
            return Reply.line(h + " on " + d);
        });
    }

    @Descriptor("Free a block: mem:free HANDLE")
    public Reply free(@Descriptor("HANDLE: as mem:alloc printed it, or the value it returned ($h)") String... args) {
        return Reply.attempt("free", () -> {
            MemoryHandle h = Arguments.handle(FREE.parse(args).get("HANDLE"));
            Services.router(router).deallocate(h);
            return Reply.line("freed " + h);
        });
    }

    @Descriptor("List the live blocks of every device, or of one: mem:handles [DEVICE]")
    public Reply handles(@Descriptor("[DEVICE], e.g. cpu:0") String... args) {
        return Reply.attempt("handles", () -> {
            String device = HANDLES.parse(args).get("DEVICE", null);
            if (device != null) {
                Device d = Device.parse(device);
                return handles(Map.of(d, Services.manager(monitor, d).handles()));
            }
            GlobalMemoryMonitor mon = Services.monitor(monitor);
            Map<Device, List<MemoryHandleInfo>> present = new TreeMap<>();
            for (Device d : mon.globalMemoryInfo().keySet()) {
                // A device gone since the listing (its backend stopped, its manager closed) has no
                // blocks left to list.
                Optional<DeviceMemoryManager> m = mon.manager(d);
                try {
                    m.ifPresent(manager -> present.put(d, manager.handles()));
                } catch (DeviceUnavailableException closedMeanwhile) {
                    // left out
                }
            }
            return handles(present);
        });
    }

    private Reply handles(Map<Device, List<MemoryHandleInfo>> devices) {
        Table t = new Table("HANDLE", "DEVICE", "SIZE", "TYPE", "ALIGN", "MAPPED", "AGE");
        Instant now = Instant.now();
        for (Map.Entry<Device, List<MemoryHandleInfo>> e : devices.entrySet()) {
            Device d = e.getKey();
            // Devices in order, a device's blocks oldest first (a block that outlives the others, a
            // leak, say, leads), then by handle: the same order from one call to the next, whatever
            // order the manager keeps them in.
            List<MemoryHandleInfo> blocks = new ArrayList<>(e.getValue());
            blocks.sort(Comparator.comparing(MemoryHandleInfo::allocatedAt)
                    .thenComparing((a, b) -> Long.compareUnsigned(a.handle().id(), b.handle().id())));
            for (MemoryHandleInfo i : blocks) {
                Duration age = Duration.between(i.allocatedAt(), now);
                t.row(i.handle(), d, Sizes.human(i.size()), i.memoryType(), i.alignment(), i.mapped() ? "yes" : "no",
                        Sizes.age(age.toSeconds()));
            }
        }
        return t.isEmpty() ? Reply.line("No live blocks.") : t;
    }
}
