package io.ferrum.memory.monitor;

import org.osgi.service.metatype.annotations.AttributeDefinition;
import org.osgi.service.metatype.annotations.AttributeType;
import org.osgi.service.metatype.annotations.ObjectClassDefinition;

/**
 * Configuration of the global monitor and router (PID {@code io.ferrum.memory.monitor}).
 *
 * <p>The numbers are declared to Metatype as numbers but read here as text: DS would otherwise
 * convert {@code samplePeriodMs=abc} itself and fail the activation with a stack trace, leaving no
 * monitor at all. {@link MonitorSettings} reads them (a Config Admin user's {@code Long} arrives as
 * its text too), and a configuration with a bad value is refused whole.
 */
@ObjectClassDefinition(name = "Ferrum Memory global monitor",
        description = "Which allocation strategy the router uses, how often observers get samples, how often a routed allocation is retried."
                + " A configuration with a bad value is refused whole (one error line naming every bad value; mem:strategy shows it).")
public @interface MonitorConfig {

    @AttributeDefinition(description = "Name of the active allocation strategy (memory.strategy.name), e.g. best-fit."
            + " Empty: the strategy with the highest service ranking, best-fit among equals.")
    String strategy() default "";

    @AttributeDefinition(type = AttributeType.LONG, description = "Milliseconds between samples sent to observers, 0 or more;"
            + " 0 turns sampling off. A sample also updates the pressure level of a manager that does not report its own"
            + " (see ARCHITECTURE.md).")
    String samplePeriodMs() default "5000";

    @AttributeDefinition(type = AttributeType.INTEGER, description = "Devices a routed allocation may try before it fails,"
            + " 1 or more (each out-of-memory device is left out and the strategy asked again).")
    String maxAttempts() default "4";
}
