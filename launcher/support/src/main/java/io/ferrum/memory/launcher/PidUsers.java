package io.ferrum.memory.launcher;

import java.io.IOException;
import java.io.InputStream;
import java.net.URL;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Dictionary;
import java.util.Enumeration;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

import javax.xml.parsers.SAXParser;

import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;
import org.osgi.framework.InvalidSyntaxException;
import org.osgi.framework.ServiceReference;
import org.osgi.service.cm.ManagedService;
import org.osgi.service.cm.ManagedServiceFactory;
import org.xml.sax.Attributes;
import org.xml.sax.SAXException;
import org.xml.sax.helpers.DefaultHandler;

/**
 * The bundles that take the configurations of a PID whether or not their metatype designates it: one
 * that describes a Declarative Services component whose configuration PID it is, and one that
 * registered a {@link ManagedService} or {@link ManagedServiceFactory} with it as {@code service.pid}.
 * The component descriptions are read from the bundles themselves, as their metatype is, and from
 * every bundle installed: SCR's runtime may not have looked at every bundle yet when the framework
 * reports it started, and FileInstall starts what {@code plugins/} holds only after that (it installs
 * it before). A managed service is known only once its bundle registered it.
 */
final class PidUsers {
    /** The namespaces of the Declarative Services component descriptions, all versions. */
    private static final String DS_NAMESPACE = "http://www.osgi.org/xmlns/scr/";

    private final BundleContext context;

    PidUsers(BundleContext context) {
        this.context = context;
    }

    /**
     * @param pid a PID, or the factory PID of a factory configuration
     * @param factory whether the configuration is a factory configuration: a component takes both
     *        kinds (one component configuration per factory configuration), a managed service only a
     *        single one, a managed service factory only factory ones
     * @return a bundle that takes such a configuration of {@code pid}, or null
     */
    Bundle user(String pid, boolean factory) {
        for (Bundle b : context.getBundles()) {
            if (componentPids(b).contains(pid)) {
                return b;
            }
        }
        String service = factory ? ManagedServiceFactory.class.getName() : ManagedService.class.getName();
        try {
            ServiceReference<?>[] refs = context.getAllServiceReferences(service, "(" + Constants.SERVICE_PID + "=" + ConfigFiles.escape(pid) + ")");
            for (ServiceReference<?> r : refs == null ? new ServiceReference<?>[0] : refs) {
                Bundle b = r.getBundle();
                if (b != null) { // null: unregistered since
                    return b;
                }
            }
        } catch (InvalidSyntaxException cannotBe) {
            throw new IllegalStateException("the filter of " + pid + " is escaped", cannotBe);
        }
        return null;
    }

    /**
     * @return the configuration PIDs of the components {@code bundle} describes (its {@code
     *         Service-Component} header; a fragment's is not read, by SCR neither)
     */
    private static Set<String> componentPids(Bundle bundle) {
        Set<String> pids = new LinkedHashSet<>();
        Dictionary<String, String> headers = bundle.getHeaders("");
        String header = headers.get("Service-Component");
        if (header == null || headers.get(Constants.FRAGMENT_HOST) != null) {
            return pids;
        }
        try {
            for (String path : header.split(",")) {
                for (URL entry : entries(bundle, path.strip())) {
                    try (InputStream in = entry.openStream()) {
                        pids.addAll(componentPids(in));
                    } catch (IOException | SAXException unreadable) {
                        // SCR cannot read it either, and says so: its components take nothing
                    }
                }
            }
        } catch (IllegalStateException uninstalledMeanwhile) {
            // its components take nothing any more
        }
        return pids;
    }

    /**
     * @return the documents a path of the {@code Service-Component} header names: the entry itself, or
     *         where its last part holds a wildcard or it is in a fragment, those {@code findEntries}
     *         finds (not in a bundle only installed: findEntries would resolve it, which is not ours to do)
     */
    private static List<URL> entries(Bundle bundle, String path) {
        URL entry = path.contains("*") ? null : bundle.getEntry(path);
        if (entry != null || bundle.getState() == Bundle.INSTALLED) {
            return entry == null ? List.of() : List.of(entry);
        }
        int slash = path.lastIndexOf('/');
        Enumeration<URL> found = bundle.findEntries(slash < 0 ? "/" : path.substring(0, slash), path.substring(slash + 1), false);
        return found == null ? List.of() : Collections.list(found);
    }

    /**
     * @param xml a component description document: one {@code component} element, or several in
     *        another root element, in a DS namespace (or, DS 1.0, none)
     * @return the configuration PIDs its components take: each one's {@code configuration-pid}
     *         (several, space separated, since DS 1.3; {@code $} is the component's name) or its name,
     *         unless its {@code configuration-policy} is {@code ignore}; a component without a name
     *         (DS 1.1 and later) is named by its implementation class, as SCR names it
     */
    static List<String> componentPids(InputStream xml) throws IOException, SAXException {
        // SAX, as SCR reads them: internal entities expanded, no external one read. Not StAX: the JDK's
        // prints "[Fatal Error] ..." on standard error for bytes not valid in the document's encoding.
        SAXParser parser = SaxParsers.withoutExternalEntities(true);
        List<String> pids = new ArrayList<>();
        parser.parse(xml, new DefaultHandler() {
            private int depth;
            private int component = -1; // the depth of the component element being read, -1 outside one
            private String name;
            private String configured;

            @Override
            public void startElement(String uri, String localName, String qName, Attributes attributes) {
                depth++;
                if (component < 0 && localName.equals("component") && (uri.isEmpty() || uri.startsWith(DS_NAMESPACE))
                        && !"ignore".equals(attributes.getValue("", "configuration-policy"))) {
                    name = attributes.getValue("", "name");
                    configured = attributes.getValue("", "configuration-pid");
                    // Without a name, invalid in DS 1.0: SCR takes no configuration for it.
                    component = name == null && (uri.isEmpty() || uri.equals(DS_NAMESPACE + "v1.0.0")) ? -1 : depth;
                } else if (component >= 0 && depth == component + 1 && name == null && localName.equals("implementation")) {
                    name = attributes.getValue("", "class");
                }
            }

            @Override
            public void endElement(String uri, String localName, String qName) {
                if (depth-- == component) {
                    component = -1;
                    for (String pid : configured == null ? new String[] {name} : configured.strip().split("\\s+")) {
                        pids.add("$".equals(pid) ? name : pid);
                    }
                }
            }
        });
        pids.removeIf(p -> p == null || p.isEmpty());
        return pids;
    }
}
