package io.ferrum.memory.cuda;

import static org.junit.platform.engine.discovery.DiscoverySelectors.selectPackage;

import java.io.PrintWriter;

import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.TagFilter;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;
import org.junit.platform.launcher.listeners.SummaryGeneratingListener;
import org.junit.platform.launcher.listeners.TestExecutionSummary;

/**
 * Runs the GPU suite (every test tagged {@code gpu} in this package) from a plain classpath, for
 * {@code gpu-check.sh} on a GPU machine that has a Java runtime but no Maven. Prints the summary and
 * every failure with its stack trace; exits 0 when all passed, 1 when any failed, 3 when nothing ran
 * because there is no GPU (each test skipped with the probe's reason).
 */
public final class GpuSuite {
    private GpuSuite() {
    }

    public static void main(String[] args) {
        LauncherDiscoveryRequest request = LauncherDiscoveryRequestBuilder.request()
                .selectors(selectPackage(GpuSuite.class.getPackageName()))
                .filters(TagFilter.includeTags("gpu"))
                .build();
        Launcher launcher = LauncherFactory.create();
        SummaryGeneratingListener listener = new SummaryGeneratingListener();
        launcher.execute(request, listener);
        TestExecutionSummary summary = listener.getSummary();
        PrintWriter out = new PrintWriter(System.out, true);
        summary.printTo(out);
        summary.printFailuresTo(out, 40);
        if (summary.getTotalFailureCount() > 0) {
            System.exit(1);
        }
        System.exit(summary.getTestsSucceededCount() == 0 ? 3 : 0);
    }
}
