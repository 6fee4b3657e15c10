package io.ferrum.memory.pool;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Dictionary;
import java.util.Hashtable;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;
import org.osgi.framework.ServiceRegistration;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryManagerFactory;
import io.ferrum.memory.api.StreamManager;

/**
 * The services of one device, registered and unregistered as one unit, so that a backend's
 * component needs no {@code Hashtable} and no ordering rules of its own:
 *
 * <pre>{@code
 * registration = DeviceRegistration.of(manager).streams(streams).register(context);   // @Activate
 * registration.unregister();  manager.close();                                         // @Deactivate
 * }</pre>
 *
 * <p><b>What is registered.</b> The manager as {@link DeviceMemoryManager} (and {@link
 * AdvancedMemoryManager} when it is one) and, when given, the device's {@link StreamManager} and a
 * {@link MemoryManagerFactory}; API types only. {@link ProvidesDeviceServices} on the registering
 * class declares the manager and streams to the resolver. Each service carries the properties of {@link
 * io.ferrum.memory.api.DeviceServiceProperties}: {@value DeviceMemoryManager#DEVICE_PROPERTY} (the
 * device as {@code kind:index}), {@value DeviceMemoryManager#DEVICE_KIND_PROPERTY} and {@value
 * DeviceMemoryManager#BACKEND_PROPERTY}, plus any extra properties given (a description, a ranking).
 *
 * <p><b>Order.</b> Streams and factory are registered before the manager, and unregistered after
 * it: whoever finds the device's manager (the monitor does so in the very service event) also
 * finds its streams, and once the manager is gone nobody starts using the device again. The owner
 * closes the manager only after {@link #unregister()}, so no caller receives a closed manager from
 * the registry.
 *
 * <p><b>Failure and stopping.</b> If a registration fails (the bundle is stopping, say), the ones
 * already made are withdrawn and the failure is thrown: nothing stays half registered. {@link
 * #unregister()} is idempotent, may be called from any thread, and is safe while the bundle
 * stops, when the framework may already have withdrawn the services itself.
 */
public final class DeviceRegistration implements AutoCloseable {

    /** One service of the device: the names it is registered under, and the object. */
    record Entry(String[] types, Object service) {
    }

    /**
     * What to register for one device; {@link #register(BundleContext)} does it. Not thread-safe:
     * build it on one thread.
     */
    public static final class Builder {
        private final DeviceMemoryManager manager;
        private final String backend;
        private StreamManager streams;
        private MemoryManagerFactory factory;
        private final Map<String, Object> extra = new LinkedHashMap<>();

        private Builder(DeviceMemoryManager manager, String backend) {
            this.manager = manager;
            this.backend = backend;
        }

        /**
         * @param streamManager the device's stream manager, serving {@code manager.device()}
         * @return this builder
         * @throws InvalidMemoryRequestException if it is null or serves another device
         */
        public Builder streams(StreamManager streamManager) {
            if (streamManager == null) {
                throw new InvalidMemoryRequestException("The stream manager of " + manager.device()
                        + " is null; pass the StreamManager whose streams the manager's copyAsync runs on");
            }
            if (!manager.device().equals(streamManager.device())) {
                throw new InvalidMemoryRequestException("The stream manager serves " + streamManager.device()
                        + ", not " + manager.device() + ": register each device with its own streams");
            }
            this.streams = streamManager;
            return this;
        }

        /**
         * @param memoryManagerFactory a factory for managers of the device's kind, registered with
         *                             the same properties; not null
         * @return this builder
         * @throws InvalidMemoryRequestException if it is null or does not serve the device's kind
         */
        public Builder factory(MemoryManagerFactory memoryManagerFactory) {
            if (memoryManagerFactory == null) {
                throw new InvalidMemoryRequestException("The memory manager factory for " + manager.device()
                        + " is null; leave factory() out when the backend registers none per device");
            }
            if (!memoryManagerFactory.deviceKinds().contains(manager.device().kind())) {
                throw new InvalidMemoryRequestException("The memory manager factory serves the kinds "
                        + memoryManagerFactory.deviceKinds() + ", not " + manager.device().kind() + " of "
                        + manager.device());
            }
            this.factory = memoryManagerFactory;
            return this;
        }

        /**
         * Adds a property to every service of the device, for example {@code service.description}
         * or {@code service.ranking}.
         *
         * @param key   a property name other than the device properties and the framework's own
         *              ({@code objectClass}, {@code service.id}, ...)
         * @param value the value, not null
         * @return this builder
         * @throws InvalidMemoryRequestException for a reserved name or a null value
         */
        public Builder property(String key, Object value) {
            if (key == null || value == null) {
                throw new InvalidMemoryRequestException("Service property " + key + "=" + value + " of " + manager.device()
                        + ": name and value are required");
            }
            if (key.equals(DeviceMemoryManager.DEVICE_PROPERTY) || key.equals(DeviceMemoryManager.DEVICE_KIND_PROPERTY)
                    || key.equals(DeviceMemoryManager.BACKEND_PROPERTY) || key.equalsIgnoreCase(Constants.OBJECTCLASS)
                    || key.equalsIgnoreCase(Constants.SERVICE_ID) || key.equalsIgnoreCase(Constants.SERVICE_PID)
                    || key.equalsIgnoreCase(Constants.SERVICE_BUNDLEID) || key.equalsIgnoreCase(Constants.SERVICE_SCOPE)) {
                throw new InvalidMemoryRequestException("Service property " + key + " of " + manager.device()
                        + " is set by the registration itself (from the manager and the backend name) or by the"
                        + " framework; it cannot be given as an extra property");
            }
            extra.put(key, value);
            return this;
        }

