package io.ferrum.memory.itests;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertTrue;
import static org.ops4j.pax.exam.CoreOptions.options;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Hashtable;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import javax.inject.Inject;

import org.apache.felix.service.command.CommandProcessor;
import org.apache.felix.service.command.CommandSession;
import org.apache.felix.service.command.Converter;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.ops4j.pax.exam.Configuration;
import org.ops4j.pax.exam.Option;
import org.ops4j.pax.exam.junit.PaxExam;
import org.ops4j.pax.exam.spi.reactors.ExamReactorStrategy;
import org.ops4j.pax.exam.spi.reactors.PerMethod;
import org.osgi.framework.BundleContext;
import org.osgi.framework.ServiceReference;
import org.osgi.service.cm.ConfigurationAdmin;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.EventHandle;
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.InvalidHandleException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryManagerConfig;
import io.ferrum.memory.api.MemoryManagerFactory;
import io.ferrum.memory.api.MemoryPoolConfig;
import io.ferrum.memory.api.MemoryRouter;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.api.MemoryUsageHint;
import io.ferrum.memory.api.OutOfDeviceMemoryException;
import io.ferrum.memory.api.StreamHandle;
import io.ferrum.memory.api.StreamManager;

/**
 * The bad-input matrix: what a user gets wrong, against the real services of a running system
 * (managers of cpu:0 and cpu:1, streams, the factory, the router, the monitor and the {@code mem:*}
 * commands). Each row is refused with the documented exception (a command: with one {@code error:}
 * line), its message names the bad value, and the memory figures of every device are the same
 * before and after the call (bandwidth aside).
 *
 * <p>Rows that fail today because of a defect are listed in {@link #KNOWN_DEFECTS}: the matrix still
 * runs them and prints what they showed; a listed row that passes fails the matrix, so that the list
 * stays honest (a fix removes its rows from the list). {@link #theRowsOfKnownDefectsPass} runs them
 * alone, ignored with its reason until they are fixed. (Per-row skips through {@code Assume} would
 * not show: Pax Exam reports an assumption that fails inside the container as a pass.)
 */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerMethod.class)
public class BadInputIT {
    private static final Device CPU0 = Device.cpu(0);
    private static final Device CPU1 = Device.cpu(1);
    private static final long BLOCK = 4096;
    /** An id no stream, event or handle has here. */
    private static final long UNKNOWN = 987654;
    private static final long MiB = 1 << 20;

    /**
     * Rows that fail today, with the defect they show: none since the fixes of issue 13 (defects 6,
     * 22 and 23, and the router's cross-device copyAsync that ignored its stream). Defect 6 was fixed
     * by honouring a pool alignment above the chunks' (EngineRacesTest), so its rows left the matrix.
     */
    private static final Map<String, String> KNOWN_DEFECTS = Map.of();

    /** The objects a row works on, made afresh before each row. */
    static final class Fixture {
        AdvancedMemoryManager cpu0;
        AdvancedMemoryManager cpu1;
        StreamManager streams;
        MemoryManagerFactory factory;
        ServiceReference<MemoryManagerFactory> factoryRef;
        MemoryRouter router;
        GlobalMemoryMonitor monitor;
        ServiceReference<GlobalMemoryMonitor> monitorRef;
        CommandProcessor shell;
        /** A live block of {@value BLOCK} bytes on cpu:0. */
        MemoryHandle live;
        /** A handle of cpu:0 whose block was freed. */
        MemoryHandle freed;
        /** A live block of {@value BLOCK} bytes on cpu:1. */
        MemoryHandle foreign;
        /** A live stream of cpu:0, and an event recorded on it. */
        StreamHandle stream;
        EventHandle event;
        /** A stream of cpu:0 that was destroyed. */
        StreamHandle destroyed;
        /** Blocks a row's preparation allocated, freed after the row. */
        final List<MemoryHandle> extra = new ArrayList<>();

        /** @return {@code text} with {live}, {freed}, {foreign}, {stream} and {destroyed} replaced */
        String expand(String text) {
            return text.replace("{live}", live.toString()).replace("{freed}", freed.toString())
                    .replace("{foreign}", foreign.toString()).replace("{stream}", Long.toString(stream.id()))
                    .replace("{destroyed}", Long.toString(destroyed.id()));
        }

        /** @return what the Gogo shell shows for a command: what it printed, then its value as the shell formats it */
        String run(String command) throws Exception {
            ByteArrayOutputStream out = new ByteArrayOutputStream();
            PrintStream ps = new PrintStream(out, true, StandardCharsets.UTF_8);
            try (CommandSession session = shell.createSession(new ByteArrayInputStream(new byte[0]), ps, ps)) {
                Object value = session.execute(expand(command));
                if (value != null) {
                    ps.println(session.format(value, Converter.INSPECT));
                }
            }
            return out.toString(StandardCharsets.UTF_8);
        }
    }

