package io.ferrum.memory.api;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

import org.osgi.service.component.annotations.ComponentPropertyType;

/**
 * The {@value AllocationStrategy#NAME_PROPERTY} service property of an {@link AllocationStrategy}
 * component: {@code @StrategyName("best-fit")}. The name must equal {@link AllocationStrategy#name()};
 * a strategy keeps it in one constant used by both.
 */
@ComponentPropertyType
@Retention(RetentionPolicy.CLASS)
@Target(ElementType.TYPE)
public @interface StrategyName {

    /** Prefix of the property name; with the type's name it makes {@value AllocationStrategy#NAME_PROPERTY}. */
    String PREFIX_ = "memory.";

    /** @return the strategy's name */
    String value();
}
