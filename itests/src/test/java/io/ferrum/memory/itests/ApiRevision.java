package io.ferrum.memory.itests;

import java.lang.foreign.MemorySegment;
import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.Collection;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

/**
 * The Ferrum API as one revision of the api bundle exports it, called by reflection.
 *
 * <p>Why reflection: a test that updates or reinstalls the api bundle must not wire its probe to the
 * api's packages, or the refresh that follows would stop and rewire the probe under the running test
 * (its bundle context dies, its classes can no longer load). The probe imports with {@code
 * DynamicImport-Package: *}, so it stays unwired as long as none of its classes names an api type.
 * This class names none: it finds the API's classes through the service objects it meets, and the
 * caller builds a new one when a service comes from another revision ({@link #serves}). Handles
 * cross revisions as their ids.
 *
 * <p>Holding an instance pins its revision's class loader: keep only the one in use.
 */
final class ApiRevision {
    static final String PACKAGE = "io.ferrum.memory.api.";
    static final String ROUTER = PACKAGE + "MemoryRouter";
    static final String MONITOR = PACKAGE + "GlobalMemoryMonitor";
    static final String MANAGER = PACKAGE + "DeviceMemoryManager";
    static final String ADVANCED_MANAGER = PACKAGE + "AdvancedMemoryManager";
    /** {@code DeviceMemoryManager.DEVICE_PROPERTY}. */
    static final String DEVICE_PROPERTY = "memory.device";

    private final Class<?> routerType;
    private final Class<?> managerType;
    private final Class<?> advancedType;
    private final Class<?> monitorType;
    private final Constructor<?> newHandle;
    private final Method handleId;
    private final Object defaults;
    private final Method routerAllocate;
    private final Method routerDeallocate;
    private final Method routerOwner;
    private final Method managerDeallocate;
    private final Method managerOwns;
    private final Method managerInfo;
    private final Method mapMemory;
    private final Method unmapMemory;
    private final Method monitorDevices;
    private final Method usedBytes;
    private final Method reservedBytes;
    private final Method activeAllocations;
    private final Object readWrite;
    private final Object readOnly;

    private ApiRevision(ClassLoader loader) throws ReflectiveOperationException {
        routerType = type(loader, "MemoryRouter");
        managerType = type(loader, "DeviceMemoryManager");
        advancedType = type(loader, "AdvancedMemoryManager");
        monitorType = type(loader, "GlobalMemoryMonitor");
        Class<?> handle = type(loader, "MemoryHandle");
        Class<?> requirements = type(loader, "AllocationRequirements");
        Class<?> access = type(loader, "MemoryAccess");
        Class<?> info = type(loader, "MemoryInfo");
        newHandle = handle.getConstructor(long.class);
        handleId = handle.getMethod("id");
        defaults = requirements.getMethod("defaults").invoke(null);
        routerAllocate = routerType.getMethod("allocate", long.class, requirements);
        routerDeallocate = routerType.getMethod("deallocate", handle);
        routerOwner = routerType.getMethod("owner", handle);
        managerDeallocate = managerType.getMethod("deallocate", handle);
        managerOwns = managerType.getMethod("owns", handle);
        managerInfo = managerType.getMethod("memoryInfo");
        mapMemory = advancedType.getMethod("mapMemory", handle, access);
        unmapMemory = advancedType.getMethod("unmapMemory", handle);
        monitorDevices = monitorType.getMethod("devices");
        usedBytes = info.getMethod("usedBytes");
        reservedBytes = info.getMethod("reservedBytes");
        activeAllocations = info.getMethod("activeAllocations");
        readWrite = access.getField("READ_WRITE").get(null);
        readOnly = access.getField("READ_ONLY").get(null);
    }

    private static Class<?> type(ClassLoader loader, String simpleName) throws ClassNotFoundException {
        return Class.forName(PACKAGE + simpleName, false, loader);
    }