    @FunctionalInterface
    interface Call {
        Object on(Fixture f) throws Exception;
    }

    @FunctionalInterface
    interface Preparation {
        void on(Fixture f) throws Exception;
    }

    /**
     * One row of the matrix.
     *
     * @param name     what the user does wrong
     * @param call     the call
     * @param expected the exception it must throw, or null for a shell command (one {@code error:} line)
     * @param value    what the message must contain: the bad value ({@link Fixture#expand} applies)
     * @param prepare  state the row needs before the figures are read, or null
     */
    record Row(String name, Call call, Class<? extends Throwable> expected, String value, Preparation prepare) {
    }

    private static final Map<String, Row> ROWS = new LinkedHashMap<>();

    private static void row(String name, Class<? extends Throwable> expected, String value, Call call) {
        row(name, expected, value, null, call);
    }

    private static void row(String name, Class<? extends Throwable> expected, String value, Preparation prepare, Call call) {
        if (ROWS.put(name, new Row(name, call, expected, value, prepare)) != null) {
            throw new IllegalStateException("two rows named " + name);
        }
    }

    private static void shell(String command, String value) {
        shell(command, value, null);
    }

    private static void shell(String command, String value, Preparation prepare) {
        row("shell: " + command, null, value, prepare, f -> f.run(command));
    }

    /** Blocks cached by this thread beside a live one: a drain of the thread's cache moves the figures. */
    private static void cacheABlock(Fixture f) {
        MemoryHandle cached = f.cpu0.allocate(64 * 1024, CPU0);
        f.extra.add(f.cpu0.allocate(64 * 1024, CPU0));
        f.cpu0.deallocate(cached);
    }

    private static MemoryPoolConfig generalPool(Fixture f) {
        return f.cpu0.poolConfig(MemoryType.GENERAL);
    }

