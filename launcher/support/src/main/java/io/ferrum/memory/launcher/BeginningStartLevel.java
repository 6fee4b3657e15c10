package io.ferrum.memory.launcher;

import java.util.function.UnaryOperator;

import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;

/**
 * The start level a launch raises the framework to: {@code org.osgi.framework.startlevel.beginning}, where it is
 * honest. The bnd launcher raises the level itself once the framework has started (its {@code
 * StartLevelRuntimeHandler}, which places the bundles of {@code -runbundles} at their levels): it hands the framework 1
 * for that property, and the bndrun's value (100 in the distribution) is left only in the JVM's system properties,
 * which it set before. Taken from the framework alone, the launch was over at level 1: the console ran its first
 * statement at level 10 of 100, before the plugins started, and the installers took each launch for a restart of their
 * bundle.
 */
final class BeginningStartLevel {
    private BeginningStartLevel() {
    }

    /** @return the beginning start level of {@code context}'s framework, read as {@link #of(BundleContext, UnaryOperator)} does */
    static int of(BundleContext context) {
        return of(context, System::getProperty);
    }

    /**
     * @param jvm the JVM's system properties, by name
     * @return the framework's beginning start level (1 when it names none); when that is 1, as the bnd launcher makes
     *         it, the level the JVM's property names if higher
     */
    static int of(BundleContext context, UnaryOperator<String> jvm) {
        int framework = level(context.getProperty(Constants.FRAMEWORK_BEGINNING_STARTLEVEL));
        return framework == 1 ? Math.max(framework, level(jvm.apply(Constants.FRAMEWORK_BEGINNING_STARTLEVEL))) : framework;
    }

    /** @return the level {@code value} names, or 1 (the framework's default) when it names none */
    private static int level(String value) {
        try {
            return value == null ? 1 : Math.max(1, Integer.parseInt(value.strip()));
        } catch (NumberFormatException notALevel) {
            return 1;
        }
    }
}