    /**
     * @param service a service object of one of our bundles (its class loader sees the api revision it
     *                is wired to)
     * @return the API of that revision
     */
    static ApiRevision of(Object service) {
        try {
            return new ApiRevision(service.getClass().getClassLoader());
        } catch (ReflectiveOperationException e) {
            throw new AssertionError("the API cannot be found through " + service.getClass(), e);
        }
    }

    /** @return true if {@code service} implements one of our service types of this revision */
    boolean serves(Object service) {
        return routerType.isInstance(service) || managerType.isInstance(service) || monitorType.isInstance(service);
    }

    // ================================================================ router

    /** @return the id of a new block of {@code size} bytes, placed by the active strategy */
    long allocate(Object router, long size) {
        return id(call(routerAllocate, router, size, defaults));
    }

    void deallocate(Object router, long id) {
        call(routerDeallocate, router, handle(id));
    }

    /** @return the device holding block {@code id} as {@code kind:index}, or null if no device knows it */
    String owner(Object router, long id) {
        Optional<?> device = (Optional<?>) call(routerOwner, router, handle(id));
        return device.map(Object::toString).orElse(null);
    }

    // ================================================================ managers

    boolean isAdvanced(Object manager) {
        return advancedType.isInstance(manager);
    }

    /** Frees block {@code id} on that manager. */
    void free(Object manager, long id) {
        call(managerDeallocate, manager, handle(id));
    }

    boolean owns(Object manager, long id) {
        return (Boolean) call(managerOwns, manager, handle(id));
    }

    /** @return a view of block {@code id}, writable if {@code write} */
    MemorySegment map(Object manager, long id, boolean write) {
        return (MemorySegment) call(mapMemory, manager, handle(id), write ? readWrite : readOnly);
    }

    void unmap(Object manager, long id) {
        call(unmapMemory, manager, handle(id));
    }

    /** The figures of a manager's device that the lifecycle checks compare. */
    record Figures(long used, long reserved, long allocations) {
    }

    /** @return the figures of the manager's device */
    Figures figures(Object manager) {
        Object info = call(managerInfo, manager);
        return new Figures((Long) call(usedBytes, info), (Long) call(reservedBytes, info), (Long) call(activeAllocations, info));
    }

    // ================================================================ monitor

    /** @return the monitor's devices as {@code kind:index}, sorted */
    Set<String> devices(Object monitor) {
        Set<String> out = new TreeSet<>();
        for (Object d : (Collection<?>) call(monitorDevices, monitor)) {
            out.add(d.toString());
        }
        return out;
    }

    // ================================================================ exceptions

    /**
     * @param t any throwable
     * @param simpleName an exception of the API, for example {@code DeviceUnavailableException}
     * @return true if {@code t} is that exception or a subtype, of any revision
     */
    static boolean is(Throwable t, String simpleName) {
        for (Class<?> c = t.getClass(); c != null; c = c.getSuperclass()) {
            if (c.getName().equals(PACKAGE + simpleName)) {
                return true;
            }
        }
        return false;
    }

    // ================================================================ plumbing

    private Object handle(long id) {
        try {
            return newHandle.newInstance(id);
        } catch (ReflectiveOperationException e) {
            throw unwrap(e);
        }
    }

    private long id(Object handle) {
        return (Long) call(handleId, handle);
    }

    /** Calls {@code m}; what the API throws comes out as thrown, not wrapped. */
    private static Object call(Method m, Object target, Object... args) {
        try {
            return m.invoke(target, args);
        } catch (ReflectiveOperationException e) {
            throw unwrap(e);
        }
    }

    private static RuntimeException unwrap(ReflectiveOperationException e) {
        if (e instanceof InvocationTargetException ite) {
            Throwable cause = ite.getCause();
            if (cause instanceof RuntimeException r) {
                throw r;
            }
            if (cause instanceof Error err) {
                throw err;
            }
        }
        throw new AssertionError("reflective call failed", e);
    }
}
