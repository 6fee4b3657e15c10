package io.ferrum.memory.itests;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertTrue;
import static org.ops4j.pax.exam.CoreOptions.options;

import java.util.List;

import javax.inject.Inject;

import org.junit.Test;
import org.junit.runner.RunWith;
import org.ops4j.pax.exam.Configuration;
import org.ops4j.pax.exam.Option;
import org.ops4j.pax.exam.junit.PaxExam;
import org.ops4j.pax.exam.spi.reactors.ExamReactorStrategy;
import org.ops4j.pax.exam.spi.reactors.PerClass;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.FrameworkUtil;
import org.osgi.framework.Version;
import org.osgi.framework.namespace.PackageNamespace;
import org.osgi.framework.wiring.BundleCapability;
import org.osgi.framework.wiring.BundleWiring;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryPoolConfig;

/** The API bundle installs, resolves and exports its package at 1.5.0, on Felix and on Equinox. */
@RunWith(PaxExam.class)
@ExamReactorStrategy(PerClass.class)
public class ApiBundleIT {

    private static final String API_BSN = "io.ferrum.memory.api";

    @Inject
    private BundleContext context;

    @Configuration
    public Option[] config() {
        return options(FerrumOptions.reactorBundle("api"), FerrumOptions.testSupport());
    }

    private Bundle apiBundle() {
        for (Bundle b : context.getBundles()) {
            if (API_BSN.equals(b.getSymbolicName())) {
                return b;
            }
        }
        throw new AssertionError(API_BSN + " is not installed");
    }

    @Test
    public void runsOnTheFrameworkThisExecutionNames() {
        assertEquals(FerrumOptions.expectedSystemBundle(), context.getBundle(0).getSymbolicName());
    }

    @Test
    public void apiBundleIsActiveAndExportsItsPackageAtOneTwoZero() {
        Bundle api = apiBundle();
        assertEquals("state of " + API_BSN, Bundle.ACTIVE, api.getState());
        BundleWiring wiring = api.adapt(BundleWiring.class);
        assertNotNull("the API bundle must be resolved", wiring);
        List<BundleCapability> exports = wiring.getCapabilities(PackageNamespace.PACKAGE_NAMESPACE);
        assertEquals(1, exports.size());
        BundleCapability export = exports.get(0);
        assertEquals("io.ferrum.memory.api", export.getAttributes().get(PackageNamespace.PACKAGE_NAMESPACE));
        assertEquals(new Version(1, 5, 0), export.getAttributes().get(PackageNamespace.CAPABILITY_VERSION_ATTRIBUTE));
    }

    @Test
    public void apiTypesSeenInTheContainerComeFromTheApiBundle() {
        Bundle owner = FrameworkUtil.getBundle(Device.class);
        assertNotNull("Device must be loaded by a bundle, not the test class path", owner);
        assertEquals(API_BSN, owner.getSymbolicName());
        assertEquals(Device.cuda(2), Device.parse("cuda:2"));
        assertTrue(MemoryPoolConfig.defaults().enableAutoExpansion());
    }

    @Test
    public void apiBundleImportsNoOtherBundle() {
        BundleWiring wiring = apiBundle().adapt(BundleWiring.class);
        // Only the system bundle (java.* and the JDK) may provide its packages.
        wiring.getRequiredWires(PackageNamespace.PACKAGE_NAMESPACE).forEach(w ->
                assertEquals("package " + w.getCapability().getAttributes().get(PackageNamespace.PACKAGE_NAMESPACE)
                        + " wired to a bundle", 0L, w.getProvider().getBundle().getBundleId()));
    }
}
