package io.ferrum.memory.launcher;

import java.util.Arrays;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;

import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.BundleEvent;
import org.osgi.framework.BundleListener;
import org.osgi.framework.Constants;
import org.osgi.framework.FrameworkEvent;
import org.osgi.framework.FrameworkListener;
import org.osgi.framework.InvalidSyntaxException;
import org.osgi.framework.ServiceEvent;
import org.osgi.framework.ServiceListener;
import org.osgi.service.cm.Configuration;
import org.osgi.service.cm.ConfigurationAdmin;
import org.osgi.service.cm.ConfigurationEvent;
import org.osgi.service.cm.ConfigurationListener;
import org.osgi.service.cm.ManagedService;
import org.osgi.service.cm.ManagedServiceFactory;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Deactivate;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.log.Logger;
import org.osgi.service.log.LoggerFactory;
import org.osgi.service.metatype.MetaTypeInformation;
import org.osgi.service.metatype.MetaTypeService;

/**
 * Names a file in the watched folders that configures a PID of ours ({@value #OURS}...) which no
 * bundle designates or uses: a typo in the name ({@code io.ferrum.memory.cpu.devcie-t1.cfg}, {@code
 * io.ferrum.memory.cpux.cfg}) made a configuration that configured nothing, without a word. One
 * warning per file and PID names the file, its PID and the PIDs our bundles designate (their metatype,
 * read from the bundles themselves, so that no extender still at work at start can hide one). A PID
 * that no metatype designates but that a bundle's component or managed service takes ({@link
 * PidUsers}: a plugin without metatype) is used, and not named. A PID
 * whose namespace is ours but for a typo or two ({@code io.ferum.memory.cpu-1.cfg}, {@code
 * io.ferrum.memmory.pool.cfg}) is named too, with the nearest PID of ours, unless a bundle designates
 * or uses it; a namespace further from ours ({@code org.apache.felix.*}) is not ours to judge. The
 * configurations there at start are looked at once the framework started (FileInstall has installed
 * what {@code plugins/} held by then: it scans its folders as it starts), the later ones as they come.
 *
 * <p>A file may come before the plugin that designates its PID (saved while the plugin is not there,
 * or both dropped at once and FileInstall's watcher of {@code config/} first): the warning says that the
 * file changes nothing until such a bundle is installed, and when one is (or a managed service that
 * takes it is registered), a second warning says that the file named applies now.
 */
@Component(service = ConfigurationListener.class)
public final class UnusedConfigurations implements ConfigurationListener {
    /** The namespace of our PIDs: only those are checked, a plugin's own are not ours to judge. */
    static final String OURS = "io.ferrum.memory.";
    /** Edits (a letter missing, added or replaced) that still make a namespace a typo of ours. */
    static final int NEAR = 2;

    private final BundleContext context;
    private final ConfigurationAdmin configAdmin;
    private final MetaTypeService metatype;
    private final PidUsers users;
    private final Logger log;
    private final FrameworkListener started = e -> {
        if (e.getType() == FrameworkEvent.STARTED) {
            whileActive(this::checkAll);
        }
    };
    /** False once deactivated: listeners may still be called (see {@link #whileActive}). */
    private volatile boolean active = true;
    private volatile boolean frameworkStarted;
    /**
     * "PID file" of every file named already, to the PID of its configuration: a file deleted (its
     * configuration with it) and saved again is named again.
     */
    private final Map<String, String> named = new ConcurrentHashMap<>();
    /** The files named as configuring nothing, by "PID file", until a bundle designates their PID or they go. */
    private final Map<String, Waiting> waiting = new ConcurrentHashMap<>();
    private final BundleListener arrivals = e -> {
        if ((e.getType() == BundleEvent.RESOLVED || e.getType() == BundleEvent.STARTED) && !waiting.isEmpty()) {
            whileActive(this::designatedNow);
        }
    };
    /**
     * A managed service may be registered after its bundle started (by a component, once satisfied),
     * or be given its {@code service.pid} after its registration ({@code setProperties}: MODIFIED).
     */
    private final ServiceListener managedServices = e -> {
        if ((e.getType() == ServiceEvent.REGISTERED || e.getType() == ServiceEvent.MODIFIED) && !waiting.isEmpty()) {
            whileActive(this::designatedNow);
        }
    };

    /** A file named as configuring nothing: {@code pid} is its PID or factory PID, {@code configPid} its configuration's. */
    private record Waiting(String pid, String configPid, boolean factory, String file) {
    }

    @Activate
    public UnusedConfigurations(BundleContext context, @Reference ConfigurationAdmin configAdmin,
                                @Reference MetaTypeService metatype, @Reference(service = LoggerFactory.class) Logger log) {
        this.context = context;
        this.configAdmin = configAdmin;
        this.metatype = metatype;
        this.users = new PidUsers(context);
        this.log = log;
        context.addFrameworkListener(started);
        context.addBundleListener(arrivals);
        try {
            context.addServiceListener(managedServices, "(|(" + Constants.OBJECTCLASS + "=" + ManagedService.class.getName()
                    + ")(" + Constants.OBJECTCLASS + "=" + ManagedServiceFactory.class.getName() + "))");
        } catch (InvalidSyntaxException cannotBe) {
            throw new IllegalStateException(cannotBe);
        }
        if (context.getBundle(Constants.SYSTEM_BUNDLE_ID).getState() == Bundle.ACTIVE) {
            checkAll(); // this bundle (re)started after the framework did
        }
    }

