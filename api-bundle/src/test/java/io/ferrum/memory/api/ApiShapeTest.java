package io.ferrum.memory.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.reflect.Method;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Modifier;
import java.lang.reflect.Proxy;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.osgi.annotation.versioning.ConsumerType;
import org.osgi.annotation.versioning.ProviderType;

/**
 * The API bundle holds contracts only: interfaces, records, enums, exceptions (and the builder of
 * a record). Every interface says who implements it.
 */
class ApiShapeTest {

    private static List<Class<?>> apiClasses() throws IOException, URISyntaxException, ClassNotFoundException {
        Path root = Path.of(Device.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        Path pkg = root.resolve("io/ferrum/memory/api");
        List<Class<?>> classes = new ArrayList<>();
        try (Stream<Path> files = Files.list(pkg)) {
            for (Path f : files.filter(p -> p.toString().endsWith(".class")).sorted().toList()) {
                String simple = f.getFileName().toString().replace(".class", "");
                if (!simple.equals("package-info")) {
                    classes.add(Class.forName("io.ferrum.memory.api." + simple));
                }
            }
        }
        return classes;
    }

    /**
     * ProviderType and ConsumerType have CLASS retention (bnd reads them, reflection cannot), so look
     * for the annotation's descriptor in the class file itself.
     */
    private static boolean hasClassAnnotation(Class<?> type, Class<?> annotation) {
        String resource = "/" + type.getName().replace('.', '/') + ".class";
        try (var in = type.getResourceAsStream(resource)) {
            String bytes = new String(in.readAllBytes(), java.nio.charset.StandardCharsets.ISO_8859_1);
            return bytes.contains("L" + annotation.getName().replace('.', '/') + ";");
        } catch (IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    @Test
    void onlyInterfacesRecordsEnumsExceptionsAndRecordBuilders() throws Exception {
        List<Class<?>> classes = apiClasses();
        assertTrue(classes.size() >= 30, "expected the whole contract, found " + classes.size() + " types");
        List<String> offenders = new ArrayList<>();
        for (Class<?> c : classes) {
            boolean contract = c.isInterface() || c.isRecord() || c.isEnum()
                    || MemoryException.class.isAssignableFrom(c)
                    || (c.getSimpleName().equals("Builder") && c.getEnclosingClass() != null
                        && c.getEnclosingClass().isRecord());
            if (!contract) {
                offenders.add(c.getName());
            }
        }
        assertEquals(List.of(), offenders, "implementation classes do not belong in the API bundle");
    }

    @Test
    void everyInterfaceIsMarkedProviderOrConsumerType() throws Exception {
        List<String> unmarked = new ArrayList<>();
        for (Class<?> c : apiClasses()) {
            if (c.isInterface() && !c.isAnnotation()) {
                boolean provider = hasClassAnnotation(c, ProviderType.class);
                boolean consumer = hasClassAnnotation(c, ConsumerType.class);
                if (provider == consumer) {
                    unmarked.add(c.getSimpleName());
                }
            }
        }
        assertEquals(List.of(), unmarked);
    }

    @Test
    void consumerTypesAreTheOnesThirdPartiesImplement() {
        assertTrue(hasClassAnnotation(AllocationStrategy.class, ConsumerType.class));
        assertTrue(hasClassAnnotation(MemoryObserver.class, ConsumerType.class));
        assertTrue(hasClassAnnotation(DeviceMemoryManager.class, ProviderType.class));
        assertTrue(hasClassAnnotation(GlobalMemoryMonitor.class, ProviderType.class));
        assertTrue(hasClassAnnotation(MemoryRouter.class, ProviderType.class));
    }

    @Test
    void aManagerThatCannotReachAPeerSaysSoAndRefusesNulls() {
        // Only the defaults answer; any abstract method called would fail the test.
        InvocationHandler defaultsOnly = (proxy, m, args) -> {
            if (m.isDefault()) {
                return InvocationHandler.invokeDefault(proxy, m, args);
            }
            throw new AssertionError("the default copyToPeer called " + m.getName());
        };
        DeviceMemoryManager m = (DeviceMemoryManager) Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {DeviceMemoryManager.class}, defaultsOnly);
        MemoryTransfer t = MemoryTransfer.of(new MemoryHandle(1), new MemoryHandle(2), 8);
        assertFalse(m.copyToPeer(t, m));
        InvalidMemoryRequestException noTransfer = assertThrows(InvalidMemoryRequestException.class,
                () -> m.copyToPeer(null, m));
        assertTrue(noTransfer.getMessage().contains("the transfer is null"), noTransfer.getMessage());
        InvalidMemoryRequestException noTarget = assertThrows(InvalidMemoryRequestException.class,
                () -> m.copyToPeer(t, null));
        assertTrue(noTarget.getMessage().contains("the target is null"), noTarget.getMessage());
    }

    @Test
    void observerMethodsAreAllOptional() {
        for (Method m : MemoryObserver.class.getDeclaredMethods()) {
            if (!Modifier.isStatic(m.getModifiers())) {
                assertTrue(m.isDefault(), m.getName() + " must have a default no-op body");
            }
        }
        // And a do-nothing observer really is one.
        MemoryObserver nothing = new MemoryObserver() { };
        nothing.deviceRemoved(Device.cpu());
        nothing.sample(java.util.Map.of());
    }

    @Test
    void servicePropertyNamesAreFixed() {
        assertEquals("memory.device", DeviceMemoryManager.DEVICE_PROPERTY);
        assertEquals("memory.device.kind", DeviceMemoryManager.DEVICE_KIND_PROPERTY);
        assertEquals("memory.backend", DeviceMemoryManager.BACKEND_PROPERTY);
        assertEquals("memory.strategy.name", AllocationStrategy.NAME_PROPERTY);
    }
}
