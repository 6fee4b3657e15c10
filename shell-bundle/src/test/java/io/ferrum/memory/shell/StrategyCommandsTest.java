package io.ferrum.memory.shell;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Hashtable;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.AllocationStrategy;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryInfo;

class StrategyCommandsTest {
    private final ShellFixture fixture = new ShellFixture();

    @AfterEach
    void close() throws Exception {
        fixture.close();
    }

    /** A strategy that names the first device offered. */
    record First(String name) implements AllocationStrategy {
        @Override
        public Optional<Device> selectDevice(long size, AllocationRequirements requirements, List<Device> available,
                                             Map<Device, MemoryInfo> memoryInfo) {
            return available.stream().findFirst();
        }
    }

    private static void register(BundleContext context, String name, int ranking) {
        Hashtable<String, Object> p = new Hashtable<>();
        p.put(AllocationStrategy.NAME_PROPERTY, name);
        p.put(Constants.SERVICE_RANKING, ranking);
        context.registerService(AllocationStrategy.class, new First(name), p);
    }

    private StrategyCommands commands() throws Exception {
        StrategyCommands c = new StrategyCommands(fixture.framework());
        c.router = fixture.directory;
        return c;
    }

    @Test
    void strategiesListsEveryStrategyAndMarksTheActiveOne() throws Exception {
        StrategyCommands c = commands();
        register(fixture.framework(), "other", 0);
        register(fixture.framework(), "first-device", 10);
        register(fixture.framework(), "zeta", 100);
        Table t = assertInstanceOf(Table.class, c.strategies());
        // Issue 17: by name, whatever the ranking or registration order, the active one marked in its row.
        assertEquals(List.of("first-device", "other", "zeta"), t.column("STRATEGY"));
        assertEquals(List.of("*", "", ""), t.column("ACTIVE"));
        assertEquals(List.of("10", "0", "100"), t.column("RANKING"));
        assertEquals(List.of("org.apache.felix.framework", "org.apache.felix.framework", "org.apache.felix.framework"),
                t.column("BUNDLE"));
        assertTrue(t.toString().lines().skip(1).findFirst().orElseThrow().matches("\\*\\s+first-device\\s+10\\s.*"),
                t.toString());
    }

    @Test
    void withoutStrategiesTheListSaysWhatToInstall() throws Exception {
        assertEquals("No allocation strategy is present: install a strategy bundle.", commands().strategies().toString());
    }

    @Test
    void strategyShowsTheRoutersActiveStrategy() throws Exception {
        assertEquals("active strategy: first-device", commands().strategy().toString());
    }

    @Test
    void strategyShowsARefusedMonitorConfigurationWhileItStands() throws Exception {
        Hashtable<String, Object> p = new Hashtable<>();
        p.put(StrategyCommands.REJECTED_PROPERTY, "Configuration io.ferrum.memory.monitor refused: Invalid samplePeriodMs 'abc':"
                + " use 0 (no sampling) or a whole number of milliseconds; the monitor starts with its defaults");
        p.put(StrategyCommands.CONFIGURATION_PID_PROPERTY, StrategyCommands.MONITOR_PID);
        var refused = fixture.framework().registerService(Object.class, new Object(), p);
        Hashtable<String, Object> device = new Hashtable<>();
        device.put(StrategyCommands.REJECTED_PROPERTY, "Configuration of cpu:1 refused: Invalid capacity '12XB'");
        fixture.framework().registerService(Object.class, new Object(), device);

        assertEquals(List.of("active strategy: first-device", "rejected configuration: Configuration io.ferrum.memory.monitor"
                + " refused: Invalid samplePeriodMs 'abc': use 0 (no sampling) or a whole number of milliseconds; the monitor"
                + " starts with its defaults"), commands().strategy().toString().lines().toList(), "a device's refusal is mem:backends'");

        refused.unregister();
        assertEquals("active strategy: first-device", commands().strategy().toString());
    }