        /** @return the properties every service of the device gets; a new dictionary on each call */
        Dictionary<String, Object> properties() {
            Hashtable<String, Object> props = new Hashtable<>(extra);
            Device device = manager.device();
            props.put(DeviceMemoryManager.DEVICE_PROPERTY, device.toString());
            props.put(DeviceMemoryManager.DEVICE_KIND_PROPERTY, device.kind());
            props.put(DeviceMemoryManager.BACKEND_PROPERTY, backend);
            return props;
        }

        /** @return what {@link #register} registers, in its order: streams, factory, then the manager */
        List<Entry> plan() {
            List<Entry> plan = new ArrayList<>(3);
            if (streams != null) {
                plan.add(new Entry(new String[] {StreamManager.class.getName()}, streams));
            }
            if (factory != null) {
                plan.add(new Entry(new String[] {MemoryManagerFactory.class.getName()}, factory));
            }
            plan.add(new Entry(manager instanceof AdvancedMemoryManager
                    ? new String[] {DeviceMemoryManager.class.getName(), AdvancedMemoryManager.class.getName()}
                    : new String[] {DeviceMemoryManager.class.getName()}, manager));
            return plan;
        }

        /**
         * Registers the device's services through {@code context}.
         *
         * @param context the backend bundle's context
         * @return the registration, to {@link #unregister()} before the manager closes
         * @throws IllegalStateException if the context is no longer valid (the bundle stops); nothing
         *                               stays registered then
         */
        public DeviceRegistration register(BundleContext context) {
            Objects.requireNonNull(context, "context");
            List<ServiceRegistration<?>> done = new ArrayList<>(3);
            try {
                for (Entry e : plan()) {
                    done.add(context.registerService(e.types(), e.service(), properties()));
                }
            } catch (RuntimeException | Error e) {
                Collections.reverse(done);
                withdraw(done, e);
                throw e;
            }
            Collections.reverse(done);
            return new DeviceRegistration(manager.device(), done);
        }
    }

    private final Device device;
    /** In unregistration order: the manager first. Empty once unregistered. */
    private List<ServiceRegistration<?>> registrations;

    private DeviceRegistration(Device device, List<ServiceRegistration<?>> registrations) {
        this.device = device;
        this.registrations = List.copyOf(registrations);
    }

    /**
     * @param manager a pooled manager; its {@link PooledMemoryManager#backendName()} becomes
     *                {@value DeviceMemoryManager#BACKEND_PROPERTY}
     * @return a builder for the device's services
     */
    public static Builder of(PooledMemoryManager manager) {
        Objects.requireNonNull(manager, "manager");
        return of(manager, manager.backendName());
    }

    /**
     * @param manager the device's manager, not null
     * @param backend the backend's name ({@code ffm}, {@code jcuda}), not blank
     * @return a builder for the device's services
     * @throws InvalidMemoryRequestException on a blank backend name
     */
    public static Builder of(DeviceMemoryManager manager, String backend) {
        Objects.requireNonNull(manager, "manager");
        if (backend == null || backend.isBlank()) {
            throw new InvalidMemoryRequestException("The backend name of " + manager.device() + " is '" + backend
                    + "'; give the short name the backend registers as " + DeviceMemoryManager.BACKEND_PROPERTY
                    + " (ffm, jcuda, ...)");
        }
        return new Builder(manager, backend);
    }

    /** @return the device whose services this registration holds */
    public Device device() {
        return device;
    }

    /** @return true until {@link #unregister()} has run */
    public synchronized boolean isRegistered() {
        return !registrations.isEmpty();
    }

    /**
     * Withdraws the device's services: the manager first, then the factory, then the streams.
     * Services the framework has already withdrawn (a stopping bundle) are skipped. Idempotent.
     */
    public void unregister() {
        List<ServiceRegistration<?>> toWithdraw;
        synchronized (this) {
            toWithdraw = registrations;
            registrations = List.of();
        }
        withdraw(toWithdraw, null);
    }

    /** The same as {@link #unregister()}. */
    @Override
    public void close() {
        unregister();
    }

    /**
     * Unregisters each of {@code regs} in order; one that fails does not stop the others. The first
     * failure is thrown at the end, or added to {@code failure} when one is already on its way.
     */
    private static void withdraw(List<ServiceRegistration<?>> regs, Throwable failure) {
        RuntimeException first = null;
        for (ServiceRegistration<?> r : regs) {
            try {
                r.unregister();
            } catch (IllegalStateException alreadyGone) {
                // The framework withdraws a stopping bundle's services itself.
            } catch (RuntimeException e) {
                if (failure != null) {
                    failure.addSuppressed(e);
                } else if (first == null) {
                    first = e;
                } else {
                    first.addSuppressed(e);
                }
            }
        }
        if (first != null) {
            throw first;
        }
    }

    @Override
    public String toString() {
        return "DeviceRegistration[" + device + (isRegistered() ? ", registered]" : ", unregistered]");
    }
}
