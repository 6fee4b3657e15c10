package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.lang.reflect.InvocationHandler;
import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Hashtable;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.osgi.framework.BundleContext;
import org.osgi.framework.ServiceReference;
import org.osgi.service.cm.Configuration;
import org.osgi.service.cm.ConfigurationAdmin;
import org.osgi.service.cm.ConfigurationEvent;
import org.osgi.service.log.Logger;

/** Config Admin's side is played by proxies, so that a configuration can be deleted at a chosen point. */
class OneFilePerPidTest {
    @TempDir
    Path dir;

    /**
     * A configuration deleted between Config Admin's listing and the check (its file removed as the
     * check starts) answers its getters with IllegalStateException, as Felix's Config Admin does for a
     * deleted one. That threw out of the constructor (SCR did not activate the check: two files of one
     * PID were not named for the rest of the session) and, from an update event, into Config Admin's
     * event dispatcher. The deleted one is skipped; the others are still checked.
     */
    @Test
    void aConfigurationDeletedWhileListedIsSkippedAndTheOthersAreChecked() throws Exception {
        Path cfg = Files.writeString(dir.resolve("io.ferrum.memory.cpu.cfg"), "capacity=64m\n");
        Files.writeString(dir.resolve("io.ferrum.memory.cpu.config"), "capacity=\"1g\"\n");
        Configuration deleted = proxy(Configuration.class, (p, m, a) -> {
            throw new IllegalStateException("Configuration io.ferrum.memory.cuda deleted");
        });
        Hashtable<String, Object> props = new Hashtable<>();
        props.put(ConfigFiles.FILENAME, cfg.toUri().toString());
        Configuration present = proxy(Configuration.class, (p, m, a) -> switch (m.getName()) {
            case "getProperties" -> props;
            case "getPid" -> "io.ferrum.memory.cpu";
            default -> null;
        });
        // Every listing answers with the deleted one first, as the one asked for by PID too.
        ConfigurationAdmin admin = proxy(ConfigurationAdmin.class, (p, m, a) -> !m.getName().equals("listConfigurations") ? null
                : ((String) a[0]).contains("io.ferrum.memory.cpu)") ? new Configuration[] {present}
                : new Configuration[] {deleted, present});
        BundleContext context = proxy(BundleContext.class, (p, m, a) -> m.getName().equals("getProperty")
                && "felix.fileinstall.dir".equals(a[0]) ? dir.toString() : null);
        List<String> warnings = new CopyOnWriteArrayList<>();
        Logger log = proxy(Logger.class, (p, m, a) -> {
            if (m.getName().equals("warn")) {
                warnings.add(String.valueOf(a[0]) + " " + a.length);
            }
            return null;
        });
        OneFilePerPid check = new OneFilePerPid(context, admin, log);
        assertEquals(1, warnings.size(), "the two files of io.ferrum.memory.cpu are named: " + warnings);
        check.configurationEvent(new ConfigurationEvent(proxy(ServiceReference.class, (p, m, a) -> null),
                ConfigurationEvent.CM_UPDATED, null, "io.ferrum.memory.cuda"));
        assertEquals(1, warnings.size(), "nothing more is said: " + warnings);
    }

    @SuppressWarnings("unchecked")
    private static <T> T proxy(Class<T> type, InvocationHandler h) {
        return (T) Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, h);
    }
}
