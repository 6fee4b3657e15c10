package io.ferrum.memory.shell;

import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

import org.osgi.service.component.annotations.ComponentPropertyType;

/**
 * The Gogo service properties of a command component: {@code @MemCommand({"alloc", "free"})}
 * sets {@code osgi.command.scope=mem} and one {@code osgi.command.function} per name, so the
 * scope is written once, here, for every command class of the bundle. Kept at run time so that a
 * test can check that the functions named are exactly a class's public commands.
 */
@ComponentPropertyType
@Retention(RetentionPolicy.RUNTIME)
@Target(ElementType.TYPE)
@interface MemCommand {

    /** Prefix of the property names: {@code osgi.command.scope} and {@code osgi.command.function}. */
    String PREFIX_ = "osgi.command.";

    /** @return the Gogo scope of every {@code mem:*} command */
    String scope() default "mem";

    /** @return the public methods of the component that Gogo offers as commands */
    String[] function();
}
