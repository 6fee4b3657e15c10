package io.ferrum.memory.launcher;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.HttpURLConnection;
import java.net.MalformedURLException;
import java.net.SocketTimeoutException;
import java.net.URL;
import java.net.URLConnection;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.TimeUnit;

import org.osgi.framework.BundleContext;

/**
 * Reads a bundle jar named by a URL that is no local file ({@code http:}, {@code https:}, {@code ftp:}) into the copy
 * {@link BundleJar} checks, bounded in time and in size. Java's {@code URL.openStream()} waits for good on a server
 * that takes the connection and never answers, and reads for good from one that sends without end, into the
 * launcher's data area until the disk is full; the console waited with it. Here each wait (for the connection, for
 * the answer, for each next byte) is at most {@value #WAIT_PROPERTY} seconds (30 unless set), and the jar at most
 * {@value #MAX_BYTES_PROPERTY} bytes (256 MiB unless set); past either, the read is refused in words that name the
 * bound and the property that moves it. A server that sends a byte within each wait but never ends is stopped by the
 * size bound. A {@code jar:} URL into a served jar is read so too ({@link #copyEntry}).
 */
final class BoundedDownload {
    /** The framework property that bounds each wait of a download, in whole seconds (1 or more). */
    static final String WAIT_PROPERTY = "ferrum.download.wait";
    /** The framework property that bounds the size of a downloaded jar, in bytes (1 or more). */
    static final String MAX_BYTES_PROPERTY = "ferrum.download.maxBytes";
    static final long DEFAULT_WAIT_SECONDS = 30;
    static final long DEFAULT_MAX_BYTES = 256L << 20;

    private final long waitSeconds;
    private final long maxBytes;

    private BoundedDownload(long waitSeconds, long maxBytes) {
        this.waitSeconds = waitSeconds;
        this.maxBytes = maxBytes;
    }

    /**
     * @param context where the bounds are set as framework properties; null for the defaults
     * @param shown   the location, as a refusal names it
     * @throws BundleJar.Refused when a bound is set to what is no whole number, 1 or more
     */
    static BoundedDownload of(BundleContext context, String shown) throws BundleJar.Refused {
        return new BoundedDownload(bound(context, WAIT_PROPERTY, DEFAULT_WAIT_SECONDS, shown, "seconds"),
                bound(context, MAX_BYTES_PROPERTY, DEFAULT_MAX_BYTES, shown, "bytes"));
    }

    private static long bound(BundleContext context, String property, long otherwise, String shown, String unit)
            throws BundleJar.Refused {
        String value = context == null ? null : context.getProperty(property);
        if (value == null) {
            return otherwise;
        }
        try {
            long bound = Long.parseLong(value.strip());
            // A wait's milliseconds are an int for URLConnection: more than 24 days is as good as for ever.
            if (bound >= 1 && (!unit.equals("seconds") || bound <= Integer.MAX_VALUE / 1000)) {
                return bound;
            }
        } catch (NumberFormatException notANumber) {
            // refused below
        }
        throw new BundleJar.Refused(shown, "-D" + property + "=" + ControlCharacters.escaped(value) + " is no whole number"
                + " of " + unit + " (1 or more), so the download is not bounded as it must be; correct or remove it");
    }

