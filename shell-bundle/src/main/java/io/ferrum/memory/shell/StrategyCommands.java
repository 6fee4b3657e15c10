package io.ferrum.memory.shell;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.Dictionary;
import java.util.Hashtable;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

import org.apache.felix.service.command.Descriptor;
import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;
import org.osgi.framework.InvalidSyntaxException;
import org.osgi.framework.ServiceReference;
import org.osgi.service.cm.Configuration;
import org.osgi.service.cm.ConfigurationAdmin;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;

import io.ferrum.memory.api.AllocationStrategy;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryRouter;

/**
 * The strategy commands: {@code mem:strategies} lists the {@link AllocationStrategy} services and
 * marks the router's active one; {@code mem:strategy} shows the active one, and a refused monitor
 * configuration while it stands (the monitor then runs with its defaults or its previous
 * configuration); {@code mem:strategy NAME} refuses a name no present strategy has
 * (listing those there are, changing nothing), and so does it while a refused monitor configuration
 * stands (the choice would be refused with it), else saves the choice in the monitor's configuration
 * (PID {@value #MONITOR_PID}) and waits briefly for the router to take it. Config Admin keeps it;
 * the distribution also writes it to {@code config/io.ferrum.memory.monitor.cfg}, so it survives a
 * restart.
 */
@Component(service = StrategyCommands.class)
@MemCommand(function = {"strategies", "strategy"})
public final class StrategyCommands {
    /** The monitor's configuration PID; its {@code strategy} property is the chosen strategy's name. */
    static final String MONITOR_PID = "io.ferrum.memory.monitor";
    /** Property of the monitor's record of a configuration it refused: the reason, one line. */
    static final String REJECTED_PROPERTY = BackendCommands.REJECTED_PROPERTY;
    /** Property of that record: the PID of the refused configuration. */
    static final String CONFIGURATION_PID_PROPERTY = "ferrum.configuration.pid";
    /** How long {@code mem:strategy} waits for the router to switch to a present strategy. */
    private static final long SWITCH_WAIT_SECONDS = 5;

    private final BundleContext context;

    @Reference(cardinality = ReferenceCardinality.OPTIONAL, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY)
    volatile MemoryRouter router;

    @Reference(cardinality = ReferenceCardinality.OPTIONAL, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY)
    volatile ConfigurationAdmin configAdmin;

    @Activate
    public StrategyCommands(BundleContext context) {
        this.context = context;
    }

    private static final Syntax STRATEGIES = Syntax.of("strategies");
    private static final Syntax STRATEGY = Syntax.of("strategy").optional("NAME");

    @Descriptor("List the allocation strategies present, by name; * in the ACTIVE column marks the router's (mem:strategies)")
    public Reply strategies(@Descriptor("none") String... args) {
        return Reply.attempt("strategies", () -> {
            STRATEGIES.parse(args);
            MemoryRouter r = router;
            Optional<String> active = r == null ? Optional.empty() : r.activeStrategy();
            Table t = new Table("ACTIVE", "STRATEGY", "RANKING", "BUNDLE").text("STRATEGY", "BUNDLE");
            List<ServiceReference<AllocationStrategy>> refs = new ArrayList<>(
                    context.getServiceReferences(AllocationStrategy.class, null));
            // By name, then the highest ranking first: an order that does not change with the order
            // in which bundles started (service ids), so two listings compare line by line.
            refs.sort(Comparator.comparing((ServiceReference<AllocationStrategy> s) ->
                    String.valueOf(s.getProperty(AllocationStrategy.NAME_PROPERTY))).thenComparing(Comparator.reverseOrder()));
            for (ServiceReference<AllocationStrategy> ref : refs) {
                Object name = ref.getProperty(AllocationStrategy.NAME_PROPERTY);
                Object ranking = ref.getProperty(Constants.SERVICE_RANKING);
                t.row(active.isPresent() && active.get().equals(name) ? "*" : "", name, ranking == null ? 0 : ranking,
                        ref.getBundle().getSymbolicName());
            }
            return t.isEmpty() ? Reply.line("No allocation strategy is present: install a strategy bundle.") : t;
        });
    }

