package io.ferrum.memory.benchmarks;

import java.io.File;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.ServiceLoader;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarFile;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;
import org.osgi.framework.BundleException;
import org.osgi.framework.Constants;
import org.osgi.framework.FrameworkEvent;
import org.osgi.framework.ServiceReference;
import org.osgi.framework.launch.Framework;
import org.osgi.framework.launch.FrameworkFactory;
import org.osgi.framework.wiring.FrameworkWiring;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryRouter;

/**
 * Workload 7: OSGi-level timings in a real Felix framework with SCR, Config Admin and FileInstall,
 * and the real bundles (copied to {@code benchmarks/target/bundles} by the build).
 *
 * <ul>
 *   <li><b>framework ready</b>: in fresh JVMs, from creating the framework to the first allocation
 *   served through the {@link MemoryRouter} (and from JVM start, for reference);</li>
 *   <li><b>strategy hot swap</b>: from stopping the active strategy bundle (best-fit) to the next
 *   allocation served, by the other strategy (most-free);</li>
 *   <li><b>plugin visible</b>: from installing and starting the cpu backend bundle to its device
 *   being in the {@link GlobalMemoryMonitor}; and from copying it into a FileInstall-watched folder
 *   (polled every 50 ms, as in the distribution; FileInstall installs a file once it is unchanged over one poll) to the same.</li>
 * </ul>
 * Prints a Markdown table of medians, minimums and maximums. Every wait has a deadline and fails
 * with what it waited for.
 */
public final class OsgiTimings {
    private static final Device CPU = Device.cpu();
    private static final long WAIT_NANOS = TimeUnit.SECONDS.toNanos(20);
    /** FileInstall's poll period, as in the distribution's launch properties. */
    private static final String POLL_MS = System.getProperty("ferrum.poll", "50");

    private final Path bundles;
    private final Path work;
    private Framework framework;
    private BundleContext ctx;

    private OsgiTimings(Path bundles, Path work) {
        this.bundles = bundles;
        this.work = work;
    }

    public static void main(String[] args) throws Exception {
        Path bundles = Path.of(System.getProperty("ferrum.bundles", "benchmarks/target/bundles"));
        if (!Files.isDirectory(bundles)) {
            throw new IllegalStateException("No bundles in " + bundles.toAbsolutePath()
                    + ": build with ./ferrum bench (or mvn -Pbenchmarks package) first");
        }
        if (args.length > 0 && args[0].equals("--ready-once")) {
            try {
                readyOnce(bundles);
            } catch (Exception | Error e) {
                e.printStackTrace(System.out);
                System.exit(1);
            }
            System.exit(0);
        }
        int starts = args.length > 0 ? Integer.parseInt(args[0]) : 10;
        int swaps = args.length > 1 ? Integer.parseInt(args[1]) : 30;
        int plugins = args.length > 2 ? Integer.parseInt(args[2]) : 20;
        int drops = args.length > 3 ? Integer.parseInt(args[3]) : 5;

        List<double[]> ready = new ArrayList<>();
        for (int i = 0; i < starts; i++) {
            ready.add(readyInChildJvm(bundles));
        }
        OsgiTimings t = new OsgiTimings(bundles, Files.createTempDirectory("ferrum-osgi-timings"));
        double[] swap;
        double[] install;
        double[] drop;
        try {
            t.start(List.of());
            swap = t.strategySwaps(swaps);
            install = t.pluginInstalls(plugins);
            drop = t.pluginDrops(drops);
            t.stop();
        } catch (Exception | Error e) {
            e.printStackTrace();
            System.exit(1); // the framework's threads would keep the JVM alive
            return;
        }

        System.out.println("### Workload 7: OSGi-level timings (Felix " + t.frameworkVersion + ", SCR, Config Admin, FileInstall)");
        System.out.println();
        System.out.println("| measure | runs | median | min | max | target |");
        System.out.println("|---|---|---|---|---|---|");
        row("framework created -> first routed allocation (fresh JVM)", ready.stream().mapToDouble(r -> r[0]).toArray(), "<= 1500 ms");
        row("JVM start -> first routed allocation (fresh JVM)", ready.stream().mapToDouble(r -> r[1]).toArray(), "(reference)");
        row("stop active strategy bundle -> next allocation served by another", swap, "<= 50 ms");
        row("install + start cpu bundle -> cpu:0 visible in the monitor", install, "<= 250 ms");
        row("copy cpu bundle into the watched plugins/ folder (poll " + POLL_MS + " ms) -> cpu:0 visible", drop, "<= 250 ms");
        System.exit(0);
    }

    private String frameworkVersion = "?";

    private static void row(String what, double[] ms, String target) {
        double[] s = ms.clone();
        Arrays.sort(s);
        double median = s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
        System.out.printf(Locale.ROOT, "| %s | %d | %.2f ms | %.2f ms | %.2f ms | %s |%n", what, s.length, median, s[0],
                s[s.length - 1], target);
    }

    // ------------------------------------------------------------------ framework ready