    static {
        // ============================================================ DeviceMemoryManager (cpu:0)
        row("manager: allocate 0 bytes", InvalidMemoryRequestException.class, "size 0",
                f -> f.cpu0.allocate(0, CPU0));
        row("manager: allocate -1 bytes", InvalidMemoryRequestException.class, "-1",
                f -> f.cpu0.allocate(-1, CPU0));
        row("manager: allocate Long.MIN_VALUE bytes", InvalidMemoryRequestException.class, "-9223372036854775808",
                f -> f.cpu0.allocate(Long.MIN_VALUE, CPU0));
        row("manager: allocate Long.MAX_VALUE bytes", InvalidMemoryRequestException.class, "9223372036854775807",
                f -> f.cpu0.allocate(Long.MAX_VALUE, CPU0));
        row("manager: allocate from a null memory type", InvalidMemoryRequestException.class, "null",
                f -> f.cpu0.allocate(BLOCK, null, CPU0));
        row("manager: allocate on a null device", InvalidMemoryRequestException.class, "null",
                f -> f.cpu0.allocate(BLOCK, (Device) null));
        row("manager: allocate on another cpu device", InvalidMemoryRequestException.class, "cpu:5",
                f -> f.cpu0.allocate(BLOCK, Device.cpu(5)));
        row("manager: allocate on a device of another kind", InvalidMemoryRequestException.class, "cuda:0",
                f -> f.cpu0.allocate(BLOCK, Device.cuda(0)));
        row("manager: allocateAligned to 3 bytes", InvalidMemoryRequestException.class, "alignment 3",
                f -> f.cpu0.allocateAligned(BLOCK, 3, CPU0));
        row("manager: allocateAligned to 0 bytes", InvalidMemoryRequestException.class, "alignment 0",
                f -> f.cpu0.allocateAligned(BLOCK, 0, CPU0));
        row("manager: allocateAligned to -256 bytes", InvalidMemoryRequestException.class, "-256",
                f -> f.cpu0.allocateAligned(BLOCK, -256, CPU0));
        row("manager: allocateAligned to Long.MIN_VALUE bytes", InvalidMemoryRequestException.class, "-9223372036854775808",
                f -> f.cpu0.allocateAligned(BLOCK, Long.MIN_VALUE, CPU0));
        row("manager: allocateAligned to 1 TiB, beyond every chunk", InvalidMemoryRequestException.class, "1099511627776",
                f -> f.cpu0.allocateAligned(BLOCK, 1L << 40, CPU0));
        row("manager: allocateAligned 0 bytes", InvalidMemoryRequestException.class, "size 0",
                f -> f.cpu0.allocateAligned(0, 256, CPU0));
        row("manager: free a null handle", InvalidHandleException.class, "null",
                f -> {
                    f.cpu0.deallocate(null);
                    return null;
                });
        row("manager: free the zero handle", InvalidHandleException.class, "zero handle",
                f -> {
                    f.cpu0.deallocate(MemoryHandle.INVALID);
                    return null;
                });
        row("manager: free a freed handle (a double free)", InvalidHandleException.class, "{freed}",
                f -> {
                    f.cpu0.deallocate(f.freed);
                    return null;
                });
        row("manager: free a handle of cpu:1", InvalidHandleException.class, "{foreign}",
                f -> {
                    f.cpu0.deallocate(f.foreign);
                    return null;
                });
        row("manager: free a handle never issued", InvalidHandleException.class, "0xffffffffffffffff",
                f -> {
                    f.cpu0.deallocate(new MemoryHandle(-1));
                    return null;
                });
        row("manager: copy more bytes than the blocks hold", InvalidMemoryRequestException.class, "4097",
                f -> {
                    f.cpu0.copy(f.live, f.live, BLOCK + 1, 0, 0);
                    return null;
                });
        row("manager: copy from source offset Long.MAX_VALUE", InvalidMemoryRequestException.class, "9223372036854775807",
                f -> {
                    f.cpu0.copy(f.live, f.live, 16, Long.MAX_VALUE, 0);
                    return null;
                });
        row("manager: copy Long.MAX_VALUE bytes", InvalidMemoryRequestException.class, "9223372036854775807",
                f -> {
                    f.cpu0.copy(f.live, f.live, Long.MAX_VALUE, 0, 0);
                    return null;
                });
        row("manager: copy -1 bytes", InvalidMemoryRequestException.class, "-1",
                f -> {
                    f.cpu0.copy(f.live, f.live, -1, 0, 0);
                    return null;
                });
        row("manager: copy to destination offset -5", InvalidMemoryRequestException.class, "-5",
                f -> {
                    f.cpu0.copy(f.live, f.live, 16, 0, -5);
                    return null;
                });
        row("manager: copy a range that ends past the destination", InvalidMemoryRequestException.class, "offset 4090",
                f -> {
                    f.cpu0.copy(f.live, f.live, 16, 0, 4090);
                    return null;
                });
        row("manager: copy from a freed handle", InvalidHandleException.class, "{freed}",
                f -> {
                    f.cpu0.copy(f.freed, f.live, 16, 0, 0);
                    return null;
                });
        row("manager: copy to a handle of cpu:1", InvalidHandleException.class, "{foreign}",
                f -> {
                    f.cpu0.copy(f.live, f.foreign, 16, 0, 0);
                    return null;
                });
        row("manager: copyAsync a null transfer", InvalidMemoryRequestException.class, "null",
                f -> f.cpu0.copyAsync(null, null));
        row("manager: copyAsync on an unknown stream", InvalidMemoryRequestException.class, "987654",
                f -> f.cpu0.copyAsync(MemoryTransfer.of(f.live, f.live, 16), new StreamHandle(UNKNOWN)));
        row("manager: copyAsync on a destroyed stream", InvalidMemoryRequestException.class, "stream {destroyed}",
                f -> f.cpu0.copyAsync(MemoryTransfer.of(f.live, f.live, 16), f.destroyed));
        row("manager: copyAsync past the destination's end", InvalidMemoryRequestException.class, "offset 4096",
                f -> f.cpu0.copyAsync(MemoryTransfer.of(f.live, f.live, 1).withDstOffset(BLOCK), null));
        row("manager: memoryInfo of another device", InvalidMemoryRequestException.class, "cpu:9",
                f -> f.cpu0.memoryInfo(Device.cpu(9)));
        row("manager: memoryInfo of a null device", InvalidMemoryRequestException.class, "null",
                f -> f.cpu0.memoryInfo(null));
        row("manager: configurePool with a null configuration", InvalidMemoryRequestException.class, "null",
                f -> {
                    f.cpu0.configurePool(CPU0, MemoryType.GENERAL, null);
                    return null;
                });
        row("manager: configurePool of a null memory type", InvalidMemoryRequestException.class, "null",
                f -> {
                    f.cpu0.configurePool(CPU0, null, generalPool(f));
                    return null;
                });
        row("manager: configurePool of another device", InvalidMemoryRequestException.class, "cpu:3",
                f -> {
                    f.cpu0.configurePool(Device.cpu(3), MemoryType.GENERAL, generalPool(f));
                    return null;
                });
        row("manager: configurePool with maxSize below the live blocks", InvalidMemoryRequestException.class, "1024 bytes",
                BadInputIT::cacheABlock, f -> {
                    f.cpu0.configurePool(CPU0, MemoryType.GENERAL, generalPool(f).toBuilder().initialSize(0).maxSize(1024).build());
                    return null;
                });
        row("manager: configurePool with initialSize beyond the device", InvalidMemoryRequestException.class,
                "1125899906842624", f -> {
                    f.cpu0.configurePool(CPU0, MemoryType.GENERAL, generalPool(f).toBuilder().initialSize(1L << 50).build());
                    return null;
                });
        row("manager: poolConfig of a null memory type", InvalidMemoryRequestException.class, "null",
                f -> f.cpu0.poolConfig(null));
        row("manager: defragment another device", InvalidMemoryRequestException.class, "cpu:2",
                f -> f.cpu0.defragment(Device.cpu(2)));

        // ============================================================ AdvancedMemoryManager (cpu:0)
        row("advanced: mapMemory with a null access", InvalidMemoryRequestException.class, "null",
                f -> f.cpu0.mapMemory(f.live, null));
        row("advanced: mapMemory a freed handle", InvalidHandleException.class, "{freed}",
                f -> f.cpu0.mapMemory(f.freed, MemoryAccess.READ_ONLY));
        row("advanced: mapMemory a handle of cpu:1", InvalidHandleException.class, "{foreign}",
                f -> f.cpu0.mapMemory(f.foreign, MemoryAccess.READ_ONLY));
        row("advanced: unmapMemory a block that is not mapped", InvalidMemoryRequestException.class, "{live}",
                f -> {
                    f.cpu0.unmapMemory(f.live);
                    return null;
                });
        row("advanced: createMapping to a null device", InvalidMemoryRequestException.class, "null",
                f -> f.cpu0.createMapping(CPU0, null, BLOCK));
        row("advanced: createMapping of 0 bytes", InvalidMemoryRequestException.class, "size 0",
                f -> f.cpu0.createMapping(CPU0, CPU1, 0));
        row("advanced: createMapping of -4096 bytes", InvalidMemoryRequestException.class, "-4096",
                f -> f.cpu0.createMapping(CPU0, CPU1, -BLOCK));
        row("advanced: createMapping with a device of another kind", InvalidMemoryRequestException.class, "cuda:0",
                f -> f.cpu0.createMapping(CPU0, Device.cuda(0), BLOCK));
        row("advanced: createMapping between two other devices", InvalidMemoryRequestException.class, "cpu:5",
                f -> f.cpu0.createMapping(Device.cpu(5), Device.cpu(6), BLOCK));
        row("advanced: prefetch to a null device", InvalidMemoryRequestException.class, "null",
                f -> {
                    f.cpu0.prefetch(f.live, null);
                    return null;
                });
        row("advanced: prefetch a freed handle", InvalidHandleException.class, "{freed}",
                f -> {
                    f.cpu0.prefetch(f.freed, CPU0);
                    return null;
                });
        row("advanced: setUsageHint null", InvalidMemoryRequestException.class, "null",
                f -> {
                    f.cpu0.setUsageHint(f.live, null);
                    return null;
                });
        row("advanced: setUsageHint on a freed handle", InvalidHandleException.class, "{freed}",
                f -> {
                    f.cpu0.setUsageHint(f.freed, MemoryUsageHint.SEQUENTIAL);
                    return null;
                });

        // ============================================================ StreamManager (cpu:0)
        row("streams: createStream for another device", InvalidMemoryRequestException.class, "cpu:1",
                f -> f.streams.createStream(CPU1));
        row("streams: createStream for a null device", InvalidMemoryRequestException.class, "null",
                f -> f.streams.createStream(null));
        row("streams: destroy the default stream", InvalidMemoryRequestException.class, "default stream",
                f -> {
                    f.streams.destroyStream(StreamHandle.DEFAULT);
                    return null;
                });
        row("streams: destroy an unknown stream", InvalidMemoryRequestException.class, "987654",
                f -> {
                    f.streams.destroyStream(new StreamHandle(UNKNOWN));
                    return null;
                });
        row("streams: destroy a destroyed stream", InvalidMemoryRequestException.class, "stream {destroyed}",
                f -> {
                    f.streams.destroyStream(f.destroyed);
                    return null;
                });
        row("streams: destroy a null stream", InvalidMemoryRequestException.class, "null",
                f -> {
                    f.streams.destroyStream(null);
                    return null;
                });
        row("streams: synchronize an unknown stream", InvalidMemoryRequestException.class, "987654",
                f -> f.streams.synchronizeStream(new StreamHandle(UNKNOWN)));
        row("streams: isStreamReady of an unknown stream", InvalidMemoryRequestException.class, "987654",
                f -> f.streams.isStreamReady(new StreamHandle(UNKNOWN)));
        row("streams: recordEvent on an unknown stream", InvalidMemoryRequestException.class, "987654",
                f -> f.streams.recordEvent(new StreamHandle(UNKNOWN)));
        row("streams: waitEvent on an unknown event", InvalidMemoryRequestException.class, "987654",
                f -> {
                    f.streams.waitEvent(f.stream, new EventHandle(UNKNOWN));
                    return null;
                });
        row("streams: waitEvent on a null event", InvalidMemoryRequestException.class, "null",
                f -> {
                    f.streams.waitEvent(f.stream, null);
                    return null;
                });
        row("streams: waitEvent on a stream's id, never recorded as an event", InvalidMemoryRequestException.class,
                "event {stream}", f -> {
                    f.streams.waitEvent(f.stream, new EventHandle(f.stream.id()));
                    return null;
                });
        row("streams: waitEvent on an unknown stream", InvalidMemoryRequestException.class, "987654",
                f -> {
                    f.streams.waitEvent(new StreamHandle(UNKNOWN), f.event);
                    return null;
                });
        row("streams: defaultStream of another device", InvalidMemoryRequestException.class, "cpu:4",
                f -> f.streams.defaultStream(Device.cpu(4)));

        // ============================================================ MemoryManagerFactory (cpu)
        row("factory: a manager for a cuda device", InvalidMemoryRequestException.class, "cuda:0",
                f -> f.factory.createMemoryManager(Device.cuda(0), MemoryManagerConfig.defaults()));
        row("factory: a manager for an unknown kind", InvalidMemoryRequestException.class, "tpu:0",
                f -> f.factory.createMemoryManager(new Device("tpu", 0), MemoryManagerConfig.defaults()));
        row("factory: a manager for a null device", InvalidMemoryRequestException.class, "null",
                f -> f.factory.createMemoryManager(null, MemoryManagerConfig.defaults()));
        row("factory: an advanced manager with a null configuration", InvalidMemoryRequestException.class, "null",
                f -> f.factory.createAdvancedMemoryManager(Device.cpu(7), null));
        row("factory: a stream manager for a rocm device", InvalidMemoryRequestException.class, "rocm:1",
                f -> f.factory.createStreamManager(Device.rocm(1)));
        row("factory: a manager that pre-allocates 1 PiB", OutOfDeviceMemoryException.class, "1125899906842624",
                f -> f.factory.createAdvancedMemoryManager(Device.cpu(7), MemoryManagerConfig.defaults()
                        .withPoolConfig(MemoryType.GENERAL, MemoryPoolConfig.builder().initialSize(1L << 50)
                                .preAllocate(true).build())));

        // ============================================================ MemoryRouter
        row("router: allocate 0 bytes", InvalidMemoryRequestException.class, "size 0",
                f -> f.router.allocate(0, AllocationRequirements.defaults()));
        row("router: allocate -7 bytes", InvalidMemoryRequestException.class, "-7",
                f -> f.router.allocate(-7, AllocationRequirements.defaults()));
        row("router: allocate with null requirements", InvalidMemoryRequestException.class, "null",
                f -> f.router.allocate(BLOCK, null));
        row("router: allocate Long.MAX_VALUE bytes", OutOfDeviceMemoryException.class, "9223372036854775807",
                f -> f.router.allocate(Long.MAX_VALUE, AllocationRequirements.defaults()));
        row("router: allocate aligned to 1 TiB", InvalidMemoryRequestException.class, "1099511627776",
                f -> f.router.allocate(BLOCK, AllocationRequirements.defaults().withAlignment(1L << 40)));
        row("router: free a null handle", InvalidHandleException.class, "null",
                f -> {
                    f.router.deallocate(null);
                    return null;
                });
        row("router: free the zero handle", InvalidHandleException.class, "zero handle",
                f -> {
                    f.router.deallocate(MemoryHandle.INVALID);
                    return null;
                });
        row("router: free a freed handle", InvalidHandleException.class, "{freed}",
                f -> {
                    f.router.deallocate(f.freed);
                    return null;
                });
        row("router: free a handle no device issued", InvalidHandleException.class, "0x7fffffffffffffff",
                f -> {
                    f.router.deallocate(new MemoryHandle(Long.MAX_VALUE));
                    return null;
                });
        row("router: copy a null transfer", InvalidMemoryRequestException.class, "null",
                f -> {
                    f.router.copy(null);
                    return null;
                });
        row("router: copy across devices more bytes than the blocks hold", InvalidMemoryRequestException.class, "5000",
                f -> {
                    f.router.copy(MemoryTransfer.of(f.live, f.foreign, 5000));
                    return null;
                });
        row("router: copy across devices from source offset Long.MAX_VALUE", InvalidMemoryRequestException.class,
                "9223372036854775807", f -> {
                    f.router.copy(MemoryTransfer.of(f.live, f.foreign, 16).withSrcOffset(Long.MAX_VALUE));
                    return null;
                });
        row("router: copy from a freed handle", InvalidHandleException.class, "{freed}",
                f -> {
                    f.router.copy(MemoryTransfer.of(f.freed, f.foreign, 16));
                    return null;
                });
        row("router: copyAsync within cpu:0 on an unknown stream", InvalidMemoryRequestException.class, "987654",
                f -> f.router.copyAsync(MemoryTransfer.of(f.live, f.live, 16), new StreamHandle(UNKNOWN)));
        row("router: copyAsync across devices on an unknown stream", InvalidMemoryRequestException.class, "987654",
                f -> f.router.copyAsync(MemoryTransfer.of(f.live, f.foreign, 16), new StreamHandle(UNKNOWN))
                        .toCompletableFuture().join());

        // ============================================================ GlobalMemoryMonitor
        row("monitor: registerManager for a null device", InvalidMemoryRequestException.class, "null",
                f -> {
                    f.monitor.registerManager(null, f.cpu0);
                    return null;
                });
        row("monitor: registerManager of cpu:0's manager as cpu:3", InvalidMemoryRequestException.class, "cpu:3",
                f -> {
                    f.monitor.registerManager(Device.cpu(3), f.cpu0);
                    return null;
                });

        // ============================================================ API values a caller builds
        row("api: Device.parse(\"gpu:x\")", InvalidMemoryRequestException.class, "gpu:x",
                f -> Device.parse("gpu:x"));
        row("api: a device kind in capitals", InvalidMemoryRequestException.class, "CPU",
                f -> new Device("CPU", 0));
        row("api: a negative device index", InvalidMemoryRequestException.class, "-1",
                f -> Device.cpu(-1));
        row("api: MemoryHandle.parse(\"0xZZ\")", InvalidMemoryRequestException.class, "0xZZ",
                f -> MemoryHandle.parse("0xZZ"));
        row("api: a pool alignment of 48", InvalidMemoryRequestException.class, "48",
                f -> MemoryPoolConfig.builder().alignment(48).build());
        row("api: a negative pool initialSize", InvalidMemoryRequestException.class, "-1",
                f -> MemoryPoolConfig.builder().initialSize(-1).build());
        row("api: a pool maxSize below its initialSize", InvalidMemoryRequestException.class, "maxSize 1024",
                f -> MemoryPoolConfig.builder().initialSize(2048).maxSize(1024).build());
        row("api: a pool growthIncrement of 0 with auto-expansion", InvalidMemoryRequestException.class, "growthIncrement is 0",
                f -> MemoryPoolConfig.builder().growthIncrement(0).build());
        row("api: an auto-GC threshold of 1.5", InvalidMemoryRequestException.class, "1.5",
                f -> MemoryManagerConfig.defaults().withAutoGc(true, 1.5));
        row("api: 0 concurrent transfers", InvalidMemoryRequestException.class, "maxConcurrentTransfers 0",
                f -> MemoryManagerConfig.defaults().withMaxConcurrentTransfers(0));
        row("api: requirements aligned to 3 bytes", InvalidMemoryRequestException.class, "alignment 3",
                f -> AllocationRequirements.defaults().withAlignment(3));
        row("api: a negative expected lifetime", InvalidMemoryRequestException.class, "PT-1S",
                f -> AllocationRequirements.defaults().withExpectedLifetime(Duration.ofSeconds(-1)));
        row("api: a transfer from a null handle", InvalidMemoryRequestException.class, "src=null",
                f -> MemoryTransfer.of(null, f.live, 16));
        row("api: a transfer of -3 bytes", InvalidMemoryRequestException.class, "-3",
                f -> new MemoryTransfer(f.live, f.live, -3, 0, 0));

        // ============================================================ mem:* commands
        shell("mem:alloc 12parsecs", "12parsecs");
        shell("mem:alloc 0", "size 0");
        shell("mem:alloc 99999999999999999999", "99999999999999999999");
        shell("mem:alloc 9223372036854775807t", "9223372036854775807t");
        shell("mem:alloc -a 3 4096", "alignment 3");
        shell("mem:alloc -t BOGUS 4096", "BOGUS");
        shell("mem:alloc 4096 gpu:x", "gpu:x");
        shell("mem:alloc 4096 cpu:8", "cpu:8");
        shell("mem:free 0xZZ", "0xZZ");
        shell("mem:free {freed}", "{freed}");
        shell("mem:free 0x0", "zero handle");
        shell("mem:copy {live} {live} 5000", "5000");
        shell("mem:copy {live} {live} 16 -1", "-1");
        shell("mem:fill {live} 300", "300");
        shell("mem:dump {live} 5000", "5000");
        shell("mem:map {live} SIDEWAYS", "SIDEWAYS");
        shell("mem:unmap {live}", "{live}");
        shell("mem:info cpu:9", "cpu:9");
        shell("mem:handles cpu:x", "cpu:x");
        shell("mem:pool cpu:0 GENERAL alignment=48", "48");
        shell("mem:pool cpu:0 GENERAL colour=blue", "colour");
        shell("mem:pool cpu:0 GENERAL maxSize=1k initialSize=2k", "maxSize 1024");
        shell("mem:pool cpu:0 GENERAL preAllocate=maybe", "maybe");
        shell("mem:pool cpu:0 GENERAL initialSize=0 maxSize=1k", "1024 bytes", BadInputIT::cacheABlock);
        shell("mem:pool cpu:0 WEIRD", "WEIRD");
        shell("mem:defrag cpu:7", "cpu:7");
        // Issue 17: wrong calls (one error line with the usage) and arguments named as what they are
        shell("mem:alloc", "usage: mem:alloc [-t TYPE] [-a ALIGN] SIZE [DEVICE]");
        shell("mem:alloc --size 4k", "Unknown option --size for mem:alloc");
        shell("mem:alloc 4k cpu:0 extra", "'extra'");
        shell("mem:alloc 4k -t", "Option -t of mem:alloc needs a value");
        shell("mem:free", "mem:free is missing HANDLE");
        shell("mem:free {live} {live}", "takes at most 1 argument");
        shell("mem:fill {live}", "mem:fill is missing VALUE");
        shell("mem:copy {live} {live} 16 0 0 0", "usage: mem:copy");
        shell("mem:write --hex {live} 0 00", "Unknown option --hex for mem:write");
        shell("mem:pool", "mem:pool is missing DEVICE");
        shell("mem:gc now", "mem:gc takes no arguments");
        shell("mem:alloc --align -8 4k", "Invalid alignment '-8'");
        shell("mem:dump {live} -1", "Invalid offset '-1'");
        shell("mem:dump {live} 0 -1", "Invalid length '-1'");
        shell("mem:copy {live} {live} 16 0 -1", "Invalid destination offset '-1'");
        shell("mem:pool cpu:0 GENERAL maxSize=lots", "Invalid maxSize 'lots'");
    }

