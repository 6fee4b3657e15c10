package io.ferrum.memory.cuda;

import static org.junit.platform.engine.discovery.DiscoverySelectors.selectPackage;

import java.io.PrintWriter;

import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.engine.support.descriptor.MethodSource;
import org.junit.platform.launcher.Launcher;
import org.junit.platform.launcher.LauncherDiscoveryRequest;
import org.junit.platform.launcher.TagFilter;
import org.junit.platform.launcher.TestExecutionListener;
import org.junit.platform.launcher.TestIdentifier;
import org.junit.platform.launcher.core.LauncherDiscoveryRequestBuilder;
import org.junit.platform.launcher.core.LauncherFactory;
import org.junit.platform.launcher.listeners.SummaryGeneratingListener;
import org.junit.platform.launcher.listeners.TestExecutionSummary;

/**
 * Runs the GPU suite (every test tagged {@code gpu} in this package) from a plain classpath, for
 * {@code gpu-check.sh} on a GPU machine that has a Java runtime but no Maven. Prints one line per
 * test as it ends (so that a run cut short by its time limit still says which tests passed), then
 * the summary and every failure with its stack trace; exits 0 when all passed, 1 when any failed, 3
 * when nothing ran because there is no GPU (each test skipped with the probe's reason).
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
        PrintWriter out = new PrintWriter(System.out, true);
        SummaryGeneratingListener listener = new SummaryGeneratingListener();
        launcher.execute(request, listener, progress(out));
        TestExecutionSummary summary = listener.getSummary();
        summary.printTo(out);
        summary.printFailuresTo(out, 40);
        if (summary.getTotalFailureCount() > 0) {
            System.exit(1);
        }
        System.exit(summary.getTestsSucceededCount() == 0 ? 3 : 0);
    }

    /** @return a listener printing each test's outcome the moment it is known, in one line */
    private static TestExecutionListener progress(PrintWriter out) {
        return new TestExecutionListener() {
            @Override
            public void executionFinished(TestIdentifier test, TestExecutionResult result) {
                // Each test, and a class that failed or was skipped as a whole (its @BeforeAll).
                if (test.isTest() || result.getStatus() != TestExecutionResult.Status.SUCCESSFUL) {
                    out.println(result.getStatus() + " " + name(test)
                            + result.getThrowable().map(t -> ": " + t).orElse(""));
                }
            }

            @Override
            public void executionSkipped(TestIdentifier test, String reason) {
                out.println("SKIPPED " + name(test) + ": " + reason);
            }
        };
    }

    private static String name(TestIdentifier test) {
        return test.getSource().filter(MethodSource.class::isInstance).map(MethodSource.class::cast)
                .map(m -> m.getClassName().substring(m.getClassName().lastIndexOf('.') + 1) + "." + m.getMethodName())
                .orElse(test.getDisplayName());
    }
}
