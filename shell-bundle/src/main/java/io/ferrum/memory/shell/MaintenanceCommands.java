package io.ferrum.memory.shell;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;

import io.ferrum.memory.api.DefragmentationStats;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryType;

/**
 * The maintenance commands: {@code mem:defrag} (one device, or each in turn), {@code mem:gc} (the
 * monitor's global GC) and {@code mem:pool} (show a pool's configuration, or change it at run time
 * with {@code key=value} settings, not saved).
 */
@Component(service = MaintenanceCommands.class)
@MemCommand(function = {"defrag", "gc", "pool"})
public final class MaintenanceCommands {

    @Reference(cardinality = ReferenceCardinality.OPTIONAL, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY)
    volatile GlobalMemoryMonitor monitor;

    private static final Syntax DEFRAG = Syntax.of("defrag").optional("DEVICE");
    private static final Syntax GC = Syntax.of("gc");
    private static final Syntax POOL = Syntax.of("pool").required("DEVICE").optional("TYPE").rest("KEY=VALUE");

    @Descriptor("Defragment every device, one after the other (Ctrl-C stops before the next), or one: mem:defrag [DEVICE]")
    public Reply defrag(@Descriptor("[DEVICE], e.g. cpu:0") String... args) {
        return Reply.attempt("defrag", () -> {
            String device = DEFRAG.parse(args).get("DEVICE", null);
            if (device != null) {
                Device d = Device.parse(device);
                return Reply.line(stats(d, Services.manager(monitor, d).defragment(d).toCompletableFuture().join()));
            }
            // Each in turn; a device that fails gets its error line and the others are still defragmented.
            GlobalMemoryMonitor mon = Services.monitor(monitor);
            List<String> lines = new ArrayList<>();
            List<Device> devices = new ArrayList<>(new TreeSet<>(mon.devices()));
            for (int k = 0; k < devices.size(); k++) {
                Device d = devices.get(k);
                if (Thread.currentThread().isInterrupted()) {
                    // Ctrl-C: stop before the next device (each may take minutes), say which were left;
                    // the interrupt stays set for the shell, as mem:fill leaves it.
                    List<Device> left = devices.subList(k, devices.size());
                    lines.add(Reply.Failure.counted("interrupted: " + left.stream().map(Device::toString)
                            .collect(java.util.stream.Collectors.joining(", ")) + (left.size() == 1 ? " was" : " were")
                            + " not defragmented").toString());
                    break;
                }
                Optional<DeviceMemoryManager> m = mon.manager(d);
                if (m.isPresent()) { // else gone since devices() answered
                    try {
                        lines.add(stats(d, m.get().defragment(d).toCompletableFuture().join()));
                    } catch (RuntimeException e) {
                        lines.add(failed("Defragmenting", d, e));
                    }
                }
            }
            return lines.isEmpty() ? Reply.line("No memory devices: nothing to defragment. " + Services.START_A_BACKEND)
                    : Reply.lines(lines);
        });
    }

    @Descriptor("Defragment and trim every device at once, as the monitor's global GC does (mem:gc); a device that"
            + " fails gets an error line saying why, and the others are still collected")
    public Reply gc(@Descriptor("none") String... args) {
        return Reply.attempt("gc", () -> {
            GC.parse(args);
            GlobalMemoryMonitor mon = Services.monitor(monitor);
            // Every device at once, as GlobalMemoryMonitor.globalGc does (each active manager's defragment on a
            // thread of its own; one that fails fails no other), but not through globalGc: its result holds only
            // the devices that succeeded, and the exception of one that failed goes to the monitor's log alone.
            // From that result the shell could say which device failed but never why, and the reply must say
            // both (the error line below); defragmenting a missing device again to learn why would collect it
            // twice and could give another reason. Calling globalGc needs an API that returns the failures.
            Map<Device, Future<DefragmentationStats>> runs = new TreeMap<>();
            try (ExecutorService each = Executors.newVirtualThreadPerTaskExecutor()) {
                for (Device d : mon.devices()) {
                    // A device gone since devices() answered is not collected, as globalGc would not.
                    mon.manager(d).ifPresent(m -> runs.put(d, each.submit(() -> m.defragment(d).toCompletableFuture().join())));
                }
            }
            List<String> lines = new ArrayList<>();
            runs.forEach((d, run) -> {
                try {
                    lines.add(stats(d, run.get()));
                } catch (ExecutionException e) {
                    lines.add(failed("Collecting", d, e.getCause()));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    lines.add(failed("Collecting", d, e));
                }
            });
            return lines.isEmpty() ? Reply.line("No memory devices: nothing to collect. " + Services.START_A_BACKEND)
                    : Reply.lines(lines);
        });
    }

    /**
     * The {@code error:} line of one device of several that failed (it counts as a failed command),
     * e.g. {@code error: Collecting cpu:1 failed: <why>; the other devices went on}.
     */
    private static String failed(String doing, Device d, Throwable why) {
        if (why instanceof CompletionException && why.getCause() != null) {
            why = why.getCause();
        }
        String message = why.getMessage() != null ? ShellWording.of(why.getMessage()) : why.getClass().getSimpleName();
        if (why instanceof Error internal) {
            // As Reply says an Error of a command: its message alone (a class name) says not what happened.
            ShellLog.error(doing + " " + d + " failed with an internal error", internal);
            message = "internal error: " + internal.getClass().getSimpleName()
                    + (internal.getMessage() != null ? ": " + internal.getMessage() : "") + " (see the log)";
        }
        return Reply.Failure.counted(doing + " " + d + " failed: " + message + "; the other devices went on").toString();
    }

