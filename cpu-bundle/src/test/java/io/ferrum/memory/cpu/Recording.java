package io.ferrum.memory.cpu;

import java.lang.reflect.Proxy;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

import org.osgi.framework.BundleContext;
import org.osgi.framework.ServiceRegistration;
import org.osgi.service.log.Logger;

import io.ferrum.memory.api.DeviceMemoryManager;

/**
 * A framework stand-in for unit tests of the device components: a {@link BundleContext} that keeps
 * what is registered, and a {@link Logger} that keeps what is logged.
 */
final class Recording {
    /** Registered services by their names, in registration order; unregistering removes them. */
    final Map<Object, String> services = Collections.synchronizedMap(new LinkedHashMap<>());
    final List<String> events = Collections.synchronizedList(new ArrayList<>());
    final List<String> errors = Collections.synchronizedList(new ArrayList<>());
    final List<String> infos = Collections.synchronizedList(new ArrayList<>());
    /** The {@link Rejection#REASON_PROPERTY} of each registered service that has one. */
    final Map<Object, String> reasons = Collections.synchronizedMap(new LinkedHashMap<>());
    /** Run (once) as the next service is unregistered, before it goes: a test's seam in a stop. */
    volatile Runnable beforeUnregister;

    BundleContext context() {
        return (BundleContext) Proxy.newProxyInstance(getClass().getClassLoader(), new Class<?>[] {BundleContext.class},
                (proxy, method, args) -> {
                    if (!method.getName().equals("registerService") || !(args[0] instanceof String[] names)) {
                        throw new UnsupportedOperationException(method.toString());
                    }
                    Object service = args[1];
                    String name = String.join("+", names);
                    services.put(service, name);
                    if (args[2] instanceof java.util.Dictionary<?, ?> props && props.get(Rejection.REASON_PROPERTY) != null) {
                        reasons.put(service, String.valueOf(props.get(Rejection.REASON_PROPERTY)));
                    }
                    events.add("register " + name);
                    return Proxy.newProxyInstance(getClass().getClassLoader(), new Class<?>[] {ServiceRegistration.class},
                            (p, m, a) -> {
                                if (!m.getName().equals("unregister")) {
                                    throw new UnsupportedOperationException(m.toString());
                                }
                                Runnable seam = beforeUnregister;
                                if (seam != null) {
                                    beforeUnregister = null;
                                    seam.run();
                                }
                                services.remove(service);
                                reasons.remove(service);
                                events.add("unregister " + name);
                                return null;
                            });
                });
    }

    Logger logger() {
        return (Logger) Proxy.newProxyInstance(getClass().getClassLoader(), new Class<?>[] {Logger.class},
                (proxy, method, args) -> {
                    if (method.getName().equals("error")) {
                        errors.add(format(args));
                    } else if (method.getName().equals("info")) {
                        infos.add(format(args));
                    }
                    return method.getReturnType() == boolean.class ? Boolean.TRUE : null;
                });
    }

    /** The Log Service's {@code {}} placeholders filled in, as a reader of the log sees the line. */
    private static String format(Object[] args) {
        String text = String.valueOf(args[0]);
        List<Object> values = args.length > 1 && args[1] instanceof Object[] rest ? Arrays.asList(rest)
                : Arrays.asList(args).subList(1, args.length);
        for (Object v : values) {
            text = text.replaceFirst("\\{}", java.util.regex.Matcher.quoteReplacement(String.valueOf(v)));
        }
        return text;
    }

    /** @return the reasons of the registered {@link Rejection}s, as mem:backends shows them */
    List<String> rejections() {
        return List.copyOf(reasons.values());
    }

    /** @return the one registered manager */
    DeviceMemoryManager manager() {
        List<DeviceMemoryManager> managers = services.keySet().stream().filter(DeviceMemoryManager.class::isInstance)
                .map(DeviceMemoryManager.class::cast).collect(Collectors.toList());
        if (managers.size() != 1) {
            throw new AssertionError("expected one registered manager, found " + managers);
        }
        return managers.get(0);
    }
}
