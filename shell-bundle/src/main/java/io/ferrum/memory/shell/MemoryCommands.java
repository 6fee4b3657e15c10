package io.ferrum.memory.shell;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Dictionary;
import java.util.Hashtable;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.TreeMap;
import java.util.concurrent.CompletionException;
import java.util.concurrent.TimeUnit;

import org.apache.felix.service.command.Descriptor;
import org.apache.felix.service.command.Parameter;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;
import org.osgi.framework.InvalidSyntaxException;
import org.osgi.framework.ServiceReference;
import org.osgi.service.cm.Configuration;
import org.osgi.service.cm.ConfigurationAdmin;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.AllocationStrategy;
import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryRouter;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.api.StreamManager;

/**
 * The {@code mem:*} Gogo commands. Every service they use is optional: without the monitor the
 * commands say what to start, and the rest of the system never depends on this bundle. A command
 * that fails prints one line, {@code error: <message>}, and the shell goes on.
 */
@Component(service = MemoryCommands.class, property = {
    "osgi.command.scope=mem",
    "osgi.command.function=devices", "osgi.command.function=info", "osgi.command.function=alloc",
    "osgi.command.function=free", "osgi.command.function=handles", "osgi.command.function=copy",
    "osgi.command.function=fill", "osgi.command.function=dump", "osgi.command.function=map",
    "osgi.command.function=unmap", "osgi.command.function=strategies", "osgi.command.function=strategy",
    "osgi.command.function=pressure", "osgi.command.function=defrag", "osgi.command.function=gc",
    "osgi.command.function=pool", "osgi.command.function=streams", "osgi.command.function=backends"})
public final class MemoryCommands {
    /** Manifest header that marks a device backend bundle, with the device kind it serves. */
    static final String BACKEND_HEADER = "Ferrum-Backend";
    private static final String MONITOR_PID = "io.ferrum.memory.monitor";

    private final BundleContext context;

    @Reference(cardinality = ReferenceCardinality.OPTIONAL, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY)
    private volatile GlobalMemoryMonitor monitor;

    @Reference(cardinality = ReferenceCardinality.OPTIONAL, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY)
    private volatile MemoryRouter router;

    @Reference(cardinality = ReferenceCardinality.OPTIONAL, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY)
    private volatile ConfigurationAdmin configAdmin;

    @Activate
    public MemoryCommands(BundleContext context) {
        this.context = context;
    }

    // ================================================================ plumbing

    private interface Body {
        void run() throws Exception;
    }

    /** Runs a command body: a failure becomes one line, never a stack trace. */
    private static void run(Body body) {
        try {
            body.run();
        } catch (CompletionException e) {
            System.out.println("error: " + message(e.getCause() != null ? e.getCause() : e));
        } catch (MemoryException | IllegalArgumentException | IllegalStateException | IOException
                 | InvalidSyntaxException | UnsupportedOperationException | IndexOutOfBoundsException e) {
            System.out.println("error: " + message(e));
        } catch (Exception e) {
            System.out.println("error: " + message(e));
        }
    }

    private static String message(Throwable e) {
        return e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName();
    }

    private GlobalMemoryMonitor monitor() {
        GlobalMemoryMonitor m = monitor;
        if (m == null) {
            throw new DeviceUnavailableException(null, "No memory monitor is running: start the bundle io.ferrum.memory.monitor");
        }
        return m;
    }

    private MemoryRouter router() {
        MemoryRouter r = router;
        if (r == null) {
            throw new DeviceUnavailableException(null, "No memory router is running: start the bundle io.ferrum.memory.monitor");
        }
        return r;
    }

    private DeviceMemoryManager manager(Device d) {
        return monitor().manager(d).orElseThrow(() -> new DeviceUnavailableException(d, "No device " + d
                + " is registered; mem:devices lists the devices there are"));
    }

