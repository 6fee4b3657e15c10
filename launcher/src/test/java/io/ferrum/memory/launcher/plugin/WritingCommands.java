package io.ferrum.memory.launcher.plugin;

import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.PrintStream;
import java.util.Arrays;
import java.util.Dictionary;
import java.util.Hashtable;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.osgi.framework.BundleActivator;
import org.osgi.framework.BundleContext;

/**
 * The activator of the bundle that {@code ConsoleIT} builds: Gogo commands {@code test:interrupted}
 * (interrupts its own thread, then writes to {@code System.out} and {@code System.err}, as Felix's
 * logger does from a statement's thread), {@code test:print WORD} (writes a line naming WORD to both)
 * and two that order a test's steps: {@code test:awaitLineRead}, {@code test:whenConsoleEnds}.
 */
public final class WritingCommands implements BundleActivator {
    @Override
    public void start(BundleContext context) {
        Dictionary<String, Object> p = new Hashtable<>();
        p.put("osgi.command.scope", "test");
        p.put("osgi.command.function", new String[] {"interrupted", "print", "awaitLineRead", "whenConsoleEnds"});
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

    /**
     * Waits (at most 30 s) until a thread reads a line at the terminal. After {@code update} in one
     * pipeline, it keeps that statement running until a console started again reads.
     */
    public boolean awaitLineRead() throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            boolean reading = Thread.getAllStackTraces().values().stream().flatMap(Arrays::stream)
                    .anyMatch(f -> f.getClassName().equals("org.jline.reader.impl.LineReaderImpl") && f.getMethodName().equals("readLine"));
            if (reading) {
                return true;
            }
            Thread.sleep(20);
        }
        return false;
    }

    /**
     * Once every console thread running now has ended (at most 30 s), says so on the process's own
     * standard output (at a terminal, the terminal), from a thread of its own.
     */
    public String whenConsoleEnds() {
        List<Thread> consoles = Thread.getAllStackTraces().keySet().stream()
                .filter(t -> t.getName().equals("ferrum console")).toList();
        Thread watcher = new Thread(() -> {
            try {
                for (Thread c : consoles) {
                    c.join(30_000);
                }
            } catch (InterruptedException e) {
                return;
            }
            boolean ended = consoles.stream().noneMatch(Thread::isAlive);
            new PrintStream(new FileOutputStream(FileDescriptor.out), true)
                    .println(ended ? "the console ended" : "the console still runs");
        }, "console watcher");
        watcher.setDaemon(true);
        watcher.start();
        return "watching " + consoles.size() + " console";
    }
}
