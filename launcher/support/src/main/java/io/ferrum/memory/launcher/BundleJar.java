package io.ferrum.memory.launcher;

import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.net.MalformedURLException;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.jar.JarFile;
import java.util.jar.Manifest;
import java.util.regex.Pattern;

import org.apache.felix.service.command.CommandSession;
import org.osgi.framework.BundleContext;
import org.osgi.framework.Constants;
import org.osgi.framework.Version;

/**
 * A bundle jar named at the console ({@code install LOCATION}, {@code update ID LOCATION}), read once into a copy of
 * its own and checked before the framework sees it. Felix takes any bytes: a file that is no jar failed inside the
 * framework, which logged {@code ERROR: ... Unable to update the bundle} with a stack trace after it had stopped the
 * bundle, and started it again; a jar without {@code Bundle-SymbolicName} was installed (an R3 bundle), and the Log
 * Service failed on it at every event after ({@code NullPointerException} on its missing name). Here such a location
 * is refused with why, in words, before anything is touched; the copy keeps a file changed meanwhile from reaching
 * the framework unchecked.
 *
 * <p>A location with a URL scheme ({@code file:}, {@code http:}) is read as that URL; one without is a file's path,
 * from the session's folder: Felix's command took it as a relative URL, so a name with a space was refused as an
 * "Illegal character in path", and {@code p%20q.jar} read {@code p q.jar}.
 */
final class BundleJar implements AutoCloseable {
    /** Why a pipe, a socket or a device is refused. */
    private static final String NOT_REGULAR = "it is not a regular file (a pipe, a socket or a device)";
    /** A URL's scheme, of two characters or more (a Windows drive letter is a path's). */
    private static final Pattern SCHEME = Pattern.compile("[A-Za-z][A-Za-z0-9+.-]+:.*", Pattern.DOTALL);

    /** A location refused: {@link #shown} names it as the user knows it, {@link #why} says why, in words. */
    static final class Refused extends Exception {
        private static final long serialVersionUID = 1L;
        final String shown;
        final String why;

        Refused(String shown, String why) {
            super(shown + ": " + why, null, false, false);
            this.shown = shown;
            this.why = why;
        }
    }

    /** What the framework records as the bundle's location: a {@code file:} URL for a path, else the URL as given. */
    final String location;
    /** How a message names it: the file's absolute path, or the URL. */
    final String shown;
    /** The manifest's symbolic name, without its directives. */
    final String symbolicName;
    /** The manifest's {@code Bundle-Version}. */
    final Version version;
    private final Path copy;

    private BundleJar(String location, String shown, Path copy, String symbolicName, Version version) {
        this.location = location;
        this.shown = shown;
        this.copy = copy;
        this.symbolicName = symbolicName;
        this.version = version;
    }

    /** @return whether {@code location} has a URL scheme, so is read as a URL rather than as a path */
    static boolean isUrl(String location) {
        return SCHEME.matcher(location).matches();
    }

    /**
     * Reads the bundle jar at {@code given} into a copy and checks it.
     *
     * @param context where the copy is kept (this bundle's data area), or null for the temporary folder
     * @param session the console's session: a path is taken from its folder ({@code _cwd})
     * @throws Refused when nothing can be read there, or what is there is no bundle jar
     */
    static BundleJar read(BundleContext context, CommandSession session, String given) throws Refused {
        String text = given == null ? "" : given.strip();
        if (text.isEmpty()) {
            throw new Refused("''", "an empty location names no jar; give a jar's path or a URL");
        }
        if (!isUrl(text)) {
            Path file;
            try {
                file = folder(session).resolve(text).toAbsolutePath().normalize();
            } catch (InvalidPathException e) {
                throw new Refused(quoted(text), "it is no path of a file (" + e.getReason() + ")");
            }
            return fromFile(context, file.toFile().toURI().toString(), file);
        }
        URL url;
        try {
            url = new URL(text);
        } catch (MalformedURLException e) {
            String scheme = text.substring(0, text.indexOf(':'));
            throw new Refused(quoted(text), "the scheme '" + ControlCharacters.escaped(scheme) + ":' is none this Java reads;"
                    + " give a jar's path, or a file:, http: or https: URL");
        }
        if ("file".equalsIgnoreCase(url.getProtocol())) {
            Path file = filePath(url);
            if (file != null && !file.isAbsolute()) {
                // file:c1.jar: Java reads it from the JVM's working folder, which a session's cd does not move; it is
                // the session's file, as the bare path c1.jar is, and recorded by its absolute URL, which reads the
                // same file in a later session too.
                Path fromSession = file(session, file.toString());
                if (fromSession == null) {
                    throw new Refused(quoted(text), "it is no path of a file");
                }
                return fromFile(context, fromSession.toFile().toURI().toString(), fromSession);
            }
            if (file != null) {
                return fromFile(context, text, file);
            }
        }
        refuseSpecialFileInside(url, quoted(text));
        BoundedDownload download = BoundedDownload.of(context, quoted(text));
        Path copy = newCopy(context);
        try {
            download.copy(url, quoted(text), copy);
        } catch (Refused r) {
            delete(copy);
            throw r;
        }
        return checked(text, quoted(text), copy);
    }