    private AdvancedMemoryManager advanced(MemoryHandle h) {
        Device d = router().owner(h).orElseThrow(() -> new InvalidMemoryRequestException("Handle " + h
                + " is not known to any device (freed, or never allocated)"));
        if (!(manager(d) instanceof AdvancedMemoryManager a)) {
            throw new InvalidMemoryRequestException("The manager of " + d + " cannot map memory");
        }
        return a;
    }

    private String backendOf(Device d) {
        try {
            ServiceReference<?>[] refs = context.getServiceReferences(DeviceMemoryManager.class.getName(),
                    "(" + DeviceMemoryManager.DEVICE_PROPERTY + "=" + d + ")");
            return refs == null ? "-" : String.valueOf(refs[0].getProperty(DeviceMemoryManager.BACKEND_PROPERTY));
        } catch (InvalidSyntaxException e) {
            return "-";
        }
    }

    private static String percent(double ratio) {
        return String.format(Locale.ROOT, "%.1f%%", ratio);
    }

    // ================================================================ devices

    @Descriptor("List every memory device: backend, capacity, use, fragmentation and pressure")
    public void devices() {
        run(() -> {
            Map<Device, MemoryInfo> all = monitor().globalMemoryInfo();
            if (all.isEmpty()) {
                System.out.println("No memory devices. Start a backend bundle (mem:backends lists them).");
                return;
            }
            Table t = new Table("DEVICE", "BACKEND", "TOTAL", "USED", "FREE", "RESERVED", "ALLOCS", "FRAG", "PRESSURE");
            all.forEach((d, i) -> t.row(d, backendOf(d), Sizes.human(i.totalBytes()), Sizes.human(i.usedBytes()),
                    Sizes.human(i.freeBytes()), Sizes.human(i.reservedBytes()), i.activeAllocations(),
                    percent(i.fragmentationRatio() * 100), i.pressureLevel()));
            System.out.print(t);
        });
    }

    @Descriptor("Show everything known about every device")
    public void info() {
        run(() -> {
            for (Device d : new TreeMap<>(monitor().globalMemoryInfo()).keySet()) {
                printInfo(d);
            }
        });
    }

    @Descriptor("Show everything known about one device")
    public void info(@Descriptor("the device, e.g. cpu:0") String device) {
        run(() -> printInfo(Device.parse(device)));
    }

    private void printInfo(Device d) {
        DeviceMemoryManager m = manager(d);
        MemoryInfo i = m.memoryInfo();
        System.out.println(d + " (" + backendOf(d) + ")");
        System.out.println("  total        " + Sizes.human(i.totalBytes()) + " (" + i.totalBytes() + " bytes)");
        System.out.println("  used         " + Sizes.human(i.usedBytes()) + " (" + percent(i.utilizationPercent()) + ")");
        System.out.println("  free         " + Sizes.human(i.freeBytes()));
        System.out.println("  reserved     " + Sizes.human(i.reservedBytes()));
        System.out.println("  allocations  " + i.activeAllocations());
        System.out.println("  fragmentation " + percent(i.fragmentationRatio() * 100));
        System.out.println("  bandwidth    " + (i.bandwidthGbps().isPresent()
                ? String.format(Locale.ROOT, "%.2f GB/s", i.bandwidthGbps().getAsDouble()) : "not measured yet"));
        System.out.println("  pressure     " + i.pressureLevel());
    }

    // ================================================================ allocation

    @Descriptor("Allocate memory through the router (the active strategy picks the device); prints the handle")
    public void alloc(
            @Descriptor("memory type: GENERAL, TENSOR, CACHE, TEMPORARY, PINNED or MAPPED")
            @Parameter(names = {"-t", "--type"}, absentValue = "GENERAL") String type,
            @Descriptor("alignment in bytes, a power of two (0: the pool's)")
            @Parameter(names = {"-a", "--align"}, absentValue = "0") String align,
            @Descriptor("size: 4096, 64k, 64KiB, 512MiB, 2g") String size) {
        run(() -> {
            AllocationRequirements r = AllocationRequirements.defaults().withMemoryType(type(type));
            long a = Sizes.parse(align);
            if (a != 0) {
                r = r.withAlignment(a);
            }
            MemoryHandle h = router().allocate(Sizes.parse(size), r);
            System.out.println(h + " on " + router().owner(h).map(Device::toString).orElse("?"));
        });
    }

