package io.ferrum.memory.itests;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.ops4j.pax.exam.CoreOptions.options;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;

import javax.inject.Inject;

import org.apache.felix.service.command.CommandProcessor;
import org.apache.felix.service.command.CommandSession;
import org.apache.felix.service.command.Converter;
import org.junit.Test;
import org.junit.runner.RunWith;
import org.ops4j.pax.exam.Configuration;
import org.ops4j.pax.exam.Option;
import org.ops4j.pax.exam.junit.PaxExam;
import org.ops4j.pax.exam.spi.reactors.ExamReactorStrategy;
import org.ops4j.pax.exam.spi.reactors.PerClass;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.ServiceReference;
import org.osgi.framework.wiring.BundleWiring;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;

/**
 * The cuda backend on a machine without a GPU (CI's), on Felix and on Equinox: the JCuda bundle and
 * the cuda bundle resolve and start, the probe says why there is no device in its condition and in
 * {@code mem:backends}, no cuda manager or factory appears, and cpu:0 serves as before.
 */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerClass.class)
public class CudaProbeIT {

    @Inject
    private BundleContext context;

    @Inject
    private CommandProcessor processor;

    @Configuration
    public Option[] config() {
        return options(FerrumOptions.cpuBackend(), FerrumOptions.reactorBundle("jcuda"), FerrumOptions.reactorBundle("cuda"),
                FerrumOptions.reactorBundle("gogo"), FerrumOptions.reactorBundle("shell"), FerrumOptions.testSupport());
    }

    private String run(String command) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        PrintStream ps = new PrintStream(out, true, StandardCharsets.UTF_8);
        try (CommandSession session = processor.createSession(new ByteArrayInputStream(new byte[0]), ps, ps)) {
            Object value = session.execute(command);
            if (value != null) {
                ps.println(session.format(value, Converter.INSPECT));
            }
        }
        return out.toString(StandardCharsets.UTF_8);
    }

    @Test
    public void withoutAGpuTheBackendIsActiveServesNothingAndSaysWhy() throws Exception {
        assertEquals(FerrumOptions.expectedSystemBundle(), context.getBundle(0).getSymbolicName());
        Bundle cuda = Await.installed(context, "io.ferrum.memory.cuda");
        Bundle jcuda = Await.installed(context, "io.ferrum.memory.jcuda");
        assertEquals(Bundle.ACTIVE, jcuda.getState());
        Await.until("cuda bundle active", () -> cuda.getState() == Bundle.ACTIVE);

        ServiceReference<?>[] unavailable = null;
        for (int i = 0; i < 100 && unavailable == null; i++) {
            unavailable = context.getServiceReferences("org.osgi.service.condition.Condition",
                    "(osgi.condition.id=io.ferrum.memory.cuda.unavailable)");
            if (unavailable == null) {
                Thread.sleep(50);
            }
        }
        assertNotNull("the probe registers the unavailable condition", unavailable);
        String reason = String.valueOf(unavailable[0].getProperty("memory.backend.status"));
        assertTrue(reason, reason.startsWith("inactive: no CUDA driver") || reason.startsWith("inactive: a CUDA driver is installed"));
        assertNull(context.getServiceReferences("org.osgi.service.condition.Condition",
                "(osgi.condition.id=io.ferrum.memory.cuda.available)"));

        Await.service(context, DeviceMemoryManager.class, Device.cpu());
        assertNull(context.getServiceReferences(DeviceMemoryManager.class.getName(), "(memory.device.kind=cuda)"));
        assertNull(context.getServiceReferences("io.ferrum.memory.api.MemoryManagerFactory", "(memory.device.kind=cuda)"));

        String backends = run("mem:backends");
        assertTrue(backends, backends.contains("io.ferrum.memory.cuda") && backends.contains(reason));
    }

    /**
     * The cuda bundle's form of what {@code CpuBackendIT.everyClassOfTheCpuBundleIsDefinedOnceCpuZeroServes}
     * checks: a manager of the cuda bundle serves through its {@code CudaUpstream} on the callers'
     * threads, also while Equinox uninstalls the bundle, so every class of it is defined when the
     * first upstream is made ({@code CudaUpstream}'s static initialiser). Without a GPU no upstream is
     * made: the test initialises the class as the first {@code new CudaUpstream} does, then lists what
     * Equinox's loader has not defined ({@link UndefinedClasses}; Felix: skipped).
     */
    @Test
    public void everyClassOfTheCudaBundleIsDefinedOnceItsUpstreamClassIsInitialised() throws Exception {
        Bundle cuda = Await.installed(context, "io.ferrum.memory.cuda");
        Await.until("cuda bundle active", () -> cuda.getState() == Bundle.ACTIVE);
        Class.forName("io.ferrum.memory.cuda.CudaUpstream", true, cuda.adapt(BundleWiring.class).getClassLoader());
        assertEquals("classes of the cuda bundle a call could still need after its uninstall", List.of(),
                UndefinedClasses.of(cuda, 20));
        assertEquals("imported classes the cuda bundle would still ask its exporter for", List.of(),
                UndefinedClasses.ofImports(cuda));
    }
}
