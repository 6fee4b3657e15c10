package io.ferrum.memory.launcher.plugin;

import java.util.Map;

/**
 * The component of the plugin bundle that {@code DistributionIT} builds: declared in a component
 * description of its own, with no metatype; it prints the configuration it gets, so that the test
 * sees the plugin take the file.
 */
public final class NoMetatypeComponent {
    public void activate(Map<String, Object> properties) {
        System.out.println("plugin component got size=" + properties.get("size"));
    }
}
