package io.ferrum.memory.shell;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.util.List;
import java.util.jar.Attributes;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.wiring.FrameworkWiring;

import io.ferrum.memory.api.DeviceMemoryManager;

class BackendCommandsTest {
    private final ShellFixture fixture = new ShellFixture();

    @AfterEach
    void close() throws Exception {
        fixture.close();
    }

    /** @return a bundle with nothing in it but a manifest that marks it as a backend of {@code kind} */
    private static ByteArrayInputStream backendJar(String kind) throws IOException {
        Manifest mf = new Manifest();
        Attributes a = mf.getMainAttributes();
        a.put(Attributes.Name.MANIFEST_VERSION, "1.0");
        a.putValue("Bundle-ManifestVersion", "2");
        a.putValue("Bundle-SymbolicName", "test.backend." + kind);
        a.putValue(BackendCommands.BACKEND_HEADER, kind);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        new JarOutputStream(out, mf).close();
        return new ByteArrayInputStream(out.toByteArray());
    }

    @Test
    void withoutBackendBundlesTheCommandSaysWhatToInstall() throws Exception {
        assertEquals("No backend bundles are installed (bundles with a Ferrum-Backend header); install one, e.g."
                + " io.ferrum.memory.cpu.", new BackendCommands(fixture.framework()).backends().toString());
    }

    @Test
    void aBackendIsListedWithItsStateItsDevicesAndWhatToDo() throws Exception {
        BundleContext context = fixture.framework();
        BackendCommands commands = new BackendCommands(context);
        Bundle b = context.installBundle("test:backend", backendJar("arena"));
        String id = Long.toString(b.getBundleId());

        context.getBundle(0).adapt(FrameworkWiring.class).resolveBundles(List.of(b));
        Table resolved = assertInstanceOf(Table.class, commands.backends());
        assertEquals(List.of(id), resolved.column("ID"));
        assertEquals(List.of("test.backend.arena"), resolved.column("BACKEND"));
        assertEquals(List.of("arena"), resolved.column("KIND"));
        assertEquals(List.of("RESOLVED"), resolved.column("STATE"));
        assertEquals(List.of("stopped: start it with 'start " + id + "'"), resolved.column("NOTE"));

        b.start();
        Table idle = assertInstanceOf(Table.class, commands.backends());
        assertEquals(List.of("ACTIVE"), idle.column("STATE"));
        assertEquals(List.of("-"), idle.column("DEVICES"));
        assertEquals(List.of("active, but no device found (see the log)"), idle.column("NOTE"));

        b.getBundleContext().registerService(DeviceMemoryManager.class, fixture.cpu1,
                ShellFixture.managerProperties(fixture.cpu1));
        b.getBundleContext().registerService(DeviceMemoryManager.class, fixture.cpu0,
                ShellFixture.managerProperties(fixture.cpu0));
        Table serving = assertInstanceOf(Table.class, commands.backends());
        assertEquals(List.of("cpu:0,cpu:1"), serving.column("DEVICES"));
        assertEquals(List.of(""), serving.column("NOTE"));
    }

    /**
     * A backend uninstalled while mem:backends lists the bundles (just after the framework answered
     * {@code getBundles}): Felix answers {@code getRegisteredServices} of an uninstalled bundle with
     * IllegalStateException, and the whole command was one line, {@code error: The bundle is
     * uninstalled.}, naming no backend and showing none of the others. A backend gone meanwhile is
     * left out, as mem:handles leaves out a device gone meanwhile.
     */
    @Test
    void aBackendUninstalledWhileListedIsLeftOutAndTheOthersShown() throws Exception {
        BundleContext context = fixture.framework();
        Bundle stays = context.installBundle("test:stays", backendJar("arena"));
        Bundle goes = context.installBundle("test:goes", backendJar("other"));
        BundleContext listing = (BundleContext) java.lang.reflect.Proxy.newProxyInstance(BundleContext.class.getClassLoader(),
                new Class<?>[] {BundleContext.class}, (proxy, m, args) -> {
                    Object answer;
                    try {
                        answer = m.invoke(context, args);
                    } catch (java.lang.reflect.InvocationTargetException e) {
                        throw e.getCause();
                    }
                    if (m.getName().equals("getBundles") && goes.getState() != Bundle.UNINSTALLED) {
                        goes.uninstall(); // its uninstall lands just after the listing
                    }
                    return answer;
                });
        Reply r = new BackendCommands(listing).backends();
        Table t = assertInstanceOf(Table.class, r, r.toString());
        assertEquals(List.of(Long.toString(stays.getBundleId())), t.column("ID"));
    }
}