    private static BundleJar fromFile(BundleContext context, String location, Path file) throws Refused {
        String shown = ControlCharacters.escaped(file);
        if (Files.isDirectory(file)) {
            throw new Refused(shown, "it is a folder, not a jar; pack it into a jar");
        }
        if (Files.exists(file) && !Files.isRegularFile(file)) {
            // An open of a named pipe waits for a writer: the console would hang on it.
            throw new Refused(shown, NOT_REGULAR);
        }
        if (!Files.exists(file, LinkOption.NOFOLLOW_LINKS)) {
            throw new Refused(shown, "there is no such file");
        }
        Path copy = newCopy(context);
        try {
            Files.copy(file, copy, StandardCopyOption.REPLACE_EXISTING);
        } catch (NoSuchFileException gone) {
            delete(copy);
            throw new Refused(shown, Files.isSymbolicLink(file) ? "it is a symbolic link that leads to no file" : "there is no such file");
        } catch (IOException | RuntimeException e) {
            delete(copy);
            throw new Refused(shown, "it cannot be read (" + described(e) + ")");
        }
        return checked(location, shown, copy);
    }

    /** @return the jar in {@code copy}, when it is a bundle's: else the copy is deleted and {@link Refused} says why */
    private static BundleJar checked(String location, String shown, Path copy) throws Refused {
        String why = NotABundleReporter.whyNotABundle(copy.toFile());
        if (why == null) {
            try (JarFile jar = new JarFile(copy.toFile())) {
                Manifest m = jar.getManifest();
                String name = m.getMainAttributes().getValue(Constants.BUNDLE_SYMBOLICNAME);
                String version = m.getMainAttributes().getValue(Constants.BUNDLE_VERSION);
                try {
                    return new BundleJar(location, shown, copy, name.split(";", 2)[0].strip(),
                            version == null ? Version.emptyVersion : Version.parseVersion(version.strip()));
                } catch (IllegalArgumentException badVersion) {
                    why = "its Bundle-Version '" + ControlCharacters.escaped(version) + "' is no version ("
                            + ControlCharacters.escaped(badVersion.getMessage()) + ")";
                }
            } catch (IOException | RuntimeException e) {
                why = "it is no readable jar (" + described(e) + ")";
            }
        }
        delete(copy);
        throw new Refused(shown, why);
    }

    /** @return the checked bytes, for the framework to install or update from */
    InputStream open() throws IOException {
        return Files.newInputStream(copy);
    }

    /** @return {@code symbolicName (version)}, as {@code lb -s} shows a bundle */
    String identity() {
        return symbolicName + " " + version;
    }

    @Override
    public void close() {
        delete(copy);
    }

    /**
     * Checks a {@code reference:} location, which the framework reads in place, and this class does not copy: a pipe
     * so named is opened by the framework, which waits on it for good, and the console with it.
     *
     * @throws Refused when {@code location} names a pipe, a socket or a device
     */
    static void checkReference(String location) throws Refused {
        String text = location.strip();
        try {
            refuseSpecialFileInside(new URL(text.substring(text.indexOf(':') + 1)), quoted(text));
        } catch (MalformedURLException e) {
            // the framework's to refuse, in its words
        }
    }

    /**
     * Refuses a URL that Java reads, through {@code jar:} URLs, from a local file that is no regular one: the open of a
     * named pipe waits for a writer, and the console with it.
     */
    private static void refuseSpecialFileInside(URL url, String shown) throws Refused {
        URL at = url;
        while ("jar".equalsIgnoreCase(at.getProtocol())) {
            String file = at.getFile();
            int entry = file.indexOf("!/");
            try {
                at = new URL(entry < 0 ? file : file.substring(0, entry));
            } catch (MalformedURLException e) {
                return; // the read says why
            }
        }
        if ("file".equalsIgnoreCase(at.getProtocol())) {
            Path file = filePath(at);
            if (file != null && Files.exists(file) && !Files.isRegularFile(file) && !Files.isDirectory(file)) {
                throw new Refused(shown, NOT_REGULAR);
            }
        }
    }

    /**
     * @return the file a {@code file:} URL names, decoded as Java's own reader of such a URL decodes it ({@code %20} a
     *         space, and a raw space taken as it is); null for one with another host than {@code localhost} or {@code
     *         ~}, which Java reads as an {@code ftp:} URL. Java reads those two hosts, as no host, as a local file: taken
     *         as any URL, a pipe so named hung the console on its open, and {@code /dev/zero} filled the disk.
     */
    private static Path filePath(URL url) {
        String host = url.getHost();
        if (host != null && !host.isEmpty() && !host.equals("~") && !host.equalsIgnoreCase("localhost")) {
            return null;
        }
        try {
            return Path.of(new URI("file:" + url.getPath()));
        } catch (URISyntaxException | RuntimeException notAUri) {
            try {
                return Path.of(url.getPath());
            } catch (InvalidPathException e) {
                return null;
            }
        }
    }

    /** @return the file {@code path}, a location without a URL scheme, names from the session's folder; null if none */
    static Path file(CommandSession session, String path) {
        try {
            return folder(session).resolve(path.strip()).toAbsolutePath().normalize();
        } catch (InvalidPathException e) {
            return null;
        }
    }

    private static Path folder(CommandSession session) {
        Object cwd = session == null ? null : session.get("_cwd");
        return cwd instanceof File f ? f.toPath() : Path.of("").toAbsolutePath();
    }

    private static Path newCopy(BundleContext context) throws Refused {
        try {
            File area = context == null ? null : context.getDataFile("");
            return area == null ? Files.createTempFile("ferrum-bundle", ".jar") : Files.createTempFile(area.toPath(), "bundle", ".jar");
        } catch (IOException | RuntimeException e) {
            throw new Refused("the bundle's copy", "it cannot be made (" + described(e) + ")");
        }
    }

    private static void delete(Path copy) {
        try {
            Files.deleteIfExists(copy);
        } catch (IOException e) {
            copy.toFile().deleteOnExit();
        }
    }

    private static String quoted(String text) {
        return "'" + ControlCharacters.escaped(text) + "'";
    }

    static String described(Exception e) {
        return ControlCharacters.escaped(e.getClass().getSimpleName() + (e.getMessage() == null ? "" : ": " + e.getMessage()));
    }
}