    private static double[] readyInChildJvm(Path bundles) throws IOException, InterruptedException {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        List<String> cmd = List.of(java, "--enable-native-access=ALL-UNNAMED", "-cp", System.getProperty("java.class.path"),
                "-Dferrum.bundles=" + bundles.toAbsolutePath(), OsgiTimings.class.getName(), "--ready-once");
        Path log = Files.createTempFile("ferrum-osgi-ready", ".txt");
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        boolean ended = p.waitFor(60, TimeUnit.SECONDS);
        if (!ended) {
            p.destroyForcibly();
        }
        List<String> out = Files.readAllLines(log, StandardCharsets.UTF_8);
        Files.delete(log);
        if (!ended || p.exitValue() != 0) {
            throw new IllegalStateException("The framework-start run " + (ended ? "failed" : "did not end in 60 s") + ": " + out);
        }
        for (String line : out) {
            if (line.startsWith("READY ")) {
                String[] f = line.split(" ");
                return new double[] {Double.parseDouble(f[1]), Double.parseDouble(f[2])};
            }
        }
        throw new IllegalStateException("The framework-start run printed no READY line: " + out);
    }

    private static void readyOnce(Path bundles) throws Exception {
        long jvmStart = ManagementFactory.getRuntimeMXBean().getStartTime();
        OsgiTimings t = new OsgiTimings(bundles, Files.createTempDirectory("ferrum-osgi-ready"));
        long t0 = System.nanoTime();
        t.start(List.of());
        MemoryRouter router = t.await(() -> t.service(MemoryRouter.class), "the MemoryRouter service");
        MemoryHandle h = t.await(() -> {
            try {
                return router.allocate(4096, AllocationRequirements.defaults());
            } catch (RuntimeException notYet) {
                return null; // no device or no strategy yet
            }
        }, "a first routed allocation");
        long t1 = System.nanoTime();
        long wall = System.currentTimeMillis();
        router.deallocate(h);
        t.stop();
        System.out.printf(Locale.ROOT, "READY %.3f %d%n", (t1 - t0) / 1e6, wall - jvmStart);
    }

    // ------------------------------------------------------------------ strategy swap

    private double[] strategySwaps(int runs) throws Exception {
        MemoryRouter router = await(() -> service(MemoryRouter.class), "the MemoryRouter service");
        Bundle bestFit = bundle("io.ferrum.memory.strategy.bestfit");
        await(() -> router.activeStrategy().filter("best-fit"::equals).orElse(null), "best-fit to be active");
        double[] ms = new double[runs];
        for (int i = 0; i < runs; i++) {
            long t0 = System.nanoTime();
            bestFit.stop();
            MemoryHandle h = router.allocate(4096, AllocationRequirements.defaults());
            String served = router.activeStrategy().orElse("none");
            long t1 = System.nanoTime();
            router.deallocate(h);
            if (!served.equals("most-free")) {
                throw new IllegalStateException("After stopping best-fit the allocation was served by " + served);
            }
            ms[i] = (t1 - t0) / 1e6;
            bestFit.start();
            await(() -> router.activeStrategy().filter("best-fit"::equals).orElse(null), "best-fit to come back");
        }
        return ms;
    }

    // ------------------------------------------------------------------ plugins

    private double[] pluginInstalls(int runs) throws Exception {
        GlobalMemoryMonitor monitor = await(() -> service(GlobalMemoryMonitor.class), "the GlobalMemoryMonitor service");
        Path cpuJar = jar("io.ferrum.memory.cpu");
        uninstall(bundle("io.ferrum.memory.cpu"), monitor);
        double[] ms = new double[runs];
        for (int i = 0; i < runs; i++) {
            long t0 = System.nanoTime();
            Bundle b = ctx.installBundle("timing:cpu:" + i, Files.newInputStream(cpuJar));
            b.start();
            await(() -> monitor.devices().contains(CPU) ? Boolean.TRUE : null, "cpu:0 to appear");
            ms[i] = (System.nanoTime() - t0) / 1e6;
            uninstall(b, monitor);
        }
        return ms;
    }

    private double[] pluginDrops(int runs) throws Exception {
        GlobalMemoryMonitor monitor = await(() -> service(GlobalMemoryMonitor.class), "the GlobalMemoryMonitor service");
        Path cpuJar = jar("io.ferrum.memory.cpu");
        Path plugins = work.resolve("plugins");
        double[] ms = new double[runs];
        for (int i = 0; i < runs; i++) {
            Path dropped = plugins.resolve("cpu-backend.jar");
            long t0 = System.nanoTime();
            Files.copy(cpuJar, dropped, StandardCopyOption.REPLACE_EXISTING);
            await(() -> monitor.devices().contains(CPU) ? Boolean.TRUE : null, "cpu:0 to appear from plugins/");
            ms[i] = (System.nanoTime() - t0) / 1e6;
            Files.delete(dropped);
            await(() -> monitor.devices().contains(CPU) ? null : Boolean.TRUE, "cpu:0 to leave after its jar was deleted");
            await(() -> bundleOrNull("io.ferrum.memory.cpu") == null ? Boolean.TRUE : null, "FileInstall to uninstall the cpu bundle");
            refresh();
        }
        return ms;
    }