    private static String stats(Device d, DefragmentationStats s) {
        // Percentages as mem:devices and mem:info show them (rounded down): the same ratio reads the same.
        return String.format(Locale.ROOT, "%s: moved %d %s, freed %s, fragmentation %s -> %s, %d ms",
                d, s.blocksMoved(), s.blocksMoved() == 1 ? "block" : "blocks", Sizes.human(s.memoryFreed()),
                DeviceCommands.percent(s.fragmentationBefore() * 100), DeviceCommands.percent(s.fragmentationAfter() * 100),
                s.timeTakenMs());
    }

    @Descriptor("Show one pool of a device, or change it: mem:pool DEVICE [TYPE] [KEY=VALUE...] (TYPE: GENERAL by"
            + " default). Settings are not saved (the next restart of the device uses its configuration): initialSize,"
            + " maxSize (0: unlimited), growthIncrement, autoExpansion, alignment, preAllocate, stats")
    public Reply pool(@Descriptor("DEVICE [TYPE] [KEY=VALUE...], e.g. cpu:0 GENERAL maxSize=1g or cpu:0 maxSize=1g") String... args) {
        return Reply.attempt("pool", () -> {
            Syntax.Words w = POOL.parse(args);
            Device d = Device.parse(w.get("DEVICE"));
            String type = w.get("TYPE", MemoryType.GENERAL.name());
            List<String> settings = new ArrayList<>(w.rest());
            if (type.contains("=")) { // mem:pool cpu:0 maxSize=8g: no type, so the GENERAL pool, as the help says
                settings.add(0, type);
                type = MemoryType.GENERAL.name();
            }
            MemoryType t = Arguments.memoryType(type);
            if (!settings.isEmpty()) {
                DeviceMemoryManager m = Services.manager(monitor, d);
                MemoryPoolConfig.Builder b = m.poolConfig(t).toBuilder();
                Map<String, String> given = new HashMap<>();
                for (String kv : settings) {
                    once(given, kv);
                    apply(b, kv);
                }
                m.configurePool(d, t, b.build());
            }
            return pool(d, t);
        });
    }

    /**
     * Refuses a setting given twice ({@code maxSize=1g ... maxSize=2g}): which was meant? The shell
     * refuses an option given twice for the same reason, rather than take the last.
     *
     * @param given the settings seen so far, key to value; {@code kv}'s is added
     */
    private static void once(Map<String, String> given, String kv) {
        int eq = kv.indexOf('=');
        if (eq <= 0) {
            return; // apply names it
        }
        String key = kv.substring(0, eq).strip();
        String value = kv.substring(eq + 1).strip();
        String earlier = given.put(key, value);
        if (earlier != null) {
            throw new InvalidMemoryRequestException("Setting " + key + " is given twice ('" + earlier + "', then '" + value
                    + "'): give it once; nothing changed");
        }
    }

    private static void apply(MemoryPoolConfig.Builder b, String kv) {
        int eq = kv.indexOf('=');
        if (eq <= 0) {
            throw new InvalidMemoryRequestException("Invalid setting '" + kv + "': use key=value, e.g. maxSize=1g");
        }
        String key = kv.substring(0, eq).strip();
        String value = kv.substring(eq + 1).strip();
        switch (key) {
            case "initialSize" -> b.initialSize(Sizes.parse(key, value));
            case "maxSize" -> {
                long v = Sizes.parse(key, value);
                if (v == 0) {
                    b.unlimited();
                } else {
                    b.maxSize(v);
                }
            }
            case "growthIncrement" -> b.growthIncrement(Sizes.parse(key, value));
            case "autoExpansion" -> b.autoExpansion(Arguments.flag(key, value));
            case "alignment" -> b.alignment(Sizes.parse(key, value));
            case "preAllocate" -> b.preAllocate(Arguments.flag(key, value));
            case "stats" -> b.stats(Arguments.flag(key, value));
            default -> throw new InvalidMemoryRequestException("Unknown pool setting '" + key + "': use initialSize,"
                    + " maxSize, growthIncrement, autoExpansion, alignment, preAllocate or stats");
        }
    }

    private Reply pool(Device d, MemoryType t) {
        MemoryPoolConfig c = Services.manager(monitor, d).poolConfig(t);
        OptionalLong max = c.maxSize();
        return Reply.lines(List.of(
                d + " " + t + " pool",
                "  initialSize      " + Sizes.human(c.initialSize()),
                "  maxSize          " + (max.isPresent() ? Sizes.human(max.getAsLong()) : "unlimited"),
                "  growthIncrement  " + Sizes.human(c.growthIncrement()),
                "  autoExpansion    " + c.enableAutoExpansion(),
                "  alignment        " + c.alignment(),
                "  preAllocate      " + c.preAllocate(),
                "  stats            " + c.enableStats()));
    }
}
