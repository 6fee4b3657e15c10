package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.reflect.Proxy;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.Set;

import org.junit.jupiter.api.Test;
import org.osgi.framework.BundleContext;
import org.osgi.framework.ServiceReference;

import io.ferrum.memory.api.AllocationStrategy;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryType;

/** Tab after a {@code mem:*} command offers what that command takes, and nothing it would refuse. */
class ShellCompleterTest {
    private static final Device CPU0 = Device.cpu(0);
    private static final MemoryHandle BLOCK = new MemoryHandle(0x0000100000000001L);
    private static final List<String> TYPES = List.of("GENERAL", "TENSOR", "CACHE", "TEMPORARY", "PINNED", "MAPPED");

    private final ShellCompleter completer = new ShellCompleter(context(), null);

    @SuppressWarnings("unchecked")
    private static <T> T proxy(Class<T> type, java.util.function.Function<String, Object> answer) {
        return (T) Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type},
                (p, m, args) -> answer.apply(m.getName()));
    }

    /** A registry holding a monitor with one device, cpu:0, which has one live block, and one strategy. */
    private static BundleContext context() {
        DeviceMemoryManager cpu0 = proxy(DeviceMemoryManager.class, m -> m.equals("handles")
                ? List.of(new MemoryHandleInfo(BLOCK, 64, CPU0, 256, Instant.now(), false, MemoryType.GENERAL)) : null);
        GlobalMemoryMonitor monitor = proxy(GlobalMemoryMonitor.class, m -> switch (m) {
            case "devices" -> Set.of(CPU0);
            case "manager" -> Optional.of(cpu0);
            default -> null;
        });
        ServiceReference<?> ref = proxy(ServiceReference.class, m -> m.equals("getProperty") ? "best-fit" : null);
        return proxy(BundleContext.class, m -> switch (m) {
            case "getServiceReference" -> ref;
            case "getService" -> monitor;
            case "getServiceReferences" -> List.of(ref);
            case "ungetService" -> true;
            default -> null;
        });
    }

    @Test
    void commandsThatTakeNoArgumentsOfferNothing() {
        for (String c : List.of("mem:devices", "mem:gc", "mem:pressure", "mem:streams", "mem:backends", "mem:strategies")) {
            assertEquals(List.of(), completer.arguments(c), c);
        }
    }

    @Test
    void commandsOnADeviceOfferDevices() {
        for (String c : List.of("mem:info", "mem:handles", "mem:defrag")) {
            assertEquals(List.of("cpu:0"), completer.arguments(c), c);
        }
    }

    @Test
    void commandsOnABlockOfferLiveHandles() {
        for (String c : List.of("mem:free", "mem:copy", "mem:write", "mem:read", "mem:fill", "mem:dump", "mem:unmap",
                "mem:save")) {
            assertEquals(List.of(BLOCK.toString()), completer.arguments(c), c);
        }
        assertEquals(List.of(BLOCK.toString(), "READ_ONLY", "WRITE_ONLY", "READ_WRITE"), completer.arguments("mem:map"));
    }

    @Test
    void allocationAndPoolsOfferDevicesAndTypes() {
        List<String> devicesAndTypes = new java.util.ArrayList<>(List.of("cpu:0"));
        devicesAndTypes.addAll(TYPES);
        assertEquals(devicesAndTypes, completer.arguments("mem:alloc"));
        assertEquals(devicesAndTypes, completer.arguments("mem:pool"));
        List<String> load = new java.util.ArrayList<>(List.of("cpu:0", BLOCK.toString()));
        load.addAll(TYPES);
        assertEquals(load, completer.arguments("mem:load"));
    }

    @Test
    void strategyOffersStrategyNames() {
        assertEquals(List.of("best-fit"), completer.arguments("mem:strategy"));
    }

    /**
     * Tab after {@code mem:free} while a backend stops: cpu:1's manager, listed, is closed before
     * its blocks are asked for. The completer threw, JLine dropped every candidate (and logged the
     * stack trace, which the console silences), and Tab offered nothing, not even cpu:0's blocks.
     * A device gone meanwhile is left out, as {@code mem:handles} leaves it out.
     */
    @Test
    void aDeviceWhoseManagerClosedWhileListedIsLeftOutAndTheOthersOffered() {
        Device cpu1 = Device.cpu(1);
        DeviceMemoryManager cpu0 = proxy(DeviceMemoryManager.class, m -> m.equals("handles")
                ? List.of(new MemoryHandleInfo(BLOCK, 64, CPU0, 256, Instant.now(), false, MemoryType.GENERAL)) : null);
        DeviceMemoryManager closed = (DeviceMemoryManager) Proxy.newProxyInstance(DeviceMemoryManager.class.getClassLoader(),
                new Class<?>[] {DeviceMemoryManager.class}, (p, m, args) -> {
                    throw new io.ferrum.memory.api.DeviceUnavailableException(cpu1, "The memory manager of cpu:1 is closed");
                });
        GlobalMemoryMonitor monitor = (GlobalMemoryMonitor) Proxy.newProxyInstance(GlobalMemoryMonitor.class.getClassLoader(),
                new Class<?>[] {GlobalMemoryMonitor.class}, (p, m, args) -> switch (m.getName()) {
                    case "devices" -> Set.of(CPU0, cpu1);
                    case "manager" -> Optional.of(CPU0.equals(args[0]) ? cpu0 : closed);
                    default -> null;
                });
        ServiceReference<?> ref = proxy(ServiceReference.class, m -> null);
        BundleContext context = proxy(BundleContext.class, m -> switch (m) {
            case "getServiceReference" -> ref;
            case "getService" -> monitor;
            case "ungetService" -> true;
            default -> null;
        });
        assertEquals(List.of(BLOCK.toString()), new ShellCompleter(context, null).arguments("mem:free"));
        assertEquals(List.of("cpu:0", "cpu:1", BLOCK.toString()), new ShellCompleter(context, null).arguments("mem:load")
                .subList(0, 3));
    }
}