    private void uninstall(Bundle b, GlobalMemoryMonitor monitor) throws Exception {
        b.uninstall();
        await(() -> monitor.devices().contains(CPU) ? null : Boolean.TRUE, "cpu:0 to leave");
        refresh();
    }

    /** Refreshes removal-pending bundles so that no old revision stays behind between runs. */
    private void refresh() throws InterruptedException {
        CountDownLatch done = new CountDownLatch(1);
        framework.adapt(FrameworkWiring.class).refreshBundles(null, e -> {
            if (e.getType() == FrameworkEvent.PACKAGES_REFRESHED) {
                done.countDown();
            }
        });
        if (!done.await(20, TimeUnit.SECONDS)) {
            throw new IllegalStateException("Timed out waiting for a package refresh");
        }
    }

    // ------------------------------------------------------------------ framework

    private void start(List<String> leaveOut) throws IOException, BundleException {
        Files.createDirectories(work.resolve("plugins"));
        Map<String, String> p = new HashMap<>();
        p.put(Constants.FRAMEWORK_STORAGE, work.resolve("cache").toString());
        p.put(Constants.FRAMEWORK_STORAGE_CLEAN, Constants.FRAMEWORK_STORAGE_CLEAN_ONFIRSTINIT);
        // The API comes from the classpath, so that this program and the bundles share its classes.
        p.put(Constants.FRAMEWORK_SYSTEMPACKAGES_EXTRA, "io.ferrum.memory.api;version=" + apiVersion());
        p.put("felix.fileinstall.dir", work.resolve("plugins").toString());
        p.put("felix.fileinstall.poll", POLL_MS);
        p.put("felix.fileinstall.noInitialDelay", "true");
        p.put("felix.fileinstall.bundles.new.start", "true");
        p.put("felix.fileinstall.log.level", "1");
        framework = ServiceLoader.load(FrameworkFactory.class).iterator().next().newFramework(p);
        framework.init();
        ctx = framework.getBundleContext();
        frameworkVersion = framework.getVersion().toString();
        List<Bundle> installed = new ArrayList<>();
        File[] jars = bundles.toFile().listFiles((d, n) -> n.endsWith(".jar"));
        Arrays.sort(jars);
        for (File f : jars) {
            if (leaveOut.stream().noneMatch(f.getName()::startsWith)) {
                installed.add(ctx.installBundle(f.toURI().toString()));
            }
        }
        framework.start();
        for (Bundle b : installed) {
            if (b.getHeaders().get(Constants.FRAGMENT_HOST) == null) {
                b.start();
            }
        }
    }

    /**
     * @return the API package's version as the API bundle exports it: the provider bundles import it
     *         up to the next minor version, so a fixed number here went stale at each minor bump
     *         (1.1.0 left every Ferrum bundle unresolved once the API was 1.2)
     */
    private String apiVersion() throws IOException {
        Path api = bundles.resolveSibling("api").resolve("io.ferrum.memory.api.jar");
        try (JarFile jar = new JarFile(api.toFile())) {
            String exports = jar.getManifest().getMainAttributes().getValue(Constants.EXPORT_PACKAGE);
            Matcher m = Pattern.compile("io\\.ferrum\\.memory\\.api;[^,]*?version=\"?([0-9.]+)")
                    .matcher(exports == null ? "" : exports);
            if (!m.find()) {
                throw new IllegalStateException(api + " exports no io.ferrum.memory.api: " + exports);
            }
            return m.group(1);
        }
    }

    private void stop() throws Exception {
        framework.stop();
        framework.waitForStop(20_000);
    }

    private <S> S service(Class<S> type) {
        ServiceReference<S> ref = ctx.getServiceReference(type);
        return ref == null ? null : ctx.getService(ref);
    }

    private Bundle bundleOrNull(String bsn) {
        for (Bundle b : ctx.getBundles()) {
            if (bsn.equals(b.getSymbolicName()) && b.getState() != Bundle.UNINSTALLED) {
                return b;
            }
        }
        return null;
    }

    private Bundle bundle(String bsn) {
        Bundle b = bundleOrNull(bsn);
        if (b == null) {
            throw new IllegalStateException("Bundle " + bsn + " is not installed");
        }
        return b;
    }

    private Path jar(String artifact) {
        Path jar = bundles.resolve(artifact + ".jar");
        if (!Files.isRegularFile(jar)) {
            throw new IllegalStateException("No " + jar);
        }
        return jar;
    }

    /** Polls {@code probe} (every 0.1 ms) until it answers non-null; fails after 20 s naming {@code what}. */
    private <T> T await(java.util.function.Supplier<T> probe, String what) {
        long deadline = System.nanoTime() + WAIT_NANOS;
        while (true) {
            T v = probe.get();
            if (v != null) {
                return v;
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("Timed out after 20 s waiting for " + what);
            }
            java.util.concurrent.locks.LockSupport.parkNanos(100_000);
        }
    }
}