    /** Reads {@code url} into {@code to}, within the bounds; on a refusal {@code to} may hold part of it. */
    void copy(URL url, String shown, Path to) throws BundleJar.Refused {
        if ("jar".equalsIgnoreCase(url.getProtocol())) {
            copyEntry(url, shown, to);
            return;
        }
        URLConnection connection = null;
        try {
            connection = url.openConnection();
            int waitMs = (int) TimeUnit.SECONDS.toMillis(waitSeconds);
            connection.setConnectTimeout(waitMs);
            connection.setReadTimeout(waitMs);
            if (connection instanceof HttpURLConnection http) {
                int code = http.getResponseCode();
                if (code / 100 != 2) {
                    throw new BundleJar.Refused(shown, "the server answered " + code
                            + (http.getResponseMessage() == null ? "" : " " + ControlCharacters.escaped(http.getResponseMessage())));
                }
            }
            long announced = connection.getContentLengthLong();
            if (announced > maxBytes) {
                throw new BundleJar.Refused(shown, tooLarge(announced + " bytes, the server says"));
            }
            try (InputStream in = connection.getInputStream()) {
                transfer(in, shown, to);
            }
        } catch (SocketTimeoutException e) {
            throw new BundleJar.Refused(shown, "it sent nothing for " + waitSeconds + " s, the most the distribution waits"
                    + " (" + BundleJar.described(e) + "; -D" + WAIT_PROPERTY + "=SECONDS waits longer)");
        } catch (IOException | RuntimeException e) {
            throw new BundleJar.Refused(shown, "it cannot be read (" + BundleJar.described(e) + ")");
        } finally {
            if (connection instanceof HttpURLConnection http) {
                http.disconnect(); // a refused download's socket is closed, not kept for the next
            }
        }
    }

    /**
     * Reads the entry a {@code jar:} URL names ({@code jar:http://host/x.zip!/x.jar}). Java's {@code JarURLConnection}
     * fetches the jar it points into whole, over a connection of its own that no timeout of this class reaches, and
     * without a size bound: a server that sent its headers and then nothing hung the console for good. So that jar is
     * read as any location is ({@link #copy}, within the bounds), and the entry from the copy, at most {@link #maxBytes}
     * too: a compressed entry of a few kilobytes may inflate to any size.
     */
    private void copyEntry(URL url, String shown, Path to) throws BundleJar.Refused {
        String spec = url.getFile();
        int separator = spec.indexOf("!/");
        if (separator < 0) {
            throw new BundleJar.Refused(shown, "a jar: URL names an entry of a jar (jar:URL!/ENTRY), and this one names none");
        }
        URL outer;
        try {
            outer = new URL(spec.substring(0, separator));
        } catch (MalformedURLException e) {
            throw new BundleJar.Refused(shown, "it names no jar that can be read (" + BundleJar.described(e) + ")");
        }
        Path jar;
        try {
            jar = Files.createTempFile(to.toAbsolutePath().getParent(), "outer", ".jar");
        } catch (IOException | RuntimeException e) {
            throw new BundleJar.Refused(shown, "the copy of the jar it points into cannot be made (" + BundleJar.described(e) + ")");
        }
        try {
            copy(outer, shown, jar);
            URLConnection entry = new URL("jar:" + jar.toUri() + spec.substring(separator)).openConnection();
            entry.setUseCaches(false); // else the JDK keeps the copy open, deleted, for as long as the JVM runs
            try (InputStream in = entry.getInputStream()) {
                transfer(in, shown, to);
            }
        } catch (FileNotFoundException noEntry) {
            throw new BundleJar.Refused(shown, "the jar it points into has no entry '"
                    + ControlCharacters.escaped(spec.substring(separator + 2)) + "'");
        } catch (IOException | RuntimeException e) {
            throw new BundleJar.Refused(shown, "it cannot be read (" + BundleJar.described(e) + ")");
        } finally {
            try {
                Files.deleteIfExists(jar);
            } catch (IOException e) {
                jar.toFile().deleteOnExit();
            }
        }
    }

    /** Writes what {@code in} gives into {@code to}; refused past {@link #maxBytes} */
    private void transfer(InputStream in, String shown, Path to) throws IOException, BundleJar.Refused {
        try (OutputStream out = Files.newOutputStream(to)) {
            byte[] buffer = new byte[64 * 1024];
            long total = 0;
            for (int n; (n = in.read(buffer)) >= 0; ) {
                total += n;
                if (total > maxBytes) {
                    throw new BundleJar.Refused(shown, tooLarge("more than " + maxBytes + " bytes"));
                }
                out.write(buffer, 0, n);
            }
        }
    }

    private String tooLarge(String size) {
        return "it is " + size + ", larger than " + maxBytes + " bytes, the most the distribution reads (-D"
                + MAX_BYTES_PROPERTY + "=BYTES reads more)";
    }
}
