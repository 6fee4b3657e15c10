package io.ferrum.memory.launcher.plugin;

import java.util.Dictionary;
import java.util.Hashtable;

import org.osgi.framework.BundleActivator;
import org.osgi.framework.BundleContext;

/**
 * The activator of the bundle that {@code ConsoleIT} builds to print through a session as Felix's
 * logger does: Gogo commands {@code test:interrupted} (interrupts its own thread, then writes to
 * {@code System.out} and {@code System.err}) and {@code test:print WORD} (writes a line naming WORD
 * to both).
 */
public final class WritingCommands implements BundleActivator {
    @Override
    public void start(BundleContext context) {
        Dictionary<String, Object> p = new Hashtable<>();
        p.put("osgi.command.scope", "test");
        p.put("osgi.command.function", new String[] {"interrupted", "print"});
        context.registerService(Object.class, this, p);
    }

    @Override
    public void stop(BundleContext context) {
    }

    public void interrupted() {
        Thread.currentThread().interrupt();
        System.out.println("interrupted, to the output");
        System.err.println("interrupted, to the error");
    }

    public void print(String word) {
        System.out.println(word + " to the output");
        System.err.println(word + " to the error");
    }
}
