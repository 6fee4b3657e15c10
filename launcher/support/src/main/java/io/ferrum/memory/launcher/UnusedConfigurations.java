package io.ferrum.memory.launcher;

import java.io.File;
import java.io.IOException;
import java.net.URI;
import java.util.Arrays;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;

import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;
import org.osgi.framework.FrameworkEvent;
import org.osgi.framework.FrameworkListener;
import org.osgi.framework.InvalidSyntaxException;
import org.osgi.service.cm.Configuration;
import org.osgi.service.cm.ConfigurationAdmin;
import org.osgi.service.cm.ConfigurationEvent;
import org.osgi.service.cm.ConfigurationListener;
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
 * bundle designates: a typo in the name ({@code io.ferrum.memory.cpu.devcie-t1.cfg}, {@code
 * io.ferrum.memory.cpux.cfg}) made a configuration that configured nothing, without a word. One
 * warning per file and PID names the file, its PID and the PIDs our bundles designate (their metatype,
 * read from the bundles themselves, so that no extender still at work at start can hide one). The
 * configurations there at start are looked at once the framework started, the later ones as they come.
 */
@Component(service = ConfigurationListener.class)
public final class UnusedConfigurations implements ConfigurationListener {
    /** The namespace of our PIDs: only those are checked, a plugin's own are not ours to judge. */
    static final String OURS = "io.ferrum.memory.";
    static final String FILENAME = "felix.fileinstall.filename";

    private final BundleContext context;
    private final ConfigurationAdmin configAdmin;
    private final MetaTypeService metatype;
    private final Logger log;
    private final FrameworkListener started = e -> {
        if (e.getType() == FrameworkEvent.STARTED) {
            checkAll();
        }
    };
    private volatile boolean frameworkStarted;
    /** "PID file" of every file named already. */
    private final Set<String> named = ConcurrentHashMap.newKeySet();

    @Activate
    public UnusedConfigurations(BundleContext context, @Reference ConfigurationAdmin configAdmin,
                                @Reference MetaTypeService metatype, @Reference(service = LoggerFactory.class) Logger log) {
        this.context = context;
        this.configAdmin = configAdmin;
        this.metatype = metatype;
        this.log = log;
        context.addFrameworkListener(started);
        if (context.getBundle(Constants.SYSTEM_BUNDLE_ID).getState() == Bundle.ACTIVE) {
            checkAll(); // this bundle (re)started after the framework did
        }
    }

    @Deactivate
    void deactivate() {
        context.removeFrameworkListener(started);
    }

    @Override
    public void configurationEvent(ConfigurationEvent event) {
        if (event.getType() == ConfigurationEvent.CM_UPDATED && frameworkStarted) {
            try {
                Configuration[] found = configAdmin.listConfigurations("(service.pid=" + escape(event.getPid()) + ")");
                if (found != null) {
                    check(found[0]);
                }
            } catch (IOException | InvalidSyntaxException e) {
                log.warn("Cannot look at configuration {}: {}", event.getPid(), e.toString());
            }
        }
    }

    private void checkAll() {
        frameworkStarted = true;
        try {
            Configuration[] present = configAdmin.listConfigurations("(" + FILENAME + "=*)");
            for (Configuration c : present == null ? new Configuration[0] : present) {
                check(c);
            }
        } catch (IOException | InvalidSyntaxException e) {
            log.warn("Cannot list the configurations to look for files that configure nothing: {}", e.toString());
        }
    }

    private void check(Configuration c) {
        String pid = c.getFactoryPid() != null ? c.getFactoryPid() : c.getPid();
        Object name = c.getProperties() == null ? null : c.getProperties().get(FILENAME);
        if (name == null || !pid.startsWith(OURS)) {
            return;
        }
        Set<String> pids = new TreeSet<>();
        Set<String> factoryPids = new TreeSet<>();
        designated(pids, factoryPids);
        // A factory configuration must name a factory PID: one of a single configuration's PID
        // (io.ferrum.memory.cpu-t1.cfg, meant as io.ferrum.memory.cpu.device-t1.cfg) configures that one.
        boolean factory = c.getFactoryPid() != null;
        boolean asSingle = factory && pids.contains(pid) && !factoryPids.contains(pid);
        if ((factory ? factoryPids.contains(pid) : pids.contains(pid) || factoryPids.contains(pid))
                || !named.add(pid + " " + name)) {
            return;
        }
        String file;
        try {
            file = new File(URI.create(name.toString())).getAbsolutePath();
        } catch (IllegalArgumentException notAFile) {
            file = name.toString();
        }
        Set<String> ours = new TreeSet<>(pids);
        factoryPids.forEach(f -> ours.add(f + "-<name>"));
        if (asSingle) {
            log.warn("{} is a factory configuration of {}, which is designated as a single configuration: it configures"
                    + " that one as {}.cfg would; check the name (ours: {})", file, pid, pid, String.join(", ", ours));
        } else {
            log.warn("{} configures {}, which no bundle designates: it changes nothing; check the name (ours: {})", file,
                    pid, String.join(", ", ours));
        }
    }

    /** Adds the PIDs and factory PIDs of ours that the installed bundles designate (metatype). */
    private void designated(Set<String> pids, Set<String> factoryPids) {
        for (Bundle b : context.getBundles()) {
            MetaTypeInformation info = metatype.getMetaTypeInformation(b);
            if (info != null) {
                Arrays.stream(info.getPids()).filter(p -> p.startsWith(OURS)).forEach(pids::add);
                Arrays.stream(info.getFactoryPids()).filter(p -> p.startsWith(OURS)).forEach(factoryPids::add);
            }
        }
    }

    private static String escape(String value) {
        return value.replace("\\", "\\\\").replace("*", "\\*").replace("(", "\\(").replace(")", "\\)");
    }
}