    @Deactivate
    void deactivate() {
        active = false;
        context.removeFrameworkListener(started);
        context.removeBundleListener(arrivals);
        context.removeServiceListener(managedServices);
    }

    /**
     * Runs a listener's work unless this component has been deactivated. Felix delivers bundle events
     * (and Config Admin its events) on threads of their own, so a listener may run after {@link
     * #deactivate}, or while it runs: the bundle's context is then no longer valid, and its calls
     * threw "Invalid BundleContext" into Felix's event dispatcher, a stack trace on standard error as
     * the distribution stopped. The framework is going away; there is nothing to say.
     */
    private void whileActive(Runnable work) {
        if (!active) {
            return;
        }
        try {
            work.run();
        } catch (IllegalStateException invalidContext) {
            if (active) {
                throw invalidContext;
            }
        }
    }

    @Override
    public void configurationEvent(ConfigurationEvent event) {
        whileActive(() -> configurationChanged(event));
    }

    private void configurationChanged(ConfigurationEvent event) {
        if (event.getType() == ConfigurationEvent.CM_DELETED) {
            waiting.values().removeIf(w -> w.configPid().equals(event.getPid()));
            named.values().removeIf(event.getPid()::equals);
        }
        if (event.getType() == ConfigurationEvent.CM_UPDATED && frameworkStarted) {
            ConfigFiles.forPid(configAdmin, log, event.getPid(), this::check);
        }
    }

    private void checkAll() {
        frameworkStarted = true;
        ConfigFiles.forEach(configAdmin, log, "files that configure nothing", this::check);
    }

    private void check(Configuration c) {
        String pid = c.getFactoryPid() != null ? c.getFactoryPid() : c.getPid();
        Object name = c.getProperties() == null ? null : c.getProperties().get(ConfigFiles.FILENAME);
        boolean near = !pid.startsWith(OURS) && nearOurs(pid);
        if (name == null || !pid.startsWith(OURS) && !near) {
            return;
        }
        Set<String> pids = new TreeSet<>();
        Set<String> factoryPids = new TreeSet<>();
        designated(pids, factoryPids);
        if (near) {
            checkNear(c, pid, name, pids, factoryPids);
            return;
        }
        pids.removeIf(p -> !p.startsWith(OURS));
        factoryPids.removeIf(p -> !p.startsWith(OURS));
        // A factory configuration must name a factory PID: one of a single configuration's PID
        // (io.ferrum.memory.cpu-t1.cfg, meant as io.ferrum.memory.cpu.device-t1.cfg) configures that one.
        boolean factory = c.getFactoryPid() != null;
        boolean asSingle = factory && pids.contains(pid) && !factoryPids.contains(pid);
        // A PID no metatype designates may still be taken by a component or managed service (a plugin
        // without metatype): such a file is used. One that a metatype designates is judged by it alone.
        if ((factory ? factoryPids.contains(pid) : pids.contains(pid) || factoryPids.contains(pid))
                || !asSingle && users.user(pid, factory) != null
                || named.putIfAbsent(pid + " " + name, c.getPid()) != null) {
            return;
        }
        String file = ConfigFiles.file(name);
        Set<String> ours = shown(pids, factoryPids);
        if (asSingle) {
            log.warn("{} is a factory configuration of {}, which is designated as a single configuration: it configures"
                    + " that one as {}.cfg would; check the name (ours: {})", ControlCharacters.escaped(file), ControlCharacters.escaped(pid),
                    ControlCharacters.escaped(pid), String.join(", ", ours));
        } else {
            log.warn("{} configures {}, which no bundle designates: it changes nothing until a bundle that does is installed;"
                    + " check the name (ours: {})", ControlCharacters.escaped(file), ControlCharacters.escaped(pid), String.join(", ", ours));
            keepWaiting(c, pid, name, file);
        }
    }

    /**
     * Keeps a file named as configuring nothing until a bundle designates its PID. Looks once more
     * after keeping it: a bundle that came while the file was looked at (after the PIDs were read, before
     * the file was kept) found nothing to announce.
     */
    private void keepWaiting(Configuration c, String pid, Object name, String file) {
        waiting.put(pid + " " + name, new Waiting(pid, c.getPid(), c.getFactoryPid() != null, file));
        designatedNow();
    }

    /** Says, once, of each file waiting whose PID a bundle designates now, that it applies. */
    private void designatedNow() {
        for (Map.Entry<String, Waiting> e : waiting.entrySet()) {
            Waiting w = e.getValue();
            Bundle by = designator(w.pid(), w.factory());
            String does = "designates";
            if (by == null) {
                by = users.user(w.pid(), w.factory());
                does = "uses";
            }
            if (by != null && waiting.remove(e.getKey(), w)) {
                named.remove(e.getKey()); // should the bundle go and the file change, it is named again
                // A warning, as the one it takes back: at the Log Service's default level (WARN) an
                // info line is dropped, and whoever read the first reads the warnings.
                log.warn("{} configures {}, which {} {} {} now: the file, named as configuring nothing, applies",
                        ControlCharacters.escaped(w.file()), ControlCharacters.escaped(w.pid()), by.getSymbolicName(), by.getVersion(), does);
            }
        }
    }

