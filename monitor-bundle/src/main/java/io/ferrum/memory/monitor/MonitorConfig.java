package io.ferrum.memory.monitor;

import org.osgi.service.metatype.annotations.AttributeDefinition;
import org.osgi.service.metatype.annotations.ObjectClassDefinition;

/** Configuration of the global monitor and router (PID {@code io.ferrum.memory.monitor}). */
@ObjectClassDefinition(name = "Ferrum Memory global monitor",
        description = "Which allocation strategy the router uses, how often observers get samples, how often a routed allocation is retried.")
public @interface MonitorConfig {

    @AttributeDefinition(description = "Name of the active allocation strategy (memory.strategy.name), e.g. best-fit."
            + " Empty: the strategy with the highest service ranking, best-fit among equals.")
    String strategy() default "";

    @AttributeDefinition(description = "Milliseconds between samples sent to observers; 0 turns sampling off."
            + " A sample also updates the pressure level of a manager that does not report its own (see ARCHITECTURE.md).")
    long samplePeriodMs() default 5000;

    @AttributeDefinition(description = "Devices a routed allocation may try before it fails (each out-of-memory"
            + " device is left out and the strategy asked again).")
    int maxAttempts() default 4;
}
