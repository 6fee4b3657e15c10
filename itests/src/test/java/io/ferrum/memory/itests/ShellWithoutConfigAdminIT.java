package io.ferrum.memory.itests;

import static org.junit.Assert.assertEquals;
import static org.ops4j.pax.exam.CoreOptions.composite;
import static org.ops4j.pax.exam.CoreOptions.options;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;

import javax.inject.Inject;

import org.apache.felix.service.command.CommandProcessor;
import org.apache.felix.service.command.CommandSession;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.ops4j.pax.exam.Configuration;
import org.ops4j.pax.exam.Option;
import org.ops4j.pax.exam.junit.PaxExam;
import org.ops4j.pax.exam.spi.reactors.ExamReactorStrategy;
import org.ops4j.pax.exam.spi.reactors.PerClass;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;

/**
 * The shell imports Config Admin optionally (only {@code mem:strategy} saves through it): without it
 * the bundle still starts, its activator loads every class it loads with Config Admin but Config
 * Admin's, and the commands answer. Here with no monitor and no backend either.
 */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerClass.class)
public class ShellWithoutConfigAdminIT {

    @Inject
    private BundleContext context;

    @Inject
    private CommandProcessor processor;

    @Configuration
    public Option[] config() {
        Option log = "felix".equals(FerrumOptions.frameworkUnderTest()) ? FerrumOptions.reactorBundle("log") : composite();
        return options(FerrumOptions.reactorBundle("function"), FerrumOptions.reactorBundle("promise"),
                FerrumOptions.reactorBundle("component"), log, FerrumOptions.reactorBundle("scr"),
                FerrumOptions.reactorBundle("api"), FerrumOptions.reactorBundle("gogo"), FerrumOptions.reactorBundle("shell"),
                FerrumOptions.testSupport());
    }

    @Test
    public void theShellStartsAndAnswersWithoutConfigAdmin() throws Exception {
        assertEquals(FerrumOptions.expectedSystemBundle(), context.getBundle(0).getSymbolicName());
        Bundle shell = Await.installed(context, "io.ferrum.memory.shell");
        assertEquals("the shell's state", Bundle.ACTIVE, shell.getState());
        Await.until("the shell's commands", () -> shell.getRegisteredServices() != null
                && shell.getRegisteredServices().length == 7);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrintStream ps = new PrintStream(out, true, StandardCharsets.UTF_8);
        try (CommandSession session = processor.createSession(new ByteArrayInputStream(new byte[0]), ps, ps)) {
            assertEquals("error: No memory monitor is running: start the bundle io.ferrum.memory.monitor",
                    String.valueOf(session.execute("mem:devices")));
        }
        assertEquals("classes of the shell left undefined without Config Admin", List.of(), UndefinedClasses.of(shell, 18));
    }
}