    /** Review defect: the switch waited, printed the old strategy with no error, and the choice was saved all the same. */
    @Test
    void switchingWhileAMonitorConfigurationStandsRefusedSaysWhyAndChangesNothing() throws Exception {
        Hashtable<String, Object> p = new Hashtable<>();
        p.put(StrategyCommands.REJECTED_PROPERTY, "Configuration io.ferrum.memory.monitor refused: maxAttempts 0 must be one or"
                + " more; the monitor starts with its defaults");
        p.put(StrategyCommands.CONFIGURATION_PID_PROPERTY, StrategyCommands.MONITOR_PID);
        fixture.framework().registerService(Object.class, new Object(), p);
        register(fixture.framework(), "most-free", 0);
        List<String> calls = new java.util.ArrayList<>();
        StrategyCommands c = commands();
        c.configAdmin = (org.osgi.service.cm.ConfigurationAdmin) java.lang.reflect.Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {org.osgi.service.cm.ConfigurationAdmin.class}, (proxy, method, args) -> {
                    calls.add(method.getName());
                    throw new UnsupportedOperationException(method.getName());
                });

        String reply = c.strategy("most-free").toString();

        assertEquals(List.of("error: Cannot switch to 'most-free': the monitor refused its configuration (Configuration"
                + " io.ferrum.memory.monitor refused: maxAttempts 0 must be one or more; the monitor starts with its defaults);"
                + " fix the value it names in the monitor's configuration (PID io.ferrum.memory.monitor, in the distribution a"
                + " file io.ferrum.memory.monitor.cfg or .config in config/), then run mem:strategy most-free again; nothing"
                + " changed"), reply.lines().toList());
        assertEquals(List.of(), calls, "the monitor's configuration was not read or changed");
    }

    /**
     * Ctrl-C while mem:strategy waits for the router to take the saved choice (the monitor takes a
     * configuration on its own thread): the answer was the JDK's words for the wait's sleep, {@code
     * error: sleep interrupted}, as if nothing had been done, though the choice was saved and the
     * router would switch. It now says what was done and what is left.
     */
    @Test
    void aSwitchInterruptedWhileWaitingForTheRouterSaysTheChoiceIsSaved() throws Exception {
        register(fixture.framework(), "most-free", 0);
        Hashtable<String, Object> saved = new Hashtable<>();
        org.osgi.service.cm.Configuration monitorConfiguration = (org.osgi.service.cm.Configuration) java.lang.reflect.Proxy
                .newProxyInstance(getClass().getClassLoader(), new Class<?>[] {org.osgi.service.cm.Configuration.class},
                        (proxy, method, args) -> switch (method.getName()) {
                            case "getProperties" -> null;
                            case "update" -> {
                                @SuppressWarnings("unchecked")
                                java.util.Dictionary<String, Object> d = (java.util.Dictionary<String, Object>) args[0];
                                saved.put("strategy", d.get("strategy"));
                                Thread.currentThread().interrupt(); // Ctrl-C as the choice is saved
                                yield null;
                            }
                            default -> throw new UnsupportedOperationException(method.getName());
                        });
        StrategyCommands c = commands();
        c.configAdmin = (org.osgi.service.cm.ConfigurationAdmin) java.lang.reflect.Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {org.osgi.service.cm.ConfigurationAdmin.class}, (proxy, method, args) -> {
                    if (method.getName().equals("getConfiguration")) {
                        return monitorConfiguration;
                    }
                    throw new UnsupportedOperationException(method.getName());
                });
        String reply;
        try {
            reply = c.strategy("most-free").toString();
            assertTrue(Thread.currentThread().isInterrupted(), "the interrupt stays for the shell to see");
        } finally {
            Thread.interrupted();
        }
        assertEquals("most-free", saved.get("strategy"));
        assertEquals("error: interrupted: most-free is saved in the monitor's configuration (PID io.ferrum.memory.monitor),"
                + " and the router takes it when the monitor applies it; it still ran first-device when the wait"
                + " stopped (mem:strategy shows the active one)", reply);
    }

    @Test
    void switchingNeedsConfigAdminToSaveTheChoice() throws Exception {
        assertEquals("error: Config Admin is not running: the strategy cannot be saved",
                commands().strategy("most-free").toString());
    }

    @Test
    void withoutARouterTheActiveStrategyIsUnknown() throws Exception {
        StrategyCommands c = new StrategyCommands(fixture.framework());
        assertEquals("error: No memory router is running: start the bundle io.ferrum.memory.monitor", c.strategy().toString());
    }
}