    @Inject
    private BundleContext context;

    @Inject
    private ConfigurationAdmin configAdmin;

    @Configuration
    public Option[] config() {
        return options(FerrumOptions.wholeSystem(), FerrumOptions.reactorBundle("gogo"), FerrumOptions.reactorBundle("shell"),
                FerrumOptions.testSupport());
    }

    @Test
    public void everyBadInputIsRefusedNamingItsValueAndChangesNothing() throws Exception {
        assertTrue("the matrix has " + ROWS.size() + " rows", ROWS.size() >= 40);
        List<String> wrong = new ArrayList<>();
        for (Row row : ROWS.values()) {
            String observed = check(row);
            String defect = KNOWN_DEFECTS.get(row.name());
            if (defect == null && !observed.isEmpty()) {
                wrong.add(row.name() + ": " + observed);
            } else if (defect != null && observed.isEmpty()) {
                wrong.add(row.name() + ": passes now; remove it from KNOWN_DEFECTS (" + defect + ")");
            } else if (defect != null) {
                System.out.println("BadInputIT: known defect, row '" + row.name() + "' (" + defect + "): " + observed);
            }
        }
        assertEquals(wrong.size() + " of " + ROWS.size() + " rows", "", String.join(System.lineSeparator(), wrong));
    }

    /** @return what is wrong with how {@code row} was answered, or an empty string */
    private String check(Row row) throws Exception {
        Fixture f = fixture();
        MemoryPoolConfig generalBefore = f.cpu0.poolConfig(MemoryType.GENERAL);
        try {
            if (row.prepare() != null) {
                row.prepare().on(f);
            }
            Map<Device, List<Object>> before = figures(f);
            Object result = null;
            Throwable thrown = null;
            try {
                result = row.call().on(f);
            } catch (Throwable t) {
                thrown = t;
            }
            Map<Device, List<Object>> after = figures(f);
            if (result instanceof AutoCloseable created) {
                created.close(); // a manager the factory should not have made
            }

            List<String> wrong = new ArrayList<>();
            String value = f.expand(row.value());
            if (row.expected() != null) {
                if (thrown == null) {
                    wrong.add("no exception; it returned " + result);
                } else if (!row.expected().isInstance(thrown)) {
                    wrong.add("it threw " + RouterTraffic.stackOf(thrown) + "instead of " + row.expected().getSimpleName());
                } else if (thrown.getMessage() == null || !thrown.getMessage().contains(value)) {
                    wrong.add("the message does not name " + value + ": " + thrown.getMessage());
                }
            } else if (thrown != null) {
                wrong.add("the command threw " + RouterTraffic.stackOf(thrown));
            } else {
                String out = String.valueOf(result).strip();
                if (!out.startsWith("error: ") || out.lines().count() != 1) {
                    wrong.add("not one error line: " + out);
                } else if (!out.contains(value)) {
                    wrong.add("the error line does not name " + value + ": " + out);
                }
            }
            if (!before.equals(after)) {
                wrong.add("the figures changed: " + before + " -> " + after);
            }
            return String.join("; ", wrong);
        } finally {
            clear(f, generalBefore);
        }
    }

