package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.lang.reflect.Proxy;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.jar.Attributes;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.osgi.framework.BundleContext;

import com.sun.net.httpserver.HttpServer;

/**
 * An {@code http:} location was read by {@code URL.openStream()}: no bound on the connection, the answer, or the size.
 * A server that never answers hung the console for good; one that streams without end filled the disk. A local
 * server here stalls (its handler waits on a latch the test counts down only at its end) or streams zeros (at most
 * {@link #SAFETY} bytes, so that a read without a bound ends, too).
 */
class BoundedDownloadTest {
    /** What the endless server sends at most: far more than the bound set here, little enough for any disk. */
    private static final long SAFETY = 64L << 20;

    private final CountDownLatch release = new CountDownLatch(1);
    private ExecutorService handlers;
    private HttpServer server;

    @BeforeEach
    void serve() throws IOException {
        handlers = Executors.newCachedThreadPool();
        server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        server.setExecutor(handlers);
        server.createContext("/stall", exchange -> {
            try {
                release.await(60, TimeUnit.SECONDS); // never answers while the test runs
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            exchange.close();
        });
        server.createContext("/endless.jar", exchange -> {
            exchange.sendResponseHeaders(200, 0); // chunked: no length announced
            try (OutputStream out = exchange.getResponseBody()) {
                byte[] zeros = new byte[64 * 1024];
                for (long sent = 0; sent < SAFETY; sent += zeros.length) {
                    out.write(zeros);
                }
            } catch (IOException closedByTheReader) {
                // the refused read closed the connection
            }
        });
        server.createContext("/announced.jar", exchange -> {
            exchange.sendResponseHeaders(200, 10L << 30); // announced, and then never sent
            exchange.getResponseBody().flush();
            try {
                release.await(60, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            exchange.close(); // short of what was announced: the server drops the connection
        });
        server.createContext("/headers-then-stall.jar", exchange -> {
            exchange.sendResponseHeaders(200, 1000); // a length announced, within the bound, and then never sent
            exchange.getResponseBody().flush();
            try {
                release.await(60, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            exchange.close();
        });
        server.createContext("/outer.jar", exchange -> {
            byte[] jar = outerJar();
            exchange.sendResponseHeaders(200, jar.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(jar);
            }
        });
        server.createContext("/ok.jar", exchange -> {
            byte[] jar = bundleJar();
            exchange.sendResponseHeaders(200, jar.length);
            try (OutputStream out = exchange.getResponseBody()) {
                out.write(jar);
            }
        });
        server.start();
    }

    @AfterEach
    void stop() {
        release.countDown();
        server.stop(0);
        handlers.shutdownNow();
    }

    @Test
    void aServerThatNeverAnswersOrNeverEndsIsRefusedAtItsBound() throws Exception {
        BundleContext context = properties(Map.of("ferrum.download.wait", "1", "ferrum.download.maxBytes", "1048576"));
        String stall = url("/stall");
        assertEquals("it sent nothing for 1 s, the most the distribution waits (SocketTimeoutException: Read timed out;"
                + " -Dferrum.download.wait=SECONDS waits longer)", refusal(context, stall), stall);
        String endless = url("/endless.jar");
        assertEquals("it is more than 1048576 bytes, larger than 1048576 bytes, the most the distribution reads"
                + " (-Dferrum.download.maxBytes=BYTES reads more)", refusal(context, endless), endless);
        String announced = url("/announced.jar");
        assertEquals("it is 10737418240 bytes, the server says, larger than 1048576 bytes, the most the distribution"
                + " reads (-Dferrum.download.maxBytes=BYTES reads more)", refusal(context, announced), announced);
        String missing = url("/missing.jar");
        assertEquals("the server answered 404 Not Found", refusal(context, missing), missing);
        try (BundleJar ok = read(context, url("/ok.jar")).get(30, TimeUnit.SECONDS)) {
            assertEquals("org.example.served 1.2.3", ok.identity(), "a jar within the bounds is read");
        }
    }

    /**
     * A {@code jar:} URL into a served jar ({@code install jar:http://host/x.zip!/x.jar}) was read by Java's own
     * {@code JarURLConnection}, which fetches the jar whole into a temporary file over a connection of its own, with no
     * wait bound and no size bound, whatever the bounds of this class: a server that sent its headers and then nothing
     * hung the console for good. The served jar is now read within the bounds, and the entry from its copy, at most
     * {@code ferrum.download.maxBytes} too (a small compressed entry may inflate to any size).
     */
    @Test
    void aJarUrlIntoAServedJarIsReadWithinTheBounds() throws Exception {
        BundleContext context = properties(Map.of("ferrum.download.wait", "1", "ferrum.download.maxBytes", "1048576"));
        String stall = "jar:" + url("/headers-then-stall.jar") + "!/inner.jar";
        assertEquals("it sent nothing for 1 s, the most the distribution waits (SocketTimeoutException: Read timed out;"
                + " -Dferrum.download.wait=SECONDS waits longer)", refusal(context, stall), stall);
        String endless = "jar:" + url("/endless.jar") + "!/inner.jar";
        assertEquals("it is more than 1048576 bytes, larger than 1048576 bytes, the most the distribution reads"
                + " (-Dferrum.download.maxBytes=BYTES reads more)", refusal(context, endless), endless);
        String inflating = "jar:" + url("/outer.jar") + "!/zeros.jar";
        assertEquals("it is more than 1048576 bytes, larger than 1048576 bytes, the most the distribution reads"
                + " (-Dferrum.download.maxBytes=BYTES reads more)", refusal(context, inflating), inflating);
        String missing = "jar:" + url("/outer.jar") + "!/missing.jar";
        assertEquals("the jar it points into has no entry 'missing.jar'", refusal(context, missing), missing);
        try (BundleJar ok = read(context, "jar:" + url("/outer.jar") + "!/inner.jar").get(30, TimeUnit.SECONDS)) {
            assertEquals("org.example.served 1.2.3", ok.identity(), "an entry within the bounds is read");
        }
    }

    @Test
    void aBoundThatIsNoWholeNumberIsNamedAndNothingIsRead() throws Exception {
        for (String bad : new String[] {"0", "-3", "soon", ""}) {
            String ok = url("/ok.jar");
            assertEquals("-Dferrum.download.wait=" + bad + " is no whole number of seconds (1 or more), so the download"
                    + " is not bounded as it must be; correct or remove it",
                    refusal(properties(Map.of("ferrum.download.wait", bad)), ok), bad);
            assertEquals("-Dferrum.download.maxBytes=" + bad + " is no whole number of bytes (1 or more), so the download"
                    + " is not bounded as it must be; correct or remove it",
                    refusal(properties(Map.of("ferrum.download.maxBytes", bad)), ok), bad);
        }
    }

    /** @return why {@code location} is refused; the read is bounded by the test, not only by the code under test */
    private static String refusal(BundleContext context, String location) throws Exception {
        ExecutionException e = assertThrows(ExecutionException.class, () -> read(context, location).get(30, TimeUnit.SECONDS),
                location);
        return assertInstanceOf(BundleJar.Refused.class, e.getCause().getCause(), location).why;
    }

    private static CompletableFuture<BundleJar> read(BundleContext context, String location) {
        return CompletableFuture.supplyAsync(() -> {
            try {
                return BundleJar.read(context, null, location);
            } catch (BundleJar.Refused r) {
                throw new IllegalArgumentException(r);
            }
        });
    }

    private String url(String path) {
        return "http://127.0.0.1:" + server.getAddress().getPort() + path;
    }

    /** A framework whose properties are {@code values}, and which has no data area (copies go to the temporary folder). */
    private static BundleContext properties(Map<String, String> values) {
        return (BundleContext) Proxy.newProxyInstance(BundleContext.class.getClassLoader(), new Class<?>[] {BundleContext.class},
                (proxy, method, args) -> method.getName().equals("getProperty") ? values.get((String) args[0]) : null);
    }

    /** @return a jar holding {@link #bundleJar} as {@code inner.jar}, and 2 MiB of zeros as {@code zeros.jar} */
    private static byte[] outerJar() throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        try (JarOutputStream jar = new JarOutputStream(bytes)) {
            jar.putNextEntry(new JarEntry("inner.jar"));
            jar.write(bundleJar());
            jar.closeEntry();
            jar.putNextEntry(new JarEntry("zeros.jar"));
            jar.write(new byte[2 << 20]);
            jar.closeEntry();
        }
        return bytes.toByteArray();
    }

    private static byte[] bundleJar() throws IOException {
        Manifest m = new Manifest();
        Attributes a = m.getMainAttributes();
        a.put(Attributes.Name.MANIFEST_VERSION, "1.0");
        a.putValue("Bundle-ManifestVersion", "2");
        a.putValue("Bundle-SymbolicName", "org.example.served");
        a.putValue("Bundle-Version", "1.2.3");
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        new JarOutputStream(bytes, m).close();
        return bytes.toByteArray();
    }
}