    /** @return a bundle that designates {@code pid} (as a factory PID, for a factory configuration), or null */
    private Bundle designator(String pid, boolean factory) {
        for (Bundle b : context.getBundles()) {
            MetaTypeInformation info = metatype.getMetaTypeInformation(b);
            if (info != null && (Arrays.asList(info.getFactoryPids()).contains(pid)
                    || !factory && Arrays.asList(info.getPids()).contains(pid))) {
                return b;
            }
        }
        return null;
    }

    /** Names a file whose PID is in a namespace that is a typo of ours, unless a bundle designates or uses that PID. */
    private void checkNear(Configuration c, String pid, Object name, Set<String> pids, Set<String> factoryPids) {
        if (pids.contains(pid) || factoryPids.contains(pid) || users.user(pid, c.getFactoryPid() != null) != null
                || named.putIfAbsent(pid + " " + name, c.getPid()) != null) {
            return; // a plugin's own PID, in a namespace that happens to look like ours
        }
        pids.removeIf(p -> !p.startsWith(OURS));
        factoryPids.removeIf(p -> !p.startsWith(OURS));
        String nearest = nearest(pid, c.getFactoryPid() != null, pids, factoryPids);
        log.warn("{} configures {}, whose namespace is not ours ({}) but close to it: it changes nothing; {}check the name"
                + " (ours: {})", ControlCharacters.escaped(ConfigFiles.file(name)), ControlCharacters.escaped(pid), OURS, nearest == null ? "" : "the nearest PID of ours is " + nearest + "; ",
                String.join(", ", shown(pids, factoryPids)));
        keepWaiting(c, pid, name, ConfigFiles.file(name));
    }

    /**
     * @param pid a PID not in our namespace
     * @return whether its namespace is ours but for {@value #NEAR} edits or fewer, or but for case: the
     *         fewest edits from {@value #OURS} to a start of the PID
     */
    static boolean nearOurs(String pid) {
        int[] row = edits(OURS, pid.toLowerCase(Locale.ROOT));
        return Arrays.stream(row).min().orElseThrow() <= NEAR;
    }

    /**
     * @param pid the PID (or factory PID) of a configuration
     * @param factory whether the configuration is a factory configuration: then the factory PIDs are
     *        looked at first, as only those make a new instance
     * @return the PID of ours fewest edits away from {@code pid}, a factory PID as {@code <pid>-<name>},
     *         or null when there is none
     */
    static String nearest(String pid, boolean factory, Set<String> pids, Set<String> factoryPids) {
        String best = null;
        int fewest = Integer.MAX_VALUE;
        Set<String> candidates = new TreeSet<>(factoryPids);
        if (!factory || factoryPids.isEmpty()) {
            candidates.addAll(pids);
        }
        for (String p : candidates) {
            int d = edits(pid, p)[p.length()];
            if (d < fewest) {
                fewest = d;
                best = factoryPids.contains(p) ? p + "-<name>" : p;
            }
        }
        return best;
    }

    /**
     * @return the Levenshtein distances from {@code a} to each start of {@code b}: element {@code j}
     *         counts the edits (insert, delete, replace) from {@code a} to {@code b}'s first {@code j}
     *         characters
     */
    private static int[] edits(String a, String b) {
        int[] prev = new int[b.length() + 1];
        int[] cur = new int[b.length() + 1];
        for (int j = 0; j <= b.length(); j++) {
            prev[j] = j;
        }
        for (int i = 1; i <= a.length(); i++) {
            cur[0] = i;
            for (int j = 1; j <= b.length(); j++) {
                int replace = prev[j - 1] + (a.charAt(i - 1) == b.charAt(j - 1) ? 0 : 1);
                cur[j] = Math.min(replace, Math.min(prev[j], cur[j - 1]) + 1);
            }
            int[] t = prev;
            prev = cur;
            cur = t;
        }
        return prev;
    }

    /** @return the PIDs as a file names them: a factory PID as {@code <pid>-<name>} */
    private static Set<String> shown(Set<String> pids, Set<String> factoryPids) {
        Set<String> ours = new TreeSet<>(pids);
        factoryPids.forEach(f -> ours.add(f + "-<name>"));
        return ours;
    }

    /** Adds the PIDs and factory PIDs that the installed bundles designate (metatype), in any namespace. */
    private void designated(Set<String> pids, Set<String> factoryPids) {
        for (Bundle b : context.getBundles()) {
            MetaTypeInformation info = metatype.getMetaTypeInformation(b);
            if (info != null) {
                pids.addAll(Arrays.asList(info.getPids()));
                factoryPids.addAll(Arrays.asList(info.getFactoryPids()));
            }
        }
    }
}