    /** @return the services, and the blocks and streams rows work on, made afresh */
    private Fixture fixture() throws Exception {
        if (context.getServiceReferences(DeviceMemoryManager.class, "(" + DeviceMemoryManager.DEVICE_PROPERTY + "=cpu:1)").isEmpty()) {
            org.osgi.service.cm.Configuration c = configAdmin.createFactoryConfiguration("io.ferrum.memory.cpu.device", "?");
            c.update(new Hashtable<>(Map.of("index", 1, "capacity", 64 * MiB, "initialSize", 4 * MiB, "growthIncrement", 4 * MiB)));
        }
        Fixture f = new Fixture();
        f.cpu0 = Await.service(context, AdvancedMemoryManager.class, CPU0);
        f.cpu1 = Await.service(context, AdvancedMemoryManager.class, CPU1);
        f.streams = Await.service(context, StreamManager.class, CPU0);
        Await.service(context, MemoryManagerFactory.class, "(objectClass=" + MemoryManagerFactory.class.getName() + ")");
        // Held until the row ends: the factory is a delayed component, and SCR deactivates it once unused.
        f.factoryRef = context.getServiceReference(MemoryManagerFactory.class);
        f.factory = context.getService(f.factoryRef);
        f.router = Await.service(context, MemoryRouter.class, "(objectClass=" + MemoryRouter.class.getName() + ")");
        Await.service(context, GlobalMemoryMonitor.class, "(objectClass=" + GlobalMemoryMonitor.class.getName() + ")");
        // Held until the row ends: the rows register by hand, which a released monitor service refuses.
        f.monitorRef = context.getServiceReference(GlobalMemoryMonitor.class);
        f.monitor = context.getService(f.monitorRef);
        f.shell = Await.service(context, CommandProcessor.class, "(objectClass=" + CommandProcessor.class.getName() + ")");
        Await.until("cpu:0 and cpu:1 in the monitor", () -> f.monitor.devices().containsAll(List.of(CPU0, CPU1)));
        f.live = f.cpu0.allocate(BLOCK, CPU0);
        f.freed = f.cpu0.allocate(BLOCK, CPU0);
        f.cpu0.deallocate(f.freed);
        f.foreign = f.cpu1.allocate(BLOCK, CPU1);
        f.stream = f.streams.createStream(CPU0);
        f.event = f.streams.recordEvent(f.stream);
        f.destroyed = f.streams.createStream(CPU0);
        f.streams.destroyStream(f.destroyed);
        return f;
    }

    private void clear(Fixture f, MemoryPoolConfig generalBefore) {
        // A row that wrongly succeeded may have changed the pool: the next row starts from the same one.
        if (!generalBefore.equals(f.cpu0.poolConfig(MemoryType.GENERAL))) {
            f.cpu0.configurePool(CPU0, MemoryType.GENERAL, generalBefore);
        }
        for (MemoryHandle h : f.extra) {
            f.cpu0.deallocate(h);
        }
        f.cpu0.deallocate(f.live);
        f.cpu1.deallocate(f.foreign);
        f.streams.destroyStream(f.stream);
        context.ungetService(f.factoryRef);
        context.ungetService(f.monitorRef);
    }

    /** @return per device: total, used, free, reserved, live allocations, fragmentation (bandwidth aside) */
    private static Map<Device, List<Object>> figures(Fixture f) {
        Map<Device, List<Object>> out = new TreeMap<>();
        f.monitor.globalMemoryInfo().forEach((d, i) -> out.put(d, List.of(i.totalBytes(), i.usedBytes(), i.freeBytes(),
                i.reservedBytes(), i.activeAllocations(), i.fragmentationRatio())));
        return out;
    }
}
