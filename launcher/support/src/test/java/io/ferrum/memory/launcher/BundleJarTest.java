package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.io.OutputStream;
import java.lang.reflect.Proxy;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Hashtable;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.osgi.framework.Bundle;
import org.osgi.framework.BundleContext;

/** What {@link BundleJar} reads, and what it refuses before it opens anything. */
class BundleJarTest {

    /**
     * A {@code file:} URL with the host {@code localhost} (or {@code ~}) names a local file as one without a host does:
     * Java's reader of such a URL reads it so. {@code BundleJar} took it as any URL and opened it as a stream, so the
     * checks of a local file were skipped: {@code install file://localhost/tmp/x/pipe.jar} hung the console on the
     * pipe's open, {@code install file://localhost/dev/zero} copied zeros into the data area until the disk was full
     * (3.5 GB in 5 s), and a folder was "empty (0 bytes)". A {@code jar:} URL into a pipe hung the same way. Each is
     * refused now, before anything is opened.
     */
    @Test
    void aLocalFileNamedByAHostOrInsideAJarUrlIsCheckedAsAPathIs(@TempDir Path dir) throws Exception {
        Path pipe = dir.resolve("pipe.jar");
        mkfifo(pipe);
        Path folder = Files.createDirectory(dir.resolve("folder.jar"));
        String p = pipe.toString();
        record Case(String location, String why) {
        }
        String special = "it is not a regular file (a pipe, a socket or a device)";
        for (Case c : List.of(new Case("file://localhost" + p, special), new Case("file://LOCALHOST" + p, special),
                new Case("file://~" + p, special), new Case("jar:file:" + p + "!/inner.jar", special),
                new Case("jar:file://localhost" + p + "!/inner.jar", special),
                new Case("file://localhost" + folder, "it is a folder, not a jar; pack it into a jar"))) {
            CompletableFuture<BundleJar> read = CompletableFuture.supplyAsync(() -> {
                try {
                    return BundleJar.read(null, null, c.location());
                } catch (BundleJar.Refused r) {
                    throw new IllegalArgumentException(r);
                }
            });
            try {
                ExecutionException e = assertThrows(ExecutionException.class,
                        () -> read.get(30, TimeUnit.SECONDS), c.location());
                BundleJar.Refused refused = assertInstanceOf(BundleJar.Refused.class, e.getCause().getCause(), c.location());
                assertEquals(c.why(), refused.why, c.location());
            } finally {
                if (!read.isDone()) {
                    // A read caught in the pipe's open goes on, and ends, once a writer came and went (an open for
                    // writing waits for a reader: only one caught there is released so).
                    try (OutputStream release = Files.newOutputStream(pipe)) {
                        release.flush();
                    }
                }
            }
        }
    }

    /**
     * A {@code reference:} location (a jar or folder the framework reads in place) went to the framework unchecked, by
     * {@code install} and by a bare {@code update}: Felix opens a pipe so named and waits on it for good, so {@code
     * install reference:file:/tmp/x/pipe.jar} hung the console. It is refused, and the framework not asked.
     */
    @Test
    void aReferenceToAPipeIsRefusedBeforeTheFrameworkOpensIt(@TempDir Path dir) throws Exception {
        Path pipe = dir.resolve("pipe.jar");
        mkfifo(pipe);
        String location = "reference:" + pipe.toUri();
        List<String> asked = new ArrayList<>();
        Bundle bundle = (Bundle) Proxy.newProxyInstance(getClass().getClassLoader(), new Class<?>[] {Bundle.class},
                (p, m, a) -> switch (m.getName()) {
                    case "getLocation" -> location;
                    case "getHeaders" -> new Hashtable<String, String>();
                    case "getBundleId" -> 27L;
                    case "getSymbolicName" -> "org.example.plugin";
                    case "getState" -> Bundle.ACTIVE;
                    case "update", "stop", "start" -> asked.add(m.getName());
                    default -> null;
                });
        BundleContext context = (BundleContext) Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {BundleContext.class}, (p, m, a) -> switch (m.getName()) {
                    case "getBundles" -> new Bundle[] {bundle};
                    case "installBundle" -> asked.add("installBundle");
                    default -> null;
                });
        String why = "'" + location + "': it is not a regular file (a pipe, a socket or a device)";
        IllegalArgumentException install = assertThrows(IllegalArgumentException.class,
                () -> new BundleInstall(context).install(null, new String[] {location}));
        assertEquals("Cannot install " + why + BundleInstall.NOTHING, install.getMessage());
        IllegalArgumentException update = assertThrows(IllegalArgumentException.class,
                () -> new BuiltInBundleUpdate(context).update(bundle));
        assertEquals("Cannot update org.example.plugin [27] from its location " + why + BuiltInBundleUpdate.LEFT,
                update.getMessage());
        assertEquals(List.of(), asked, "neither the framework nor the bundle was asked");
    }

    /** Makes a named pipe at {@code p}, or skips the test where {@code mkfifo} is missing. */
    private static void mkfifo(Path p) throws IOException, InterruptedException {
        Process mk;
        try {
            mk = new ProcessBuilder("mkfifo", p.toString()).inheritIO().start();
        } catch (IOException e) {
            assumeTrue(false, "no mkfifo here: " + e.getMessage());
            return;
        }
        assumeTrue(mk.waitFor() == 0 && Files.exists(p), "mkfifo failed");
    }
}
