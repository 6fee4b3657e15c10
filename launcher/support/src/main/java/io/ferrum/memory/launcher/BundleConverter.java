package io.ferrum.memory.launcher;

import java.util.ArrayList;
import java.util.List;

import org.apache.felix.service.command.Converter;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.service.component.annotations.Activate;
import org.osgi.service.component.annotations.Component;

/**
 * Lets the console's commands take a bundle as people name it: {@code uninstall 12}, {@code stop
 * io.ferrum.memory.cpu}. Gogo's own shell brings such a converter; the distribution's console
 * replaces that shell ({@link Console}), so it brings this one. A bundle is found by its id, else by
 * its symbolic name when exactly one bundle has it, else by its location; anything else is left to
 * Gogo, which then reports that it cannot use the argument.
 */
@Component(service = Converter.class)
public final class BundleConverter implements Converter {
    private final BundleContext context;

    @Activate
    public BundleConverter(BundleContext context) {
        this.context = context;
    }

    @Override
    public Object convert(Class<?> desiredType, Object in) {
        if (desiredType != Bundle.class || in instanceof Bundle) {
            return null;
        }
        return find(context, String.valueOf(in));
    }

    /**
     * @return the bundle {@code given} names: by its id, else by its symbolic name when exactly one bundle has it, else
     *         by its location; null when none (or two versions of one name) is so named
     */
    static Bundle find(BundleContext context, String given) {
        String text = given.strip();
        if (text.matches("\\d{1,18}")) {
            return context.getBundle(Long.parseLong(text));
        }
        Bundle byName = null;
        for (Bundle b : context.getBundles()) {
            if (text.equals(b.getSymbolicName())) {
                if (byName != null) {
                    return null; // two versions: only the id says which
                }
                byName = b;
            }
        }
        return byName != null ? byName : context.getBundle(text);
    }

    /**
     * @param verb    what the command does with the bundle, as the refusal says it ({@code "update"})
     * @param nothing how the refusal ends ({@code "; nothing was updated"})
     * @return the bundle {@code given} names, as {@link #find} finds it; null when it names none and is no id
     * @throws IllegalArgumentException for an id no bundle has, or a name two bundles have (only the id says which)
     */
    static Bundle findOrRefuse(BundleContext context, String given, String verb, String nothing) {
        String text = given.strip();
        Bundle found = find(context, text);
        if (found != null) {
            return found;
        }
        String shown = ControlCharacters.escaped(text);
        if (text.matches("\\d{1,18}")) {
            throw new IllegalArgumentException("No bundle has the id " + shown + " (lb lists the installed bundles)" + nothing);
        }
        List<Long> named = new ArrayList<>();
        for (Bundle b : context.getBundles()) {
            if (text.equals(b.getSymbolicName())) {
                named.add(b.getBundleId());
            }
        }
        if (named.size() > 1) {
            throw new IllegalArgumentException(named.size() + " bundles are named " + shown + " (ids " + named.toString()
                    .replaceAll("[\\[\\]]", "") + "): give the id of the one to " + verb + nothing);
        }
        return null;
    }

    @Override
    public CharSequence format(Object target, int level, Converter escape) {
        if (target instanceof Bundle b) {
            return b.getBundleId() + " " + b.getSymbolicName() + " " + b.getVersion();
        }
        return null;
    }
}
