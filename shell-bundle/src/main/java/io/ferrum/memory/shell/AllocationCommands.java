package io.ferrum.memory.shell;

import java.time.Duration;
import java.time.Instant;
import java.util.Collection;
import java.util.List;
import java.util.TreeMap;

import org.apache.felix.service.command.Descriptor;
import org.apache.felix.service.command.Parameter;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
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

    @Descriptor("Allocate memory through the router (the active strategy picks the device); prints the handle")
    public Reply alloc(
            @Descriptor("memory type: GENERAL, TENSOR, CACHE, TEMPORARY, PINNED or MAPPED")
            @Parameter(names = {"-t", "--type"}, absentValue = "GENERAL") String type,
            @Descriptor("alignment in bytes, a power of two (0: the pool's)")
            @Parameter(names = {"-a", "--align"}, absentValue = "0") String align,
            @Descriptor("size: 4096, 64k, 64KiB, 512MiB, 2g") String size) {
        return Reply.attempt(() -> {
            MemoryRouter r = Services.router(router);
            AllocationRequirements req = AllocationRequirements.defaults().withMemoryType(Arguments.memoryType(type));
            long a = Sizes.parse(align);
            if (a != 0) {
                req = req.withAlignment(a);
            }
            MemoryHandle h = r.allocate(Sizes.parse(size), req);
            return Reply.line(h + " on " + r.owner(h).map(Device::toString).orElse("?"));
        });
    }

    @Descriptor("Allocate memory on one device; prints the handle")
    public Reply alloc(
            @Descriptor("memory type: GENERAL, TENSOR, CACHE, TEMPORARY, PINNED or MAPPED")
            @Parameter(names = {"-t", "--type"}, absentValue = "GENERAL") String type,
            @Descriptor("alignment in bytes, a power of two (0: the pool's)")
            @Parameter(names = {"-a", "--align"}, absentValue = "0") String align,
            @Descriptor("size: 4096, 64k, 64KiB, 512MiB, 2g") String size,
            @Descriptor("the device, e.g. cpu:1") String device) {
        return Reply.attempt(() -> {
            Device d = Device.parse(device);
            DeviceMemoryManager m = Services.manager(monitor, d);
            MemoryType t = Arguments.memoryType(type);
            long a = Sizes.parse(align);
            MemoryHandle h = a == 0 ? m.allocate(Sizes.parse(size), t, d) : m.allocateAligned(Sizes.parse(size), a, t, d);
            return Reply.line(h + " on " + d);
        });
    }

    @Descriptor("Free a block")
    public Reply free(@Descriptor("the handle, as mem:alloc printed it") String handle) {
        return Reply.attempt(() -> {
            MemoryHandle h = MemoryHandle.parse(handle);
            Services.router(router).deallocate(h);
            return Reply.line("freed " + h);
        });
    }

    @Descriptor("List the live blocks of every device")
    public Reply handles() {
        return Reply.attempt(() -> handles(new TreeMap<>(Services.monitor(monitor).globalMemoryInfo()).keySet()));
    }

    @Descriptor("List the live blocks of one device")
    public Reply handles(@Descriptor("the device, e.g. cpu:0") String device) {
        return Reply.attempt(() -> handles(List.of(Device.parse(device))));
    }

    private Reply handles(Collection<Device> devices) {
        Table t = new Table("HANDLE", "DEVICE", "SIZE", "TYPE", "ALIGN", "MAPPED", "AGE");
        Instant now = Instant.now();
        for (Device d : devices) {
            for (MemoryHandleInfo i : Services.manager(monitor, d).handles()) {
                Duration age = Duration.between(i.allocatedAt(), now);
                t.row(i.handle(), d, Sizes.human(i.size()), i.memoryType(), i.alignment(), i.mapped() ? "yes" : "no",
                        age.toSeconds() + "s");
            }
        }
        return t.isEmpty() ? Reply.line("No live blocks.") : t;
    }
}