    @Descriptor("Allocate memory on one device; prints the handle")
    public void alloc(
            @Descriptor("memory type: GENERAL, TENSOR, CACHE, TEMPORARY, PINNED or MAPPED")
            @Parameter(names = {"-t", "--type"}, absentValue = "GENERAL") String type,
            @Descriptor("alignment in bytes, a power of two (0: the pool's)")
            @Parameter(names = {"-a", "--align"}, absentValue = "0") String align,
            @Descriptor("size: 4096, 64k, 64KiB, 512MiB, 2g") String size,
            @Descriptor("the device, e.g. cpu:1") String device) {
        run(() -> {
            Device d = Device.parse(device);
            DeviceMemoryManager m = manager(d);
            long a = Sizes.parse(align);
            MemoryHandle h = a == 0 ? m.allocate(Sizes.parse(size), type(type), d)
                    : m.allocateAligned(Sizes.parse(size), a, type(type), d);
            System.out.println(h + " on " + d);
        });
    }

    private static MemoryType type(String name) {
        try {
            return MemoryType.valueOf(name.strip().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new InvalidMemoryRequestException("Invalid memory type '" + name
                    + "': use GENERAL, TENSOR, CACHE, TEMPORARY, PINNED or MAPPED");
        }
    }

    @Descriptor("Free a block")
    public void free(@Descriptor("the handle, as mem:alloc printed it") String handle) {
        run(() -> {
            MemoryHandle h = MemoryHandle.parse(handle);
            router().deallocate(h);
            System.out.println("freed " + h);
        });
    }

    @Descriptor("List the live blocks of every device")
    public void handles() {
        run(() -> printHandles(new TreeMap<>(monitor().globalMemoryInfo()).keySet()));
    }

    @Descriptor("List the live blocks of one device")
    public void handles(@Descriptor("the device, e.g. cpu:0") String device) {
        run(() -> printHandles(List.of(Device.parse(device))));
    }

    private void printHandles(Collection<Device> devices) {
        Table t = new Table("HANDLE", "DEVICE", "SIZE", "TYPE", "ALIGN", "MAPPED", "AGE");
        Instant now = Instant.now();
        for (Device d : devices) {
            for (MemoryHandleInfo i : manager(d).handles()) {
                Duration age = Duration.between(i.allocatedAt(), now);
                t.row(i.handle(), d, Sizes.human(i.size()), i.memoryType(), i.alignment(), i.mapped() ? "yes" : "no",
                        age.toSeconds() + "s");
            }
        }
        System.out.print(t.isEmpty() ? "No live blocks." + System.lineSeparator() : t.toString());
    }

    // ================================================================ bytes

    @Descriptor("Copy bytes between two blocks, on one device or across devices")
    public void copy(@Descriptor("source handle") String src, @Descriptor("destination handle") String dst,
                     @Descriptor("bytes to copy, e.g. 4k") String size) {
        copy(src, dst, size, "0", "0");
    }

    @Descriptor("Copy bytes between two blocks, from an offset in the source")
    public void copy(@Descriptor("source handle") String src, @Descriptor("destination handle") String dst,
                     @Descriptor("bytes to copy") String size, @Descriptor("source offset") String srcOffset) {
        copy(src, dst, size, srcOffset, "0");
    }

    @Descriptor("Copy bytes between two blocks, from and to offsets")
    public void copy(@Descriptor("source handle") String src, @Descriptor("destination handle") String dst,
                     @Descriptor("bytes to copy") String size, @Descriptor("source offset") String srcOffset,
                     @Descriptor("destination offset") String dstOffset) {
        run(() -> {
            MemoryTransfer t = new MemoryTransfer(MemoryHandle.parse(src), MemoryHandle.parse(dst), Sizes.parse(size),
                    Sizes.parse(srcOffset), Sizes.parse(dstOffset));
            router().copy(t);
            System.out.println("copied " + t.size() + " bytes " + t.src() + "+" + t.srcOffset() + " -> " + t.dst() + "+"
                    + t.dstOffset());
        });
    }

    @Descriptor("Set every byte of a block to one value")
    public void fill(@Descriptor("the handle") String handle, @Descriptor("the byte: 0-255, or 0x00-0xff") String value) {
        run(() -> {
            MemoryHandle h = MemoryHandle.parse(handle);
            byte b = parseByte(value);
            AdvancedMemoryManager m = advanced(h);
            boolean wasMapped = m.handleInfo(h).map(MemoryHandleInfo::mapped).orElse(false);
            MemorySegment s = m.mapMemory(h, MemoryAccess.WRITE_ONLY);
            try {
                s.fill(b);
            } finally {
                if (!wasMapped) {
                    m.unmapMemory(h);
                }
            }
            System.out.println("filled " + s.byteSize() + " bytes of " + h + " with " + String.format("0x%02x", b));
        });
    }

    private static byte parseByte(String text) {
        try {
            String t = text.strip().toLowerCase(Locale.ROOT);
            int v = t.startsWith("0x") ? Integer.parseInt(t.substring(2), 16) : Integer.parseInt(t);
            if (v < 0 || v > 255) {
                throw new NumberFormatException();
            }
            return (byte) v;
        } catch (NumberFormatException e) {
            throw new InvalidMemoryRequestException("Invalid byte '" + text + "': use 0-255 or 0x00-0xff");
        }
    }

    @Descriptor("Show a block's first bytes in hex")
    public void dump(@Descriptor("the handle") String handle) {
        dump(handle, "0", "256");
    }

    @Descriptor("Show a block's bytes in hex from an offset")
    public void dump(@Descriptor("the handle") String handle, @Descriptor("offset") String offset) {
        dump(handle, offset, "256");
    }

    @Descriptor("Show a range of a block's bytes in hex")
    public void dump(@Descriptor("the handle") String handle, @Descriptor("offset") String offset,
                     @Descriptor("bytes to show (at most to the end of the block)") String length) {
        run(() -> {
            MemoryHandle h = MemoryHandle.parse(handle);
            AdvancedMemoryManager m = advanced(h);
            boolean wasMapped = m.handleInfo(h).map(MemoryHandleInfo::mapped).orElse(false);
            MemorySegment s = m.mapMemory(h, MemoryAccess.READ_ONLY);
            try {
                long from = Sizes.parse(offset);
                if (from > s.byteSize()) {
                    throw new InvalidMemoryRequestException("Offset " + from + " is past the end of " + h + " ("
                            + s.byteSize() + " bytes)");
                }
                long n = Math.min(Sizes.parse(length), s.byteSize() - from);
                System.out.print(hex(s, from, n));
            } finally {
                if (!wasMapped) {
                    m.unmapMemory(h);
                }
            }
        });
    }

    static String hex(MemorySegment s, long from, long n) {
        StringBuilder sb = new StringBuilder();
        for (long line = 0; line < n; line += 16) {
            StringBuilder ascii = new StringBuilder();
            sb.append(String.format("%08x ", from + line));
            for (int i = 0; i < 16; i++) {
                if (line + i < n) {
                    int v = s.get(ValueLayout.JAVA_BYTE, from + line + i) & 0xff;
                    sb.append(String.format(" %02x", v));
                    ascii.append(v >= 32 && v < 127 ? (char) v : '.');
                } else {
                    sb.append("   ");
                }
            }
            sb.append("  |").append(ascii).append('|').append(System.lineSeparator());
        }
        return sb.toString();
    }

    @Descriptor("Map a block for CPU access (it stays mapped, and is not moved, until mem:unmap)")
    public void map(@Descriptor("the handle") String handle) {
        map(handle, "READ_WRITE");
    }

    @Descriptor("Map a block for CPU access with an access mode")
    public void map(@Descriptor("the handle") String handle,
                    @Descriptor("READ_ONLY, WRITE_ONLY or READ_WRITE") String access) {
        run(() -> {
            MemoryHandle h = MemoryHandle.parse(handle);
            MemoryAccess a;
            try {
                a = MemoryAccess.valueOf(access.strip().toUpperCase(Locale.ROOT));
            } catch (IllegalArgumentException e) {
                throw new InvalidMemoryRequestException("Invalid access '" + access + "': use READ_ONLY, WRITE_ONLY or READ_WRITE");
            }
            MemorySegment s = advanced(h).mapMemory(h, a);
            System.out.println("mapped " + h + " " + a + ": " + s.byteSize() + " bytes at 0x" + Long.toHexString(s.address()));
        });
    }

    @Descriptor("Unmap a block: every view of it is closed")
    public void unmap(@Descriptor("the handle") String handle) {
        run(() -> {
            MemoryHandle h = MemoryHandle.parse(handle);
            advanced(h).unmapMemory(h);
            System.out.println("unmapped " + h);
        });
    }

    // ================================================================ strategies

    @Descriptor("List the allocation strategies present; * marks the active one")
    public void strategies() {
        run(() -> {
            Optional<String> active = router == null ? Optional.empty() : router.activeStrategy();
            Table t = new Table("", "STRATEGY", "RANKING", "BUNDLE");
            for (ServiceReference<AllocationStrategy> ref : context.getServiceReferences(AllocationStrategy.class, null)) {
                Object name = ref.getProperty(AllocationStrategy.NAME_PROPERTY);
                Object ranking = ref.getProperty(Constants.SERVICE_RANKING);
                t.row(active.isPresent() && active.get().equals(name) ? "*" : "", name, ranking == null ? 0 : ranking,
                        ref.getBundle().getSymbolicName());
            }
            System.out.print(t.isEmpty() ? "No allocation strategy is present: install a strategy bundle." + System.lineSeparator()
                    : t.toString());
        });
    }

    @Descriptor("Show the active allocation strategy")
    public void strategy() {
        run(() -> System.out.println(router().activeStrategy().map(n -> "active strategy: " + n)
                .orElse("no strategy is present: allocation through the router fails")));
    }

    @Descriptor("Switch the allocation strategy (saved in the monitor's configuration)")
    public void strategy(@Descriptor("the strategy's name, e.g. best-fit, most-free, preferred-order, round-robin") String name) {
        run(() -> {
            ConfigurationAdmin ca = configAdmin;
            if (ca == null) {
                throw new DeviceUnavailableException(null, "Config Admin is not running: the strategy cannot be saved");
            }
            boolean present = !context.getServiceReferences(AllocationStrategy.class,
                    "(" + AllocationStrategy.NAME_PROPERTY + "=" + name + ")").isEmpty();
            Configuration c = ca.getConfiguration(MONITOR_PID, "?");
            Dictionary<String, Object> p = c.getProperties() != null ? c.getProperties() : new Hashtable<>();
            p.put("strategy", name);
            c.update(p);
            if (present) {
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
                while (!router().activeStrategy().equals(Optional.of(name)) && System.nanoTime() < deadline) {
                    Thread.sleep(10);
                }
                System.out.println("active strategy: " + router().activeStrategy().orElse("none"));
            } else {
                System.out.println("strategy " + name + " saved, but no such strategy is present; the router uses "
                        + router().activeStrategy().orElse("none") + " until it appears");
            }
        });
    }

    // ================================================================ pressure, defragmentation

    @Descriptor("Show the memory pressure of every device and overall")
    public void pressure() {
        run(() -> {
            Table t = new Table("DEVICE", "USED", "UTILISATION", "PRESSURE");
            monitor().globalMemoryInfo().forEach((d, i) -> t.row(d, Sizes.human(i.usedBytes()),
                    percent(i.utilizationPercent()), i.pressureLevel()));
            System.out.print(t);
            System.out.println("overall: " + monitor().globalMemoryPressure());
        });
    }

    @Descriptor("Defragment every device, one after the other")
    public void defrag() {
        run(() -> {
            for (Device d : new TreeMap<>(monitor().globalMemoryInfo()).keySet()) {
                printStats(d, manager(d).defragment(d).toCompletableFuture().join());
            }
        });
    }

    @Descriptor("Defragment one device")
    public void defrag(@Descriptor("the device, e.g. cpu:0") String device) {
        run(() -> {
            Device d = Device.parse(device);
            printStats(d, manager(d).defragment(d).toCompletableFuture().join());
        });
    }

    @Descriptor("Defragment and trim every device at once (the monitor's global GC)")
    public void gc() {
        run(() -> {
            Map<Device, DefragmentationStats> all = monitor().globalGc().toCompletableFuture().join();
            all.forEach(MemoryCommands::printStats);
        });
    }

    private static void printStats(Device d, DefragmentationStats s) {
        System.out.println(String.format(Locale.ROOT, "%s: moved %d blocks, freed %s, fragmentation %.1f%% -> %.1f%%, %d ms",
                d, s.blocksMoved(), Sizes.human(s.memoryFreed()), s.fragmentationBefore() * 100,
                s.fragmentationAfter() * 100, s.timeTakenMs()));
    }

    // ================================================================ pools

    @Descriptor("Show the GENERAL pool of a device")
    public void pool(@Descriptor("the device, e.g. cpu:0") String device) {
        run(() -> printPool(Device.parse(device), MemoryType.GENERAL));
    }

    @Descriptor("Show one pool of a device, or change it with key=value settings (not saved: the next restart of"
            + " the device uses its configuration): initialSize, maxSize (0: unlimited), growthIncrement,"
            + " autoExpansion, alignment, preAllocate, stats")
    public void pool(@Descriptor("the device, e.g. cpu:0") String device,
                     @Descriptor("the memory type, e.g. GENERAL") String type,
                     @Descriptor("settings, e.g. maxSize=1g growthIncrement=64m") String... settings) {
        run(() -> {
            Device d = Device.parse(device);
            MemoryType t = type(type);
            if (settings.length > 0) {
                DeviceMemoryManager m = manager(d);
                MemoryPoolConfig.Builder b = m.poolConfig(t).toBuilder();
                for (String kv : settings) {
                    apply(b, kv);
                }
                m.configurePool(d, t, b.build());
            }
            printPool(d, t);
        });
    }

    private static void apply(MemoryPoolConfig.Builder b, String kv) {
        int eq = kv.indexOf('=');
        if (eq <= 0) {
            throw new InvalidMemoryRequestException("Invalid setting '" + kv + "': use key=value, e.g. maxSize=1g");
        }
        String key = kv.substring(0, eq).strip();
        String value = kv.substring(eq + 1).strip();
        switch (key) {
            case "initialSize" -> b.initialSize(Sizes.parse(value));
            case "maxSize" -> {
                long v = Sizes.parse(value);
                if (v == 0) {
                    b.unlimited();
                } else {
                    b.maxSize(v);
                }
            }
            case "growthIncrement" -> b.growthIncrement(Sizes.parse(value));
            case "autoExpansion" -> b.autoExpansion(bool(key, value));
            case "alignment" -> b.alignment(Sizes.parse(value));
            case "preAllocate" -> b.preAllocate(bool(key, value));
            case "stats" -> b.stats(bool(key, value));
            default -> throw new InvalidMemoryRequestException("Unknown pool setting '" + key + "': use initialSize,"
                    + " maxSize, growthIncrement, autoExpansion, alignment, preAllocate or stats");
        }
    }

    private static boolean bool(String key, String value) {
        return switch (value.toLowerCase(Locale.ROOT)) {
            case "true", "yes", "on" -> true;
            case "false", "no", "off" -> false;
            default -> throw new InvalidMemoryRequestException("Invalid " + key + " '" + value + "': use true or false");
        };
    }

    private void printPool(Device d, MemoryType t) {
        MemoryPoolConfig c = manager(d).poolConfig(t);
        OptionalLong max = c.maxSize();
        System.out.println(d + " " + t + " pool");
        System.out.println("  initialSize      " + Sizes.human(c.initialSize()));
        System.out.println("  maxSize          " + (max.isPresent() ? Sizes.human(max.getAsLong()) : "unlimited"));
        System.out.println("  growthIncrement  " + Sizes.human(c.growthIncrement()));
        System.out.println("  autoExpansion    " + c.enableAutoExpansion());
        System.out.println("  alignment        " + c.alignment());
        System.out.println("  preAllocate      " + c.preAllocate());
        System.out.println("  stats            " + c.enableStats());
    }

    // ================================================================ streams, backends

    @Descriptor("List the streams of every device")
    public void streams() {
        run(() -> {
            Table t = new Table("DEVICE", "STREAM", "STATE");
            for (ServiceReference<StreamManager> ref : context.getServiceReferences(StreamManager.class, null)) {
                StreamManager s = context.getService(ref);
                if (s == null) {
                    continue;
                }
                try {
                    for (StreamHandle h : s.streams()) {
                        t.row(s.device(), h.isDefault() ? "default" : Long.toString(h.id()),
                                s.isStreamReady(h) ? "ready" : "busy");
                    }
                } finally {
                    context.ungetService(ref);
                }
            }
            System.out.print(t.isEmpty() ? "No stream managers are registered." + System.lineSeparator() : t.toString());
        });
    }

    @Descriptor("List the device backend bundles with their state, their devices, and why an inactive one is inactive")
    public void backends() {
        run(() -> {
            Table t = new Table("ID", "BACKEND", "KIND", "STATE", "DEVICES", "NOTE");
            for (Bundle b : context.getBundles()) {
                String kind = b.getHeaders().get(BACKEND_HEADER);
                if (kind == null) {
                    continue;
                }
                List<String> devices = new ArrayList<>();
                ServiceReference<?>[] refs = b.getRegisteredServices();
                if (refs != null) {
                    for (ServiceReference<?> r : refs) {
                        Object objectClass = r.getProperty(Constants.OBJECTCLASS);
                        if (objectClass instanceof String[] names && List.of(names).contains(DeviceMemoryManager.class.getName())) {
                            devices.add(String.valueOf(r.getProperty(DeviceMemoryManager.DEVICE_PROPERTY)));
                        }
                    }
                }
                devices.sort(null);
                t.row(b.getBundleId(), b.getSymbolicName(), kind, state(b), devices.isEmpty() ? "-" : String.join(",", devices),
                        note(b, devices));
            }
            System.out.print(t.isEmpty() ? "No backend bundles are installed (bundles with a " + BACKEND_HEADER
                    + " header); install one, e.g. io.ferrum.memory.cpu." + System.lineSeparator() : t.toString());
        });
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

    private static String note(Bundle b, List<String> devices) {
        String reason = b.getHeaders().get(BACKEND_HEADER + "-Inactive-Reason");
        return switch (b.getState()) {
            case Bundle.INSTALLED -> "not resolved: a requirement is missing (see the framework log, or 'diag " + b.getBundleId() + "')";
            case Bundle.RESOLVED -> "stopped: start it with 'start " + b.getBundleId() + "'";
            case Bundle.ACTIVE -> devices.isEmpty() ? (reason != null ? reason : "active, but no device found (see the log)") : "";
            default -> "";
        };
    }
}