    /**
     * @return a {@code rejected configuration:} line for each refused monitor configuration that
     *         stands: a service the monitor registered with {@value #REJECTED_PROPERTY} (the reason
     *         and what it runs instead) and {@value #CONFIGURATION_PID_PROPERTY} = {@value #MONITOR_PID}
     */
    private List<String> monitorRejections() throws InvalidSyntaxException {
        List<String> out = new ArrayList<>();
        ServiceReference<?>[] refs = context.getServiceReferences((String) null, "(&(" + REJECTED_PROPERTY + "=*)("
                + CONFIGURATION_PID_PROPERTY + "=" + MONITOR_PID + "))");
        if (refs != null) {
            for (ServiceReference<?> r : refs) {
                out.add("rejected configuration: " + r.getProperty(REJECTED_PROPERTY));
            }
        }
        out.sort(null);
        return out;
    }

    /** @return the names of the strategies present, sorted */
    private List<String> presentNames() throws InvalidSyntaxException {
        List<String> names = new ArrayList<>();
        for (ServiceReference<AllocationStrategy> ref : context.getServiceReferences(AllocationStrategy.class, null)) {
            if (ref.getProperty(AllocationStrategy.NAME_PROPERTY) instanceof String n && !names.contains(n)) {
                names.add(n);
            }
        }
        names.sort(null);
        return names;
    }

    @Descriptor("Show the active allocation strategy, or switch it (saved in the monitor's configuration): mem:strategy"
            + " [NAME], e.g. best-fit, most-free, preferred-order, round-robin")
    public Reply strategy(@Descriptor("[NAME]") String... args) {
        return Reply.attempt("strategy", () -> {
            String name = STRATEGY.parse(args).get("NAME", null);
            if (name == null) {
                List<String> out = new ArrayList<>();
                out.add(Services.router(router).activeStrategy().map(n -> "active strategy: " + n)
                        .orElse("no strategy is present: allocation through the router fails"));
                out.addAll(monitorRejections());
                return Reply.lines(out);
            }
            ConfigurationAdmin ca = configAdmin;
            if (ca == null) {
                throw new DeviceUnavailableException(null, "Config Admin is not running: the strategy cannot be saved");
            }
            List<String> names = presentNames();
            if (!names.contains(name)) {
                // Refused before anything is saved: the router and the configuration stay as they are.
                throw new InvalidMemoryRequestException("Unknown strategy '" + name + "': the strategies present are "
                        + (names.isEmpty() ? "none (install a strategy bundle)" : String.join(", ", names))
                        + "; nothing changed");
            }
            List<String> refused = monitorRejections();
            if (!refused.isEmpty()) {
                // The choice would join the refused properties, and the monitor would refuse them again
                // (unless the strategy itself was the bad value): the router would not switch, yet the
                // choice would be saved (and written to the file). Fixing the file is the one way out.
                throw new InvalidMemoryRequestException("Cannot switch to '" + name + "': the monitor refused its configuration ("
                        + refused.get(0).substring("rejected configuration: ".length()) + "); fix the value it names in the"
                        + " monitor's configuration (PID " + MONITOR_PID + ", in the distribution a file " + MONITOR_PID
                        + ".cfg or .config in config/), then run mem:strategy " + name + " again; nothing changed");
            }
            Configuration c = ca.getConfiguration(MONITOR_PID, "?");
            Dictionary<String, Object> p = c.getProperties() != null ? c.getProperties() : new Hashtable<>();
            p.put("strategy", name);
            c.update(p);
            MemoryRouter r = Services.router(router);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(SWITCH_WAIT_SECONDS);
            while (!r.activeStrategy().equals(Optional.of(name)) && System.nanoTime() < deadline) {
                try {
                    Thread.sleep(10);
                } catch (InterruptedException e) {
                    // Ctrl-C: the choice is saved all the same, and the router takes it on the monitor's
                    // thread; say so, not the JDK's "sleep interrupted". The interrupt stays set.
                    throw new InterruptedException("interrupted: " + name + " is saved in the monitor's configuration"
                            + " (PID " + MONITOR_PID + "), and the router takes it when the monitor applies it; it still"
                            + " ran " + r.activeStrategy().orElse("no strategy") + " when the wait stopped (mem:strategy shows"
                            + " the active one)");
                }
            }
            return Reply.line("active strategy: " + r.activeStrategy().orElse("none"));
        });
    }
}
