package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.RandomAccessFile;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.jar.Attributes;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.launcher.plugin.BlockingActivator;
import io.ferrum.memory.launcher.plugin.NeverReturningActivator;
import io.ferrum.memory.launcher.plugin.StartCountingActivator;
import io.ferrum.memory.launcher.plugin.StopRecordingActivator;
import io.ferrum.memory.launcher.plugin.WritingCommands;

/**
 * Issue 17: the distribution's console as scripts and people use it. Scripts (piped or {@code -c})
 * print results only, errors on standard error, and exit non-zero after a failure; {@code exit} and
 * {@code quit} leave with their code; wrong calls of the jar and an old Java get one line; and at a
 * real pseudo-terminal ({@code script}), Tab completes, history survives a restart and Ctrl-C drops
 * the line.
 */
class ConsoleIT {
    private static final Pattern HANDLE = Pattern.compile("0x[0-9a-f]{16} on cpu:0");

    /** What one run of the jar gave. */
    private record Run(int code, String out, String err) {
        List<String> errLines() {
            return err.lines().filter(l -> !l.isBlank()).toList();
        }
    }

    /** Runs {@code java -jar ferrum-memory.jar ARGS} in {@code dir} with {@code input} on its standard input. */
    private static Run run(String javaHome, Path dir, String input, String... args) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(Path.of(javaHome, "bin", "java").toString(), "-jar",
                DistributionIT.jar().toString()));
        cmd.addAll(List.of(args));
        return run(new ProcessBuilder(cmd).directory(dir.toFile()), input);
    }

    /** Starts {@code command} with {@code input} on its standard input and waits until it ends. */
    private static Run run(ProcessBuilder command, String input) throws Exception {
        return run(command, input.getBytes(StandardCharsets.UTF_8));
    }

    private static Run run(ProcessBuilder command, byte[] input) throws Exception {
        Process p = command.start();
        CompletableFuture<String> out = read(p.getInputStream());
        CompletableFuture<String> err = read(p.getErrorStream());
        try (OutputStream in = p.getOutputStream()) {
            in.write(input);
        } catch (IOException ended) {
            // The process may end without reading its input (wrong arguments: a usage line, exit 2), and a
            // write or the close's flush after that fails with "Broken pipe": its code and output still tell.
        }
        if (!p.waitFor(DistributionIT.WAIT_MS, TimeUnit.MILLISECONDS)) {
            p.descendants().forEach(ProcessHandle::destroyForcibly); // the JVM the jar's Main started
            p.destroyForcibly().waitFor();
            // Its pipes close with it, and what was read may be cut: say what came, up to a page of it.
            String wrote = out.exceptionally(e -> "").get() + err.exceptionally(e -> "").get();
            fail("the distribution did not stop; it wrote: " + wrote.substring(0, Math.min(wrote.length(), 2000)));
        }
        return new Run(p.exitValue(), out.get(), err.get());
    }

    private static Run run(Path dir, String input, String... args) throws Exception {
        return run(System.getProperty("java.home"), dir, input, args);
    }

    private static CompletableFuture<String> read(InputStream s) {
        return CompletableFuture.supplyAsync(() -> {
            try {
                return new String(s.readAllBytes(), StandardCharsets.UTF_8);
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        });
    }

    private static void assertResultsOnly(String out) {
        for (String noise : List.of("g!", "Welcome", "gosh", "WARNING", "sun.misc.Unsafe", "\tat ")) {
            assertFalse(out.contains(noise), "'" + noise + "' in a script's output: " + out);
        }
    }

    @Test
    void aScriptPrintsItsResultsOnlyAndExitsZero() throws Exception {
        Run r = run(DistributionIT.freshDir("script-ok"), "", "-c", "mem:devices; mem:alloc 64k cpu:0\nmem:handles");
        assertEquals(0, r.code(), r.toString());
        assertTrue(r.out().contains("DEVICE  BACKEND"), r.out());
        assertTrue(HANDLE.matcher(r.out()).find(), r.out());
        assertTrue(r.out().contains("HANDLE"), "the third statement ran: " + r.out());
        assertResultsOnly(r.out());
        assertEquals(List.of(), r.errLines(), "nothing on standard error");
    }

    @Test
    void aFailedStatementIsOneLineOnStandardErrorAndTheScriptExitsOne() throws Exception {
        Run r = run(DistributionIT.freshDir("script-fail"), "", "-c", "mem:alloc 1m; mem:free 0x99; mem:devices");
        assertEquals(1, r.code(), r.toString());
        assertEquals(1, r.errLines().size(), r.err());
        assertTrue(r.errLines().get(0).startsWith("error: "), r.err());
        assertTrue(HANDLE.matcher(r.out()).find(), "the statement before the failure ran: " + r.out());
        assertTrue(r.out().contains("DEVICE  BACKEND"), "the statements after a failure run: " + r.out());
        assertFalse(r.out().contains("error:"), "errors are not on standard output: " + r.out());
        assertResultsOnly(r.out());
    }

    /**
     * A failure anywhere in a line counts: after a {@code ;} on a piped line, inside a pipeline or a
     * {@code &&} chain (whose values Gogo drops); a value that merely reads "error: ..." is a value.
     */
    @Test
    void aFailureAnywhereInALineIsShownAndCounted() throws Exception {
        Path dir = DistributionIT.freshDir("failure-in-line");
        Run piped = run(dir, "mem:free 0x99; mem:devices\n");
        assertEquals(1, piped.code(), piped.toString());
        assertEquals(1, piped.errLines().size(), piped.err());
        assertTrue(piped.out().contains("DEVICE  BACKEND"), "the statement after the failure ran: " + piped.out());
        for (String line : List.of("mem:free 0x99 | mem:pressure", "mem:free 0x99 && mem:pressure")) {
            Run r = run(dir, "", "-c", line);
            assertEquals(1, r.code(), line + ": " + r);
            assertEquals(1, r.errLines().size(), line + ": " + r.err());
            assertTrue(r.errLines().get(0).startsWith("error: Handle 0x0000000000000099"), r.err());
        }
        Run list = run(dir, "", "-c", "[(mem:free 0x99) (mem:free 0x98)]");
        assertEquals(2, list.errLines().size(), "each failure once, on standard error: " + list);
        assertFalse(list.out().contains("error:"), "not again on standard output: " + list.out());
        Run stopped = run(dir, "", "-c", "stop 0; mem:devices");
        assertEquals(0, stopped.code(), "the framework stopping under a statement is no failure: " + stopped);
        assertEquals(List.of(), stopped.errLines());
        Run value = run(dir, "", "-c", "msg = \"error: nothing wrong\"; mem:gc");
        assertEquals(0, value.code(), value.toString());
        assertTrue(value.out().contains("error: nothing wrong"), value.out());
    }

    /**
     * {@code ./ferrum start -c 'mem:devices' >&-}: Java's {@code PrintStream} only records that a
     * write failed, so the results were lost without a word and the script exited 0.
     */
    @Test
    void aScriptWhoseOutputCannotBeWrittenSaysSoOnceAndExitsOne() throws Exception {
        Path dir = DistributionIT.freshDir("output-closed");
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        // The shell starts the jar with its standard output closed, as '>&-' does.
        Run r = run(new ProcessBuilder("sh", "-c", "exec \"$@\" >&-", "sh", java, "-jar", DistributionIT.jar().toString(),
                "-c", "mem:devices; mem:alloc 64k cpu:0; mem:devices").directory(dir.toFile()), "");
        assertEquals(1, r.code(), r.toString());
        assertEquals(List.of("error: the output could not be written (standard output closed, or a broken pipe): results are lost"),
                r.errLines(), "said once, though every statement wrote: " + r);
    }

    /**
     * {@code java -jar ferrum-memory.jar <&-}: with standard input closed, the JVM opens its runtime
     * image as file descriptor 0, and the console read its bytes as commands (twelve megabytes of
     * error lines a minute, without end, and any statement they happened to spell).
     */
    @Test
    void withStandardInputClosedNothingIsReadAndTheRunEndsWithOneLine() throws Exception {
        assumeTrue(Files.isDirectory(Path.of("/dev/fd")), "no /dev/fd here: a closed standard input cannot be told");
        Path dir = DistributionIT.freshDir("input-closed");
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        Run r = run(new ProcessBuilder("sh", "-c", "exec \"$@\" <&-", "sh", java, "-jar", DistributionIT.jar().toString())
                .directory(dir.toFile()), "");
        assertEquals(1, r.code(), r.toString());
        assertEquals(List.of("error: standard input is closed (<&-): no commands to read; give them on standard input"
                + " (a pipe, < file) or with -c"), r.errLines());
        assertEquals("", r.out());
    }

    /**
     * Piped lines are decoded in standard input's encoding ({@code stdin.encoding}), as the output is
     * written in {@code stdout.encoding}. Here the default charset is US-ASCII ({@code LC_ALL=C} with
     * {@code file.encoding=COMPAT}) and standard input UTF-8: the console read the default charset,
     * so the two bytes of an {@code é} became two replacement characters, six bytes in the block.
     */
    @Test
    void pipedLinesAreReadInStandardInputsEncoding() throws Exception {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        ProcessBuilder pb = new ProcessBuilder(java, "-Dfile.encoding=COMPAT", "-Dstdin.encoding=UTF-8", "-jar",
                DistributionIT.jar().toString()).directory(DistributionIT.freshDir("stdin-encoding").toFile());
        pb.environment().put("LC_ALL", "C");
        Run r = run(pb, "h = mem:alloc 64 cpu:0\nmem:write --text $h 0 '\u00e9'\nmem:read $h 0 2\n");
        assertEquals(0, r.code(), r.toString());
        assertTrue(r.out().contains("wrote 2 bytes"), "the two bytes of \u00e9 in UTF-8: " + r.out());
        // Only the two bytes written: the rest of a new block is whatever posix_memalign's memory held.
        assertTrue(r.out().contains("c3 a9"), r.out());
    }

    /**
     * A {@code stop 0} in a script stops the framework itself. Run before the bnd launcher had taken
     * the exit code's callable (its main thread held back by {@link LateLauncher}), the launcher saw
     * the framework stop first and the process exited with the launcher's own 117. The console now
     * runs no statement before the launcher holds the callable, as its own stop waits for it.
     */
    @Test
    void aStopOfTheFrameworkInAScriptExitsWithTheScriptsCodeEvenBeforeTheLauncherTookIt() throws Exception {
        Path dir = DistributionIT.freshDir("stop-before-take");
        Path jar = withLateLauncher(dir.resolve("ferrum-memory-late.jar"));
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        for (String script : List.of("stop 0", "mem:free 0x99; stop 0")) {
            Run r = run(new ProcessBuilder(java, "-Dlaunch.activators=" + LateLauncher.class.getName(), "-jar", jar.toString(),
                    "-c", script).directory(dir.toFile()), "");
            int code = script.startsWith("stop") ? 0 : 1;
            assertEquals(code, r.code(), script + ": " + r);
            assertEquals(code, r.errLines().size(), script + ": " + r);
        }
    }

    /**
     * @return a copy of the distribution at {@code copy} whose bnd launcher can load {@link LateLauncher}:
     *         its class in a jar nested in the copy, and named on the launcher's class path
     */
    private static Path withLateLauncher(Path copy) throws Exception {
        String nested = "jar/late-launcher.jar";
        String entry = LateLauncher.class.getName().replace('.', '/') + ".class";
        java.io.ByteArrayOutputStream late = new java.io.ByteArrayOutputStream();
        try (JarOutputStream out = new JarOutputStream(late); InputStream c = LateLauncher.class.getResourceAsStream("LateLauncher.class")) {
            out.putNextEntry(new JarEntry(entry));
            c.transferTo(out);
            out.closeEntry();
        }
        try (JarFile in = new JarFile(DistributionIT.jar().toFile()); JarOutputStream out = new JarOutputStream(Files.newOutputStream(copy))) {
            Manifest m = new Manifest(in.getManifest());
            m.getMainAttributes().putValue("Embedded-Runpath", m.getMainAttributes().getValue("Embedded-Runpath") + "," + nested);
            out.putNextEntry(new JarEntry(JarFile.MANIFEST_NAME));
            m.write(out);
            out.closeEntry();
            for (JarEntry e : java.util.Collections.list(in.entries())) {
                if (!e.getName().equals(JarFile.MANIFEST_NAME)) {
                    out.putNextEntry(new JarEntry(e.getName()));
                    try (InputStream body = in.getInputStream(e)) {
                        body.transferTo(out);
                    }
                    out.closeEntry();
                }
            }
            out.putNextEntry(new JarEntry(nested));
            out.write(late.toByteArray());
            out.closeEntry();
        }
        return copy;
    }

    /**
     * A script file saved as "UTF-8 with BOM" (a Windows editor's choice), piped in or given to
     * {@code -c}: its first command read "Command not found: mem:devices", the name preceded by an
     * invisible U+FEFF.
     */
    @Test
    void aByteOrderMarkAtTheStartOfAScriptIsNoPartOfItsFirstCommand() throws Exception {
        Path dir = DistributionIT.freshDir("script-bom");
        for (Run r : List.of(run(dir, "\ufeffmem:devices\nmem:devices\n"), run(dir, "", "-c", "\ufeffmem:devices"))) {
            assertEquals(0, r.code(), r.toString());
            assertEquals(List.of(), r.errLines());
            assertTrue(r.out().contains("DEVICE  BACKEND"), r.out());
        }
    }

    /**
     * A piped line whose bytes are not valid in standard input's encoding (a Latin-1 {@code é} where
     * UTF-8 is read) is refused in one line naming it and its bytes, and runs not: the reader put a
     * replacement character in their place, and {@code mem:write --text} wrote it as data.
     */
    @Test
    void aPipedLineNotValidInStandardInputsEncodingIsRefusedNamingItsBytes() throws Exception {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        ProcessBuilder pb = new ProcessBuilder(java, "-Dstdin.encoding=UTF-8", "-jar", DistributionIT.jar().toString())
                .directory(DistributionIT.freshDir("stdin-malformed").toFile());
        java.io.ByteArrayOutputStream input = new java.io.ByteArrayOutputStream();
        input.writeBytes("h = mem:alloc 64 cpu:0\nmem:write --text $h 0 'caf".getBytes(StandardCharsets.US_ASCII));
        input.write(0xe9); // é in ISO-8859-1
        input.writeBytes("'\r\nmem:devices\n".getBytes(StandardCharsets.US_ASCII));
        Run r = run(pb, input.toByteArray());
        assertEquals(1, r.code(), r.toString());
        assertEquals(List.of("error: line 2 of standard input is not valid UTF-8 (stdin.encoding): e9 at byte 27;"
                + " it was not run. Save the script in UTF-8"), r.errLines());
        assertFalse(r.out().contains("wrote"), "nothing was written: " + r.out());
        assertTrue(r.out().contains("DEVICE  BACKEND"), "the next line ran: " + r.out());
    }

    /** Comments and quotes split as Gogo reads them: nothing commented out runs, a quoted backslash hides no quote. */
    @Test
    void commentsAndSingleQuotedBackslashesSplitAsGogoReadsThem() throws Exception {
        Run r = run(DistributionIT.freshDir("comments"), "", "-c",
                "# mem:free 0x99; mem:free 0x98\nh = mem:alloc 64 cpu:0; mem:write --text $h 0 'a\\'; mem:free 0x99 # c; mem:free 0x98");
        assertEquals(1, r.code(), r.toString());
        assertEquals(List.of("error: Handle 0x0000000000000099 is not known to any device: it was freed, or it was never allocated"),
                r.errLines(), "only the statement outside comments failed, and it ran");
        assertTrue(r.out().contains("wrote 2 bytes"), "a\\ is two bytes, as Gogo reads it: " + r.out());
    }

    /**
     * A bare {@code update} of a built-in bundle cannot read its location (inside the jar), and Felix
     * logs that to {@code System.out} from the command's thread. The script's session wrote to Gogo's
     * per-thread {@code System.out}, so that line went into the command's own pipe and back, until a
     * StackOverflowError cut Felix's update short and left the monitor stopped ("error:
     * InvocationTargetException", then "No memory monitor is running"). Then Felix's line, its
     * {@code MalformedURLException} stack trace on standard error and Gogo's answer, that exception
     * again, all told of a failed update, while Felix had stopped and started the bundle (a backend's
     * blocks went with it) and the script exited 0. Now one line says what was done and how to
     * replace the bundle, the monitor runs, and nothing goes to standard error.
     */
    @Test
    void aBareUpdateOfABuiltInBundleRestartsItAndSaysSoInOneLine() throws Exception {
        Run r = run(DistributionIT.freshDir("bare-update"), "", "-c", "update io.ferrum.memory.monitor; mem:devices");
        assertEquals(0, r.code(), r.toString());
        assertEquals(List.of(), r.errLines(), "nothing on standard error: " + r);
        List<String> said = r.out().lines().takeWhile(l -> !l.startsWith("DEVICE")).toList();
        assertEquals(1, said.size(), "one line before the device table: " + r);
        assertTrue(said.get(0).matches("io\\.ferrum\\.memory\\.monitor \\[\\d+\\] is built into the distribution's jar"
                + " \\(jar/io\\.ferrum\\.memory\\.monitor-[^ ]+\\.jar\\), which holds it as it is: it was restarted;"
                + " to replace it, give a jar: update \\d+ file:/path/to/bundle\\.jar"), said.get(0));
        assertTrue(r.out().contains("DEVICE  BACKEND"), "the monitor still runs: " + r);
    }

    /**
     * {@code update 0} restarted the framework inside the process: the bnd launcher deleted the framework's storage
     * as it stopped, the restarted framework lost bundles ("ERROR: Error reloading cached bundle, removing it" and
     * stack traces), and the run ended with exit code 0, the statements after it never run. It is refused now.
     */
    @Test
    void anUpdateOfTheSystemBundleIsOneErrorLineAndTheFrameworkRunsOn() throws Exception {
        Run r = run(DistributionIT.freshDir("update-0"), "", "-c", "update 0; mem:devices");
        assertEquals(1, r.code(), r.toString());
        assertEquals(List.of("error: update 0 would restart the framework inside this process, which the distribution"
                + " cannot do (the restarted framework loses bundles); nothing was done: to restart, stop 0 (or exit) and"
                + " start the distribution again"), r.errLines(), r.toString());
        assertTrue(r.out().startsWith("DEVICE  BACKEND"), "the framework ran on, nothing else said: " + r);
    }

    /**
     * The console's bundle stopped under a script: the bnd launcher was told to wait for another exit
     * code's callable, which a stopped bundle never registers (the process hung) and an updated one
     * registers before the launcher listens again (it exited 117, and the restarted console's line
     * went to the update command's pipe, gone with it).
     */
    @Test
    void stoppingOrUpdatingTheConsolesBundleEndsTheScriptWithExitCode1() throws Exception {
        for (String how : List.of("stop", "update")) {
            Run r = run(DistributionIT.freshDir("console-" + how), "", "-c",
                    how + " io.ferrum.memory.launcher; mem:alloc 1m cpu:0");
            assertEquals(1, r.code(), how + ": " + r);
            assertEquals(List.of("error: the console's bundle was stopped, updated or refreshed; the script ends here"),
                    r.errLines().stream().filter(l -> l.startsWith("error:")).toList(), how + ": " + r);
            assertFalse(HANDLE.matcher(r.out()).find(), how + ": nothing runs after: " + r.out());
        }
    }

    /**
     * Gogo writes what a statement prints ({@code System.out}, as Felix's logger does) through one
     * {@code java.nio} channel per stream of the session, made with it, and such a channel closes
     * itself for good when an interrupted thread writes to it: after one statement was interrupted
     * while it wrote, the script's later statements printed nothing, and nothing said so.
     */
    @Test
    void aStatementAfterAnInterruptedWriteStillPrints() throws Exception {
        Path dir = DistributionIT.freshDir("interrupted-write");
        Path bundle = writeWritingBundle(dir.resolve("writing.jar"));
        Run r = run(dir, "", "-c", "start " + bundle.toUri() + "; test:interrupted; test:print after");
        assertTrue(r.out().contains("after to the output"), r.toString());
        assertTrue(r.err().contains("after to the error"), r.toString());
    }

    /** Writes the bundle of {@link WritingCommands}: Gogo commands that write to a statement's streams, or wait for a line read. */
    static Path writeWritingBundle(Path jarFile) throws IOException {
        return writeActivatorBundle(jarFile, "io.ferrum.memory.test.writing", WritingCommands.class);
    }

    /** Writes a bundle {@code symbolicName} 1.0.0 of the one class {@code activator}, its activator. */
    static Path writeActivatorBundle(Path jarFile, String symbolicName, Class<?> activator) throws IOException {
        return writeActivatorBundle(jarFile, symbolicName, "1.0.0", activator);
    }

    /** Writes a bundle {@code symbolicName} {@code version} of the one class {@code activator}, its activator. */
    static Path writeActivatorBundle(Path jarFile, String symbolicName, String version, Class<?> activator) throws IOException {
        Manifest m = new Manifest();
        Attributes a = m.getMainAttributes();
        a.put(Attributes.Name.MANIFEST_VERSION, "1.0");
        a.put(new Attributes.Name("Bundle-ManifestVersion"), "2");
        a.put(new Attributes.Name("Bundle-SymbolicName"), symbolicName);
        a.put(new Attributes.Name("Bundle-Version"), version);
        a.put(new Attributes.Name("Bundle-Activator"), activator.getName());
        a.put(new Attributes.Name("Import-Package"), "org.osgi.framework");
        try (JarOutputStream jar = new JarOutputStream(Files.newOutputStream(jarFile), m)) {
            String entry = activator.getName().replace('.', '/') + ".class";
            jar.putNextEntry(new JarEntry(entry));
            try (InputStream body = activator.getClassLoader().getResourceAsStream(entry)) {
                body.transferTo(jar);
            }
            jar.closeEntry();
        }
        return jarFile;
    }

    /**
     * {@code update} of a bundle from what is no bundle jar, as a user types it: Felix's command stopped the bundle,
     * failed inside the framework ({@code ERROR: Bundle ... Unable to update the bundle}, the exception as a result on
     * standard output, its stack trace on standard error) and started it again, exit code 0; a jar without
     * Bundle-SymbolicName was taken, the bundle left without a name (the Log Service then failed at every event); a
     * missing file or a wrong scheme was a result line, not an error; an id not installed was an argument {@code update}
     * "cannot take". Each is one error line now, naming the value, and the bundle is as it was: never restarted, same
     * name and version.
     */
    @Test
    void anUpdateFromWhatIsNoBundleJarIsOneErrorLineAndTheBundleIsAsItWas() throws Exception {
        Path dir = DistributionIT.freshDir("update-no-bundle").toRealPath();
        Path bundle = writeActivatorBundle(dir.resolve("counting.jar"), "io.ferrum.memory.test.counting", StartCountingActivator.class);
        Files.createFile(dir.resolve("empty.jar"));
        Files.writeString(dir.resolve("text.jar"), "hello");
        writePlainJar(dir.resolve("plain.jar"));
        Run r = run(dir, "", "-c", "start " + bundle.toUri() + "; update io.ferrum.memory.test.counting empty.jar;"
                + " update io.ferrum.memory.test.counting text.jar; update io.ferrum.memory.test.counting plain.jar;"
                + " update io.ferrum.memory.test.counting missing.jar; update io.ferrum.memory.test.counting foo:x.jar;"
                + " update 99; lb -s io.ferrum.memory.test.counting");
        assertEquals(1, r.code(), r.toString());
        String cannot = "error: Cannot update io\\.ferrum\\.memory\\.test\\.counting \\[\\d+\\] from ";
        String left = "; the bundle is as it was";
        List<String> expected = List.of(
                cannot + Pattern.quote(dir.resolve("empty.jar") + ": it is empty (0 bytes)" + left),
                cannot + Pattern.quote(dir.resolve("text.jar") + ": it is no readable jar (ZipException: zip END header not found)" + left),
                cannot + Pattern.quote(dir.resolve("plain.jar") + ": it is no OSGi bundle: its manifest has no Bundle-SymbolicName" + left),
                cannot + Pattern.quote(dir.resolve("missing.jar") + ": there is no such file" + left),
                cannot + Pattern.quote("'foo:x.jar': the scheme 'foo:' is none this Java reads; give a jar's path, or a file:,"
                        + " http: or https: URL" + left),
                Pattern.quote("error: No bundle has the id 99 (lb lists the installed bundles); nothing was updated"));
        assertEquals(expected.size(), r.errLines().size(), "one line for each, nothing else: " + r);
        for (int i = 0; i < expected.size(); i++) {
            assertTrue(r.errLines().get(i).matches(expected.get(i)), r.errLines().get(i));
        }
        assertEquals(1, r.out().lines().filter(l -> l.equals("started io.ferrum.memory.test.counting 1.0.0")).count(),
                "started once, never restarted: " + r);
        assertTrue(r.out().lines().anyMatch(l -> l.matches(" *\\d+\\|Active +\\| +\\d+\\|io\\.ferrum\\.memory\\.test\\.counting \\(1\\.0\\.0\\).*")),
                "active, with its name and version: " + r);
        assertFalse(r.out().contains("ERROR"), r.toString());
    }

    /**
     * {@code install} of what is no bundle jar: Felix's command answered with the exception's name as a result ({@code
     * java.util.zip.ZipException: zip file is empty}, exit code 0), installed a jar without Bundle-SymbolicName (the Log
     * Service then printed {@code ERROR: ... NullPointerException} at every event), took a path as a relative URL (a
     * file name with a space: "Illegal character in path"), and of {@code install ok.jar empty.jar} installed the first
     * and said nothing of the second. Each is one error line now, naming the value, and nothing is installed; a path
     * with a space or a {@code %} installs the file it names.
     */
    @Test
    void anInstallOfWhatIsNoBundleJarIsOneErrorLineAndInstallsNothing() throws Exception {
        Path dir = DistributionIT.freshDir("install-no-bundle").toRealPath();
        writeActivatorBundle(dir.resolve("counting.jar"), "io.ferrum.memory.test.counting", StartCountingActivator.class);
        writeActivatorBundle(dir.resolve("my 100%.jar"), "io.ferrum.memory.test.spaced", StartCountingActivator.class);
        Files.createFile(dir.resolve("empty.jar"));
        Files.writeString(dir.resolve("text.jar"), "hello");
        writePlainJar(dir.resolve("plain.jar"));
        Run r = run(dir, "", "-c", "install empty.jar; install text.jar; install plain.jar; install plugins/missing.jar;"
                + " install foo:x.jar; install counting.jar empty.jar; install; install './my 100%.jar'; lb -s io.ferrum.memory.test");
        assertEquals(1, r.code(), r.toString());
        String nothing = "; nothing was installed";
        assertEquals(List.of(
                "error: Cannot install " + dir.resolve("empty.jar") + ": it is empty (0 bytes)" + nothing,
                "error: Cannot install " + dir.resolve("text.jar") + ": it is no readable jar (ZipException: zip END header not found)" + nothing,
                "error: Cannot install " + dir.resolve("plain.jar") + ": it is no OSGi bundle: its manifest has no Bundle-SymbolicName" + nothing,
                "error: Cannot install " + dir.resolve("plugins/missing.jar") + ": there is no such file" + nothing,
                "error: Cannot install 'foo:x.jar': the scheme 'foo:' is none this Java reads; give a jar's path, or a file:,"
                        + " http: or https: URL" + nothing,
                "error: Cannot install " + dir.resolve("empty.jar") + ": it is empty (0 bytes)" + nothing,
                "error: install needs the jar of a bundle: a file's path or a URL, e.g. install extra/x.jar" + nothing),
                r.errLines(), r.toString());
        assertTrue(r.out().lines().anyMatch(l -> l.matches("Bundle ID: \\d+")), r.toString());
        assertTrue(r.out().contains("io.ferrum.memory.test.spaced (1.0.0)"), "the path with a space installed: " + r);
        assertFalse(r.out().contains("io.ferrum.memory.test.counting"), "nothing of the refused pair installed: " + r);
        assertFalse(r.out().contains("ERROR"), r.toString());
    }

    /**
     * {@code start} of what is not installed: Felix's command installed it as a location, unchecked, so {@code start
     * file:.../pipe.jar} hung the console on the pipe's open and {@code start file:/dev/zero} filled the disk; a name
     * or a path was a {@code java.net.MalformedURLException: no protocol: ...} result, exit code 0, like any failure.
     * Each is one error line now, naming the value, and nothing is installed; a jar's path installs and starts it,
     * and ids, names and {@code -t} start as before.
     */
    @Test
    void aStartOfWhatIsNoBundleIsOneErrorLineAndAJarsPathInstallsAndStartsIt() throws Exception {
        Path dir = DistributionIT.freshDir("start-no-bundle").toRealPath();
        writeActivatorBundle(dir.resolve("counting.jar"), "io.ferrum.memory.test.counting", StartCountingActivator.class);
        writePlainJar(dir.resolve("plain.jar"));
        Path pipe = dir.resolve("pipe.jar");
        Process mkfifo = new ProcessBuilder("mkfifo", pipe.toString()).inheritIO().start();
        assertTrue(mkfifo.waitFor(DistributionIT.WAIT_MS, TimeUnit.MILLISECONDS) && mkfifo.exitValue() == 0, "mkfifo " + pipe);
        Run r = run(dir, "", "-c", "start io.ferrum.memory.nope; start 99; start plain.jar; start " + pipe.toUri()
                + "; start file:/dev/zero; start; start counting.jar; stop io.ferrum.memory.test.counting;"
                + " start -t io.ferrum.memory.test.counting; lb -s io.ferrum.memory.test");
        String nothing = "; nothing was installed or started";
        String special = ": it is not a regular file (a pipe, a socket or a device)" + nothing;
        assertEquals(List.of(
                "error: Cannot start 'io.ferrum.memory.nope': no bundle is so named (lb -s lists the installed bundles'"
                        + " names), and there is no file " + dir.resolve("io.ferrum.memory.nope") + nothing,
                "error: No bundle has the id 99 (lb lists the installed bundles)" + nothing,
                "error: Cannot start " + dir.resolve("plain.jar") + ": it is no OSGi bundle: its manifest has no"
                        + " Bundle-SymbolicName" + nothing,
                "error: Cannot start " + pipe + special,
                "error: Cannot start /dev/zero" + special,
                "error: start needs a bundle: its id or symbolic name, or a jar's path or URL to install and start, e.g."
                        + " start 27" + nothing),
                r.errLines(), r.toString());
        assertEquals(1, r.code(), r.toString());
        assertEquals(2, r.out().lines().filter(l -> l.equals("started io.ferrum.memory.test.counting 1.0.0")).count(),
                "installed and started from its path, then started by its name: " + r);
        assertTrue(r.out().lines().anyMatch(l -> l.matches(" *\\d+\\|Active +\\| +\\d+\\|io\\.ferrum\\.memory\\.test\\.counting \\(1\\.0\\.0\\).*")),
                r.toString());
        assertFalse(r.out().contains("Exception"), r.toString());
    }

    /**
     * A relative {@code file:} URL ({@code install file:counting.jar}) was read from the JVM's working folder, not the
     * session's, which {@code cd} moves (the bare path {@code counting.jar} was the session's already): after {@code cd
     * sub} it was "no such file". And {@code install a.jar a.jar} answered {@code Bundle IDs: 27, 27}: one bundle, its
     * id said twice. The URL is the session's file now, recorded by its absolute URL, and an id is said once.
     */
    @Test
    void aRelativeFileUrlIsTheSessionsFileAndABundleGivenTwiceIsSaidOnce() throws Exception {
        Path dir = DistributionIT.freshDir("install-relative-url").toRealPath();
        Path jar = writeActivatorBundle(Files.createDirectories(dir.resolve("sub")).resolve("counting.jar"),
                "io.ferrum.memory.test.counting", StartCountingActivator.class);
        Run r = run(dir, "", "-c", "cd sub; install file:counting.jar; install counting.jar counting.jar;"
                + " lb -l io.ferrum.memory.test.counting");
        assertEquals(List.of(), r.errLines(), r.toString());
        assertEquals(0, r.code(), r.toString());
        List<String> said = r.out().lines().filter(l -> l.startsWith("Bundle ID")).toList();
        assertEquals(2, said.size(), r.toString());
        assertTrue(said.get(0).matches("Bundle ID: \\d+"), r.toString());
        assertEquals(said.get(0), said.get(1), "the same bundle, said once: " + r);
        assertTrue(r.out().contains("|" + jar.toFile().toURI() + "|"), "recorded by its absolute URL: " + r);
    }

    /** Writes a jar whose manifest has no Bundle-SymbolicName: a jar, but no OSGi bundle. */
    private static Path writePlainJar(Path jarFile) throws IOException {
        Manifest m = new Manifest();
        m.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
        new JarOutputStream(Files.newOutputStream(jarFile), m).close();
        return jarFile;
    }

    /**
     * A plugin whose activator never returns, from its {@code start} (it stays STARTING) or its {@code stop}, held the
     * framework's stop for good: at the end of a script, at {@code exit 3}, at {@code stop 0}, the process never ended
     * and said nothing. Now the stop waits at most {@code ferrum.stopWait} seconds (30 unless set), then one line names
     * the bundle, and the process exits with the script's code (1 when that was 0).
     */
    @Test
    void anActivatorThatNeverReturnsHoldsTheStopOnlyUntilItsBoundAndIsNamed() throws Exception {
        record Case(String plugin, String script, int code, String state) {
        }
        for (Case c : List.of(new Case("neverstarts", "mem:devices", 1, "start"), new Case("neverstarts", "stop 0", 1, "start"),
                new Case("neverstops", "mem:devices", 1, "stop"), new Case("neverstops", "exit 3", 3, "stop"),
                // below the console's start level (5): it stops after the console's bundle
                new Case("neverstops", "bundlelevel -s 3 io.ferrum.memory.test.neverstops", 1, "stop"))) {
            Path dir = DistributionIT.freshDir("never-returns-" + c.plugin());
            writeActivatorBundle(Files.createDirectories(dir.resolve("plugins")).resolve(c.plugin() + ".jar"),
                    "io.ferrum.memory.test." + c.plugin(), NeverReturningActivator.class);
            Run r = run(new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                    "-Dferrum.console.startWait=1", "-Dferrum.stopWait=1", "-jar", DistributionIT.jar().toString(), "-c", c.script())
                    .directory(dir.toFile()), "");
            assertEquals(c.code(), r.code(), c + ": " + r);
            List<String> lines = r.errLines().stream().filter(l -> !l.startsWith("ferrum: still starting after")).toList();
            assertEquals(1, lines.size(), c + ": one line on standard error, but the start wait's: " + r);
            assertTrue(lines.get(0).matches("ferrum: still stopping after 1 s: io\\.ferrum\\.memory\\.test\\." + c.plugin()
                    + " \\[\\d+\\] \\(its " + c.state() + " has not returned\\); the process exits without waiting for it"
                    + " \\(-Dferrum\\.stopWait=SECONDS waits longer\\)"), c + ": " + lines.get(0));
        }
    }

    /**
     * A script's first statement ran as soon as, at one look, no bundle was starting: the framework's own STARTED
     * event comes before the console's bundle starts (the bnd launcher raises the start level after it), and
     * Felix's system bundle is ACTIVE from the start. So it could run at start level 10 of 100, and, even at 100,
     * before FileInstall had started the bundles of {@code plugins/} (on its own thread, at its first poll): a
     * plugin's command was not found ("Command not found: test:print" in 2 runs of 6 here), a plugin's device
     * missing. Now the first statement waits for both.
     */
    @Test
    void aScriptsFirstStatementFindsThePluginsOfPluginsStarted() throws Exception {
        Path dir = DistributionIT.freshDir("plugins-at-first-statement");
        writeWritingBundle(Files.createDirectories(dir.resolve("plugins")).resolve("writing.jar"));
        for (int i = 0; i < 3; i++) {
            Run r = run(dir, "", "-c", "test:print first");
            assertEquals(0, r.code(), r.toString());
            assertEquals("first to the output", r.out().strip(), r.toString());
        }
    }

    /**
     * The console waits, before its first statement, until the bundles of {@code plugins/} have started. A plugin
     * whose activator never returned kept it waiting for good: no prompt, no statement run, the process hung. Now it
     * waits at most {@code ferrum.console.startWait} seconds (30 unless set), then says which bundle is still
     * starting, in one line on standard error, and goes on.
     */
    @Test
    void aPluginWhoseActivatorBlocksIsNamedOnceTheStartWaitIsOverAndTheScriptRuns() throws Exception {
        Path dir = DistributionIT.freshDir("plugin-blocks");
        writeBlockingBundle(Files.createDirectories(dir.resolve("plugins")).resolve("blocking.jar"));
        Run r = run(new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Dferrum.console.startWait=2", "-jar", DistributionIT.jar().toString(), "-c", "mem:devices")
                .directory(dir.toFile()), "");
        assertEquals(0, r.code(), r.toString());
        assertTrue(r.out().contains("DEVICE  BACKEND"), "the script ran: " + r);
        assertEquals(1, r.errLines().size(), "one line on standard error: " + r);
        assertTrue(r.errLines().get(0).matches("ferrum: still starting after 2 s: io\\.ferrum\\.memory\\.test\\.blocking \\[\\d+\\]"
                + "; the console starts without waiting for it \\(-Dferrum\\.console\\.startWait=SECONDS waits longer\\)"),
                r.errLines().get(0));
    }

    /** Writes the bundle of {@link BlockingActivator}: its start returns only once the framework stops. */
    private static void writeBlockingBundle(Path jarFile) throws IOException {
        writeActivatorBundle(jarFile, "io.ferrum.memory.test.blocking", BlockingActivator.class);
    }

    /**
     * {@code kill PID} (SIGTERM; a container's stop) stops the framework in order, as {@code stop 0} does, so that a
     * plugin holding native memory or files releases them in its {@code stop}. The bnd launcher's shutdown hook stops no
     * bundle, and the process a user starts ({@code java -jar}) is not the framework's: it starts a second JVM with the
     * options Felix needs, and ended alone, leaving that one running, its plugins' {@code stop} never run.
     */
    @Test
    void sigtermStopsTheFrameworkInOrderAndEndsTheDistributionsJvm() throws Exception {
        Path dir = DistributionIT.freshDir("sigterm");
        writeActivatorBundle(Files.createDirectories(dir.resolve("plugins")).resolve("recording.jar"),
                "io.ferrum.memory.test.recording", StopRecordingActivator.class);
        Run r = sigterm(dir, "io.ferrum.memory.test.recording");
        assertEquals("stopped io.ferrum.memory.test.recording\n", Files.exists(dir.resolve("stopped.txt"))
                ? Files.readString(dir.resolve("stopped.txt")) : "(no file)", "the plugin's stop ran: " + r);
        assertEquals(143, r.code(), "128 + SIGTERM: " + r);
        assertEquals(List.of(), r.errLines(), "nothing on standard error");
    }

    /** The stop that SIGTERM begins is bounded as any stop of the distribution: a plugin's stop that never returns is named. */
    @Test
    void aStopThatNeverReturnsHoldsSigtermOnlyUntilItsBoundAndIsNamed() throws Exception {
        Path dir = DistributionIT.freshDir("sigterm-held");
        writeActivatorBundle(Files.createDirectories(dir.resolve("plugins")).resolve("never.jar"),
                "io.ferrum.memory.test.neverstops", NeverReturningActivator.class);
        Run r = sigterm(dir, "io.ferrum.memory.test.neverstops", "-Dferrum.stopWait=2");
        assertEquals(143, r.code(), "128 + SIGTERM: " + r);
        assertEquals(1, r.errLines().size(), r.toString());
        assertTrue(r.errLines().get(0).matches("ferrum: still stopping after 2 s: io\\.ferrum\\.memory\\.test\\.neverstops \\[\\d+\\]"
                + " \\(its stop has not returned\\); the process exits without waiting for it \\(-Dferrum\\.stopWait=SECONDS waits"
                + " longer\\)"), r.errLines().get(0));
    }

    /**
     * Starts {@code java OPTIONS -jar ferrum-memory.jar} in {@code dir} with its input open, waits until the plugin
     * {@code symbolicName} of {@code plugins/} is active, sends the process SIGTERM, and waits until it and the JVM it
     * started have ended.
     */
    private static Run sigterm(Path dir, String symbolicName, String... options) throws Exception {
        // Standard input a named pipe that this test holds open, read and written: a pipe that Java opens for a process
        // it starts is closed once that process ends, and the JVM it started in turn then read the end of its input and
        // stopped as at the end of a script.
        Path fifo = dir.resolve("input");
        assertEquals(0, new ProcessBuilder("mkfifo", fifo.toString()).inheritIO().start().waitFor(), "mkfifo");
        List<String> cmd = new ArrayList<>(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString()));
        cmd.addAll(List.of(options));
        cmd.addAll(List.of("-jar", DistributionIT.jar().toString()));
        try (RandomAccessFile input = new RandomAccessFile(fifo.toFile(), "rw")) {
            // Output into files: Process.destroy() closes the streams of the process it sends SIGTERM, and what it says
            // as it stops would be lost.
            Path out = dir.resolve("out.txt");
            Path err = dir.resolve("err.txt");
            Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectInput(fifo.toFile())
                    .redirectOutput(out.toFile()).redirectError(err.toFile()).start();
            List<ProcessHandle> jvms = new ArrayList<>(List.of(p.toHandle()));
            try {
                // The statement's answer says that the plugin has started.
                input.write(("lb -s " + symbolicName + "\n").getBytes(StandardCharsets.UTF_8));
                long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(DistributionIT.WAIT_MS);
                while (!Files.readString(out).contains("|Active")) {
                    assertTrue(System.nanoTime() < deadline && p.isAlive(), "the plugin never started: " + Files.readString(out)
                            + Files.readString(err));
                    Thread.sleep(20);
                }
                p.descendants().forEach(jvms::add); // the JVM the jar's Main started
                p.destroy(); // SIGTERM
                assertTrue(p.waitFor(DistributionIT.WAIT_MS, TimeUnit.MILLISECONDS), "the distribution did not end at SIGTERM");
                for (ProcessHandle jvm : jvms) {
                    assertTrue(jvm.onExit().thenApply(h -> true).completeOnTimeout(false, DistributionIT.WAIT_MS,
                            TimeUnit.MILLISECONDS).get(), "the distribution's JVM " + jvm.pid() + " ran on after SIGTERM");
                }
                return new Run(p.exitValue(), Files.readString(out), Files.readString(err));
            } finally {
                jvms.forEach(ProcessHandle::destroyForcibly);
            }
        }
    }

    /**
     * A bundle of {@code plugins/} whose activation policy is lazy stays STARTING until a class of it is loaded.
     * The console waited, before its first statement, while any bundle was STARTING: after an update of its
     * bundle at a terminal, the console never started again, and the terminal read nothing.
     */
    @Test
    void atATerminalTheConsoleStartsAgainAfterAnUpdateWhileALazyBundleWaitsForItsFirstClass() throws Exception {
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/script")), "util-linux 'script' is not installed: no pseudo-terminal to test with");
        Path dir = DistributionIT.freshDir("terminal-update-lazy");
        Manifest m = new Manifest();
        m.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
        m.getMainAttributes().putValue("Bundle-ManifestVersion", "2");
        m.getMainAttributes().putValue("Bundle-SymbolicName", "org.example.lazy");
        m.getMainAttributes().putValue("Bundle-ActivationPolicy", "lazy");
        try (JarOutputStream out = new JarOutputStream(Files.newOutputStream(Files.createDirectories(dir.resolve("plugins"))
                .resolve("lazy.jar")), m)) {
            out.putNextEntry(new JarEntry("a.txt"));
            out.closeEntry();
        }
        try (Terminal t = new Terminal(dir, dir.resolve("history"))) {
            t.await("g! ");
            typeUntil(t, "lb -s org.example.lazy", "Starting");
            t.type("update io.ferrum.memory.launcher\r");
            t.await("Ferrum Memory: 'help' lists the commands");
            t.await("g! ");
            t.type("exit 0\r");
            assertEquals(0, t.exitCode(), "the console left with its exit code");
        }
    }

    /**
     * An update keeps a bundle's start level through the listener of the distribution's own bundle (DistributionIT
     * has each kind of update); after a restart of that bundle, which a script does not survive, the listener is
     * there again: a plugin updated stays at FileInstall's 20, not the bnd launcher's 11, and the distribution's
     * bundle is at its 5.
     */
    @Test
    void atATerminalAnUpdateKeepsTheStartLevelAfterTheConsolesBundleRestarted() throws Exception {
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/script")), "util-linux 'script' is not installed: no pseudo-terminal to test with");
        Path dir = DistributionIT.freshDir("terminal-update-level");
        writeActivatorBundle(Files.createDirectories(dir.resolve("plugins")).resolve("counting.jar"),
                "io.ferrum.memory.test.counting", StartCountingActivator.class);
        try (Terminal t = new Terminal(dir, dir.resolve("history"))) {
            t.await("g! ");
            typeUntil(t, "bundlelevel io.ferrum.memory.test.counting", "is level 20");
            t.type("update io.ferrum.memory.launcher\r");
            t.await("Ferrum Memory: 'help' lists the commands");
            t.await("g! ");
            t.type("update io.ferrum.memory.test.counting; bundlelevel io.ferrum.memory.test.counting\r");
            String shown = t.await("g! ");
            assertTrue(shown.matches("(?s).*io\\.ferrum\\.memory\\.test\\.counting \\[\\d+\\] is level 20.*"), shown);
            t.type("bundlelevel io.ferrum.memory.launcher\r");
            assertTrue(t.await("g! ").matches("(?s).*io\\.ferrum\\.memory\\.launcher \\[\\d+\\] is level 5.*"), t.since());
            t.type("exit 0\r");
            assertEquals(0, t.exitCode(), "the console left with its exit code");
        }
    }

    /**
     * The distribution's own bundle updated from a rebuilt jar (another version) stays at its level 5, though the
     * listener that sets a level back after an update ({@code KeptStartLevels}) is its bundle's, stopped for the update:
     * the bnd launcher sets a bundle's level at each update from the name and version the bundle had when it was first
     * seen (it keeps them by bundle), and for a bundle of -runbundles those are listed, at 5 for this one. Should that
     * change, the bundle would start at 11, after the bundles of level 10, at the next start level change.
     */
    @Test
    void atATerminalAnUpdateOfTheDistributionsBundleFromARebuiltJarKeepsItsStartLevel() throws Exception {
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/script")), "util-linux 'script' is not installed: no pseudo-terminal to test with");
        Path dir = DistributionIT.freshDir("terminal-update-own-level");
        Path built = dir.resolve("launcher.jar");
        try (JarFile distribution = new JarFile(DistributionIT.jar().toFile())) {
            JarEntry entry = distribution.stream().filter(e -> e.getName().startsWith("jar/io.ferrum.memory.launcher-"))
                    .findFirst().orElseThrow();
            try (InputStream in = distribution.getInputStream(entry)) {
                Files.copy(in, built);
            }
        }
        Path rebuilt = dir.resolve("launcher-rebuilt.jar");
        DistributionIT.rewriteManifest(built, rebuilt, java.util.Map.of("Bundle-Version", "0.1.0.rebuilt"));
        try (Terminal t = new Terminal(dir, dir.resolve("history"))) {
            t.await("g! ");
            t.type("update io.ferrum.memory.launcher " + rebuilt + "\r");
            t.await("Ferrum Memory: 'help' lists the commands");
            t.await("g! ");
            t.type("bundlelevel io.ferrum.memory.launcher; lb -s io.ferrum.memory.launcher\r");
            String shown = t.await("g! ");
            assertTrue(shown.contains("0.1.0.rebuilt"), "the update took the rebuilt jar: " + shown);
            assertTrue(shown.matches("(?s).*io\\.ferrum\\.memory\\.launcher \\[\\d+\\] is level 5.*"), shown);
            t.type("exit 0\r");
            assertEquals(0, t.exitCode(), "the console left with its exit code");
        }
    }

    @Test
    void aWrongCallOfAnyCommandIsOneLineNamingIt() throws Exception {
        Run r = run(DistributionIT.freshDir("wrong-call"), "uninstall 9999\n");
        assertEquals(1, r.code(), r.toString());
        assertEquals(List.of("error: uninstall cannot take '9999'; it takes (Bundle...); see: help uninstall"), r.errLines());
    }

    @Test
    void exitAndQuitLeaveWithTheirCodeAndRunNothingAfter() throws Exception {
        Run three = run(DistributionIT.freshDir("exit"), "mem:devices\nexit 3\nmem:alloc 1m\n");
        assertEquals(3, three.code(), three.toString());
        assertTrue(three.out().contains("DEVICE  BACKEND"), three.out());
        assertFalse(HANDLE.matcher(three.out()).find(), "nothing runs after exit: " + three.out());

        Run quit = run(DistributionIT.freshDir("quit"), "quit\nmem:alloc 1m\n");
        assertEquals(0, quit.code(), quit.toString());
        assertEquals("", quit.out().strip());

        Run bad = run(DistributionIT.freshDir("exit-bad"), "exit nine\nquit\n");
        assertEquals(1, bad.code(), "a refused exit is a failed command: " + bad);
        assertEquals(List.of("error: Invalid exit code 'nine': use exit or quit, optionally with a code 0-255"), bad.errLines());
    }

    @Test
    void wrongArgumentsOfTheJarAreOneLineAndExitTwo() throws Exception {
        Path dir = DistributionIT.freshDir("jar-args");
        for (String[] args : List.of(new String[] {"-x"}, new String[] {"-c"}, new String[] {"-c", "mem:devices", "extra"})) {
            Run r = run(dir, "mem:devices\n", args);
            assertEquals(2, r.code(), List.of(args) + ": " + r);
            assertEquals(1, r.errLines().size(), r.err());
            assertTrue(r.errLines().get(0).startsWith("error: ") && r.err().contains("usage: java -jar ferrum-memory.jar"), r.err());
            assertEquals("", r.out(), "the framework never started");
        }
    }

    /**
     * A {@code -c} script whose bytes are not valid in the locale's encoding (a Latin-1 {@code é}
     * under a UTF-8 locale; any byte over 127 under {@code LC_ALL=C}, whose encoding is US-ASCII):
     * the JVM hands {@code main} a U+FFFD in their place, and {@code mem:write --text} wrote that
     * character's bytes without a word, where a piped line with such bytes is refused. The script
     * is refused in one line naming the bytes and their place, and nothing runs.
     */
    @Test
    void aScriptArgumentNotValidInTheLocalesEncodingIsRefusedAndNothingRuns() throws Exception {
        assumeTrue(Files.isReadable(Path.of("/proc/self/cmdline")), "no /proc: the bytes of the arguments cannot be read");
        Path dir = DistributionIT.freshDir("script-bytes");
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        for (String[] locale : List.of(new String[] {"C.UTF-8", "\\351", "UTF-8", "e9"},
                new String[] {"C", "\\303\\251", "US-ASCII", "c3"})) {
            // Through sh, so that the bytes reach the JVM as they are: Java would encode a String argument.
            ProcessBuilder b = new ProcessBuilder("sh", "-c", "exec \"$0\" -jar \"$1\" -c \"$(printf 'h = mem:alloc 1m; mem:write"
                    + " --text $h 0 caf" + locale[1] + "')\"", java, DistributionIT.jar().toString()).directory(dir.toFile());
            b.environment().put("LC_ALL", locale[0]);
            Run r = run(b, "");
            assertEquals(2, r.code(), locale[0] + ": " + r);
            assertEquals(1, r.errLines().size(), r.err());
            assertTrue(r.errLines().get(0).startsWith("error: the -c script is not valid " + locale[2] + " (the locale's"
                    + " encoding): " + locale[3] + " at byte 44; nothing was run"), r.err());
            assertEquals("", r.out(), "nothing ran");
        }
    }

    @Test
    void anOlderJavaIsToldWhichJavaIsNeededInOneLine() throws Exception {
        Optional<Path> old = olderJava();
        assumeTrue(old.isPresent(), "no Java older than 25 under " + Path.of(System.getProperty("java.home")).getParent()
                + ": the check is not exercised here");
        Run r = run(old.get().toString(), DistributionIT.freshDir("old-java"), "mem:devices\n");
        assertEquals(2, r.code(), r.toString());
        assertEquals(1, r.errLines().size(), r.err());
        assertTrue(r.err().contains("Ferrum Memory needs Java 25 or newer") && r.err().contains(old.get().toString()), r.err());
        assertEquals("", r.out());
    }

    /** @return a JDK installed beside this one whose {@code release} says it is older than 25 */
    private static Optional<Path> olderJava() throws IOException {
        Path here = Path.of(System.getProperty("java.home")).toRealPath();
        try (Stream<Path> jdks = Files.list(here.getParent())) {
            return jdks.filter(h -> Files.isExecutable(h.resolve("bin/java"))).filter(h -> {
                try {
                    String release = Files.readString(h.resolve("release"));
                    var v = Pattern.compile("JAVA_VERSION=\"(\\d+)").matcher(release);
                    return v.find() && Integer.parseInt(v.group(1)) < 25;
                } catch (IOException e) {
                    return false;
                }
            }).findFirst();
        }
    }

    /**
     * What starts the console with SIGINT at its default: a test run in a background job (a shell's
     * {@code &}) inherits SIGINT ignored, the JVM then installs no handler for it, and Ctrl-C at the
     * pseudo-terminal reaches nobody; GNU {@code env --default-signal} resets it. Empty where that
     * option is missing (coreutils before 8.31).
     */
    private static final String DEFAULT_SIGINT = envResetsSignals() ? "env --default-signal=INT " : "";

    private static boolean envResetsSignals() {
        try {
            Process p = new ProcessBuilder("env", "--default-signal=INT", "true").redirectErrorStream(true).start();
            p.getInputStream().readAllBytes();
            return p.waitFor(30, TimeUnit.SECONDS) && p.exitValue() == 0;
        } catch (IOException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /** Skips a Ctrl-C test, saying why, where Ctrl-C cannot reach the console (see {@link #DEFAULT_SIGINT}). */
    private static void assumeCtrlCReachesTheConsole() throws IOException {
        boolean ignored = false;
        Path status = Path.of("/proc/self/status");
        if (DEFAULT_SIGINT.isEmpty() && Files.isReadable(status)) {
            for (String line : Files.readAllLines(status)) {
                if (line.startsWith("SigIgn:")) {
                    ignored = (Long.parseUnsignedLong(line.substring(7).strip(), 16) & (1L << 1)) != 0; // SIGINT is 2
                }
            }
        }
        assumeTrue(!ignored, "SIGINT is ignored in this process (a background job?) and env cannot reset it:"
                + " Ctrl-C at the pseudo-terminal would reach no one");
    }

    /** The distribution at a pseudo-terminal made by util-linux {@code script}, typed at key by key. */
    private static final class Terminal implements AutoCloseable {
        private static final Pattern ESCAPES = Pattern.compile("\u001B(\\[[0-9;?=>]*[ -/]*[@-~]|[()][0-9A-Za-z]|[=>]|\\][^\u0007]*\u0007)|\r");
        private final Process process;
        private final OutputStream keys;
        private final StringBuffer screen = new StringBuffer();
        private int mark;

        Terminal(Path dir, Path history) throws IOException {
            String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
            String command = "stty cols 120 rows 40; exec " + DEFAULT_SIGINT + "'" + java + "' '-Dferrum.history=" + history
                    + "' -jar '" + DistributionIT.jar() + "'";
            ProcessBuilder pb = new ProcessBuilder("script", "-qfec", command, "/dev/null").directory(dir.toFile())
                    .redirectErrorStream(true);
            pb.environment().put("TERM", "xterm-256color");
            process = pb.start();
            keys = process.getOutputStream();
            Thread reader = new Thread(() -> {
                byte[] buf = new byte[8192];
                try (InputStream in = process.getInputStream()) {
                    for (int n; (n = in.read(buf)) >= 0; ) {
                        screen.append(new String(buf, 0, n, StandardCharsets.UTF_8));
                    }
                } catch (IOException ignored) {
                    // the process ended
                }
            });
            reader.setDaemon(true);
            reader.start();
        }

        /** @return what the terminal showed since the last {@link #await}, without escape sequences */
        String since() {
            return ESCAPES.matcher(screen.substring(mark)).replaceAll("");
        }

        /**
         * Waits until the text shown since the last await contains {@code expected}; the next await
         * looks only after it.
         *
         * @return the text shown since the last await, up to and including {@code expected}
         */
        String await(String expected) throws InterruptedException {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(DistributionIT.WAIT_MS);
            while (System.nanoTime() < deadline) {
                String raw = screen.substring(mark);
                String s = ESCAPES.matcher(raw).replaceAll("");
                int at = s.indexOf(expected);
                if (at >= 0) {
                    mark += rawIndex(raw, at + expected.length());
                    return s.substring(0, at + expected.length());
                }
                Thread.sleep(20);
            }
            throw new AssertionError("the terminal never showed '" + expected + "'; it showed:\n" + ESCAPES.matcher(screen).replaceAll(""));
        }

        /** @return the index in {@code raw} just after its first {@code n} characters that are not escape sequences */
        private static int rawIndex(String raw, int n) {
            Matcher m = ESCAPES.matcher(raw);
            int r = 0;
            int kept = 0;
            while (m.find()) {
                int plain = m.start() - r;
                if (kept + plain >= n) {
                    break;
                }
                kept += plain;
                r = m.end();
            }
            return r + (n - kept);
        }

        void type(String text) throws IOException {
            type(text.getBytes(StandardCharsets.UTF_8));
        }

        /** Types bytes as they are: a terminal set to another encoding than the locale's sends such. */
        void type(byte[] bytes) throws IOException {
            keys.write(bytes);
            keys.flush();
        }

        int exitCode() throws InterruptedException {
            assertTrue(process.waitFor(DistributionIT.WAIT_MS, TimeUnit.MILLISECONDS), "the console did not leave:\n" + since());
            return process.exitValue();
        }

        @Override
        public void close() {
            process.destroyForcibly();
        }
    }

    /**
     * A statement nested deeper than Gogo's recursive parser follows (20,000 brackets) overflowed the
     * console thread's stack: the StackOverflowError ended that thread with 1,000 lines of stack
     * trace, and the script never exited, the framework running on without a console. It is one
     * failed statement; the script goes on and exits 1. Piped input the same.
     */
    @Test
    void aStatementNestedTooDeeplyIsOneFailureAndTheScriptGoesOnAndExits() throws Exception {
        Path dir = DistributionIT.freshDir("nested-too-deeply");
        String deep = "mem:info " + "[".repeat(20_000) + "]".repeat(20_000);
        for (Run r : List.of(run(dir, "", "-c", deep + "; mem:devices"), run(dir, deep + "\nmem:devices\n"))) {
            assertEquals(1, r.code(), r.toString().substring(0, Math.min(2000, r.toString().length())));
            assertEquals(List.of("error: the statement is nested too deeply for the shell to read or run (a stack"
                    + " overflow); it was cut short"), r.errLines());
            assertTrue(r.out().contains("DEVICE  BACKEND"), "the statement after it ran: " + r.out());
        }
    }

    /**
     * A terminal that sends bytes not valid in the locale's encoding (a Latin-1 terminal's {@code é},
     * 0xe9, under a UTF-8 locale): JLine puts U+FFFD in their place, and the line ran with it, {@code
     * mem:write --text} writing that character's three bytes, as piped lines and {@code -c} scripts no
     * longer do. The line is refused, naming where, and not run; the session goes on.
     */
    @Test
    void atATerminalALineWithBytesNotValidInItsEncodingIsRefusedAndNotRun() throws Exception {
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/script")), "util-linux 'script' is not installed: no pseudo-terminal to test with");
        Path dir = DistributionIT.freshDir("terminal-bytes");
        try (Terminal t = new Terminal(dir, dir.resolve("history"))) {
            t.await("g! ");
            t.type("h = mem:alloc 16 cpu:0\r");
            t.await(" on cpu:0");
            t.await("g! ");
            // A new block holds whatever its memory held before: zeroed, so that a write would show.
            t.type("mem:fill $h 0\r");
            t.await("with 0x00");
            t.await("g! ");
            t.type("mem:write --text $h 0 caf".getBytes(StandardCharsets.US_ASCII));
            t.type(new byte[] {(byte) 0xe9, '\r'});
            String refused = t.await("it was not run");
            assertTrue(refused.contains("error: the line holds U+FFFD at character 26"), refused);
            assertFalse(refused.contains("wrote"), refused);
            t.type("mem:read $h 0 4\r");
            String read = t.await("|....|");
            assertTrue(read.contains("00000000  00 00 00 00 "), "nothing was written: " + read);
            t.type("exit\r");
            assertEquals(0, t.exitCode());
        }
    }

    /**
     * At a terminal, a history that cannot be kept is one line and the session goes on with its exit
     * code; Ctrl-C while a command runs interrupts that command, not the process (JLine's default
     * would end the JVM, and every live block with it).
     */
    @Test
    void atATerminalAnUnusableHistoryIsOneLineAndCtrlCStopsOnlyTheRunningCommand() throws Exception {
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/script")), "util-linux 'script' is not installed: no pseudo-terminal to test with");
        assumeCtrlCReachesTheConsole();
        Path dir = DistributionIT.freshDir("terminal-ctrl-c");
        Path notAFile = Files.createDirectories(dir.resolve("history-folder"));
        try (Terminal t = new Terminal(dir, notAFile)) {
            t.await("ferrum: no history is kept: " + notAFile + ": not a writable file");
            t.await("g! ");
            t.type("h = mem:alloc 3g cpu:0\r");
            t.await(" on cpu:0");
            t.await("g! ");
            // Sixteen fills of 3 GiB: seconds of work, so Ctrl-C lands while one runs.
            t.type(String.join("; ", java.util.Collections.nCopies(16, "mem:fill $h 1")) + "\r");
            t.await("mem:fill $h 1");
            Thread.sleep(300);
            t.type("\u0003");
            String interrupted = t.await("g! ");
            long filled = interrupted.lines().filter(l -> l.startsWith("filled")).count();
            // Without the drop the fifteen after the interrupted one would all run.
            assertTrue(filled <= 2, "Ctrl-C stopped the running fill and dropped the rest of the line: " + interrupted);
            t.type("mem:devices\r");
            t.await("DEVICE  BACKEND");
            t.await("g! ");
            t.type("exit 5\r");
            assertEquals(5, t.exitCode(), "the process outlived Ctrl-C and left with its exit code");
        }
    }

    /**
     * Ctrl-C while {@code mem:save} showed its progress line: the command, its thread interrupted,
     * erased the line through {@code System.out}, which Gogo writes through a {@code java.nio}
     * channel over the session's stream; such a channel closes itself and the stream under it when an
     * interrupted thread writes to it, so the terminal's output was closed and every answer after it
     * was lost (the next {@code mem:devices} showed nothing). The session's own channel closed with it,
     * so what a later statement printed through {@code System.out} (a command's, Felix's log) was lost
     * even once the terminal's output was kept open.
     */
    @Test
    void atATerminalCtrlCDuringAProgressLineLeavesTheOutputOpen() throws Exception {
        assumeCtrlCReachesTheConsole();
        Path dir = DistributionIT.freshDir("terminal-ctrl-c-progress");
        Path bundle = writeWritingBundle(dir.resolve("writing.jar"));
        try (Terminal t = new Terminal(dir, dir.resolve("history"))) {
            t.await("g! ");
            t.type("start " + bundle.toUri() + "\r");
            t.await("g! ");
            t.type("h = mem:alloc 3g cpu:0\r");
            t.await(" on cpu:0");
            t.await("g! ");
            t.type("mem:save $h " + dir.resolve("saved.bin") + "\r");
            t.await("saving ");
            t.type("\u0003");
            t.await("error: interrupted");
            t.type("mem:devices\r");
            t.await("DEVICE  BACKEND");
            t.type("test:print after\r");
            t.await("after to the output");
            t.type("exit 5\r");
            assertEquals(5, t.exitCode());
        }
    }

    /**
     * {@code update io.ferrum.memory.launcher} at a terminal: the console starts again, and the new one
     * has the terminal as its own (raw mode for Tab, its Ctrl-C handler). The old console closed its
     * terminal twice, in its deactivation and as it left, and each close restores what JLine found
     * when it opened it (cooked mode, the signal handler before its own): a close after the new console
     * had opened the terminal undid the new one's (Tab echoed as {@code ^I} at its first prompt). Here
     * the update's statement returns, and the old console leaves, only once the new one reads a line,
     * and Tab is typed once the old one has ended.
     */
    @Test
    void atATerminalTheConsoleStartsAgainAfterAnUpdateOfItsBundleWithTabAndCtrlC() throws Exception {
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/script")), "util-linux 'script' is not installed: no pseudo-terminal to test with");
        assumeCtrlCReachesTheConsole();
        Path dir = DistributionIT.freshDir("terminal-update");
        Path bundle = writeWritingBundle(dir.resolve("writing.jar"));
        try (Terminal t = new Terminal(dir, dir.resolve("history"))) {
            t.await("g! ");
            t.type("start " + bundle.toUri() + "\r");
            t.await("g! ");
            t.type("test:whenConsoleEnds\r");
            t.await("watching 1 console");
            t.await("g! ");
            t.type("update io.ferrum.memory.launcher | test:awaitLineRead\r");
            t.await("Ferrum Memory: 'help' lists the commands");
            t.await("the console ended"); // the old one, after the new one's first prompt
            t.type("mem:dev\t");
            t.await("mem:devices");
            t.type("\r");
            t.await("DEVICE  BACKEND");
            t.await("g! ");
            t.type("h = mem:alloc 3g cpu:0\r");
            t.await(" on cpu:0");
            t.await("g! ");
            t.type(String.join("; ", java.util.Collections.nCopies(16, "mem:fill $h 1")) + "\r");
            t.await("mem:fill $h 1");
            Thread.sleep(300);
            t.type("\u0003");
            t.await("g! ");
            t.type("exit 5\r");
            assertEquals(5, t.exitCode(), "the process outlived Ctrl-C and left with its exit code");
        }
    }

    /**
     * A folder in plugins/ that FileInstall packed and found no bundle in is claimed by the launcher
     * bundle's {@code FolderThatIsNoBundle}, which watches its manifest. After an update of that bundle
     * (possible at a terminal only: a script ends with it), FileInstall had only taken the old installer
     * off the folder's artifact and asks no installer about a folder it has processed until a file it
     * notices there changes; the new installer started with no claims, so a manifest written then was
     * never seen and the bundle never installed.
     */
    @Test
    void atATerminalAFolderClaimedBeforeAnUpdateOfTheLaunchersBundleIsInstalledOnceItsManifestComes() throws Exception {
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/script")), "util-linux 'script' is not installed: no pseudo-terminal to test with");
        Path dir = DistributionIT.freshDir("terminal-update-claims");
        Path plugins = Files.createDirectories(dir.resolve("plugins"));
        try (Terminal t = new Terminal(dir, dir.resolve("history"))) {
            t.await("g! ");
            Path late = Files.createDirectories(dir.resolve("late"));
            Files.writeString(Files.createDirectories(late.resolve("lib")).resolve("inner.jar"), "not read");
            Files.writeString(dir.resolve("plain.jar"), "no jar");
            Files.move(late, plugins.resolve("late"), java.nio.file.StandardCopyOption.ATOMIC_MOVE);
            Files.move(dir.resolve("plain.jar"), plugins.resolve("plain.jar"), java.nio.file.StandardCopyOption.ATOMIC_MOVE);
            // Named in the pass of plugins/'s watcher that packed the folder and had it claimed.
            typeUntil(t, "log 50 error", plugins.resolve("plain.jar") + " is not installed");
            assertTrue(Files.isRegularFile(dir.resolve("tmp").resolve("late.jar")), "FileInstall packed the folder");
            t.type("update io.ferrum.memory.launcher\r");
            t.await("Ferrum Memory: 'help' lists the commands");
            t.await("g! ");
            DistributionIT.explodedManifest(plugins.resolve("late"), "org.example.late", "1.0.0");
            typeUntil(t, "lb -s org.example.late", "Active");
            t.type("exit 0\r");
            assertEquals(0, t.exitCode(), "the console left with its exit code");
        }
    }

    /**
     * A jar in plugins/ that is no bundle is claimed by the launcher bundle's {@code NotABundleReporter}. After
     * an update of that bundle FileInstall had only taken the old installer off the jar's artifact, and a bundle
     * saved in its place then went to FileInstall's update path as a bundle it never installed: nothing was
     * installed.
     */
    @Test
    void atATerminalAJarClaimedBeforeAnUpdateOfTheLaunchersBundleIsInstalledOnceABundleReplacesIt() throws Exception {
        Path dir = DistributionIT.freshDir("terminal-update-plain-jar");
        Path plugins = Files.createDirectories(dir.resolve("plugins"));
        Files.writeString(dir.resolve("plain.jar"), "no jar");
        claimedEntryReplacedByABundleAfterAnUpdate(dir, () -> Files.move(dir.resolve("plain.jar"), plugins.resolve("plain.jar"),
                java.nio.file.StandardCopyOption.ATOMIC_MOVE));
    }

    /**
     * A configuration file that the launcher bundle's {@code ConfigFileGate} refused before any configuration was
     * made of it (keys that differ only in case) is one whose deletion deletes nothing: FileInstall's installer
     * would look the file's configuration up by PID and delete whatever configuration that PID has, here the one
     * another file made. The gate remembered such files only in the instance that refused them: after an update of
     * its bundle, deleting the refused {@code .config} deleted the configuration of the valid {@code .cfg}, and
     * cpu:0 restarted with its defaults, its blocks gone (then with the {@code .cfg} again, applied once more as
     * the remaining file of two). Config Admin tells its listeners of the deletion before it tells them of a
     * configuration made after it: the warning about that one's PID is the sign that the deletion was told.
     */
    @Test
    void atATerminalAConfigFileRefusedBeforeAnUpdateOfTheLaunchersBundleDeletesNothingWhenDeleted() throws Exception {
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/script")), "util-linux 'script' is not installed: no pseudo-terminal to test with");
        Path dir = DistributionIT.freshDir("terminal-update-refused-config");
        Path config = Files.createDirectories(dir.resolve("config"));
        Files.writeString(config.resolve("io.ferrum.memory.cpu.cfg"), "capacity=64m\ninitialSize=4m\ngrowthIncrement=4m\n");
        Path refused = Files.writeString(config.resolve("io.ferrum.memory.cpu.config"), "capacity=\"32m\"\nCapacity=\"16m\"\n");
        try (Terminal t = new Terminal(dir, dir.resolve("history"))) {
            t.await("g! ");
            typeUntil(t, "mem:devices", "64.0 MiB");
            typeUntil(t, "log 50 error", refused + " gives keys that differ only in case");
            t.type("mem:alloc 1m cpu:0\r");
            Matcher handle = HANDLE.matcher(t.await("g! "));
            assertTrue(handle.find(), t.since());
            t.type("update io.ferrum.memory.launcher\r");
            t.await("Ferrum Memory: 'help' lists the commands");
            t.await("g! ");
            Files.delete(refused);
            Files.writeString(config.resolve("io.ferrum.memory.marker.cfg"), "a=1\n");
            typeUntil(t, "log 50 warn", "configures io.ferrum.memory.marker, which no bundle designates");
            t.type("log 50 warn\r");
            String warnings = t.await("g! ");
            assertFalse(warnings.contains("was deleted with one of its files"), "deleting the refused file deleted the"
                    + " configuration of the other: " + warnings);
            t.type("mem:handles\r");
            String handles = t.await("g! ");
            assertTrue(handles.contains(handle.group().substring(0, 18)), "the block on cpu:0 lives on: " + handles);
            t.type("exit 0\r");
            assertEquals(0, t.exitCode(), "the console left with its exit code");
        }
    }

    /** What puts {@code plugins/plain.jar} in place before the distribution starts. */
    private interface Entry {
        void put() throws Exception;
    }

    /**
     * Has {@code entry} put {@code plugins/plain.jar} in place, starts the distribution in {@code dir} at a terminal
     * and waits for the entry's error line, updates the launcher's bundle, saves a bundle in its place, and waits for it.
     */
    private static void claimedEntryReplacedByABundleAfterAnUpdate(Path dir, Entry entry) throws Exception {
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/script")), "util-linux 'script' is not installed: no pseudo-terminal to test with");
        Path plugins = dir.resolve("plugins");
        entry.put();
        try (Terminal t = new Terminal(dir, dir.resolve("history"))) {
            t.await("g! ");
            typeUntil(t, "log 50 error", plugins.resolve("plain.jar") + " is not installed");
            t.type("update io.ferrum.memory.launcher\r");
            t.await("Ferrum Memory: 'help' lists the commands");
            t.await("g! ");
            Manifest m = new Manifest();
            m.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
            m.getMainAttributes().putValue("Bundle-ManifestVersion", "2");
            m.getMainAttributes().putValue("Bundle-SymbolicName", "org.example.plain");
            try (JarOutputStream out = new JarOutputStream(Files.newOutputStream(dir.resolve("bundle.jar")), m)) {
                out.putNextEntry(new JarEntry("a.txt"));
                out.closeEntry();
            }
            Files.move(dir.resolve("bundle.jar"), plugins.resolve("plain.jar"), java.nio.file.StandardCopyOption.ATOMIC_MOVE,
                    java.nio.file.StandardCopyOption.REPLACE_EXISTING);
            typeUntil(t, "lb -s org.example.plain", "Active");
            t.type("exit 0\r");
            assertEquals(0, t.exitCode(), "the console left with its exit code");
        }
    }

    /** Types {@code command} at the prompt until what it prints before the next prompt contains {@code expected}. */
    private static void typeUntil(Terminal t, String command, String expected) throws Exception {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(DistributionIT.WAIT_MS);
        while (System.nanoTime() < deadline) {
            t.type(command + "\r");
            if (t.await("g! ").contains(expected)) {
                return;
            }
            Thread.sleep(200);
        }
        fail("'" + expected + "' never followed '" + command + "'; the terminal showed:\n" + t.since());
    }

    /**
     * {@code stop io.ferrum.memory.launcher} at a terminal: the console goes with its bundle and the
     * framework runs on, as Felix's own {@code gogo.jline} shell does when its bundle stops (a
     * distribution may serve through other bundles of {@code plugins/}). The terminal then echoed
     * what was typed and nothing read it, without a word on how to get out. After {@code uninstall},
     * the console's thread, going on with the statement's end, met a class its bundle's loader no
     * longer defines ({@code NoClassDefFoundError: io/ferrum/memory/launcher/LineRunner$Next}).
     */
    @Test
    void atATerminalAStopOfTheConsolesBundleSaysHowToLeave() throws Exception {
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/script")), "util-linux 'script' is not installed: no pseudo-terminal to test with");
        assumeCtrlCReachesTheConsole();
        for (String how : List.of("stop", "uninstall")) {
            Path dir = DistributionIT.freshDir("terminal-" + how);
            try (Terminal t = new Terminal(dir, dir.resolve("history"))) {
                t.await("g! ");
                t.type(how + " io.ferrum.memory.launcher\r");
                String said = t.await("nothing reads what is typed here: press Ctrl-C to end the process");
                assertFalse(said.contains("Exception"), how + ": " + said);
                t.type("\u0003");
                assertEquals(130, t.exitCode(), how + ": Ctrl-C ended the process");
            }
        }
    }

    @Test
    void atATerminalTabCompletesCommandsTypesDevicesHandlesAndStrategiesHistoryIsKeptAndCtrlCDropsTheLine() throws Exception {
        assumeTrue(Files.isExecutable(Path.of("/usr/bin/script")), "util-linux 'script' is not installed: no pseudo-terminal to test with");
        assumeCtrlCReachesTheConsole();
        Path dir = DistributionIT.freshDir("terminal");
        Path history = dir.resolve("history");
        try (Terminal t = new Terminal(dir, history)) {
            t.await("g! ");
            t.type("mem:dev\t");
            t.await("mem:devices");
            t.type("\r");
            t.await("DEVICE  BACKEND");
            t.await("g! ");
            t.type("mem:alloc 1m");
            t.await("mem:alloc 1m");
            t.type("\u0003"); // Ctrl-C: the line is dropped, not run
            t.await("g! ");
            t.type("mem:alloc -t TEN\t"); // a memory type
            t.await("TENSOR");
            t.type("64k cp\t"); // a device
            t.await("cpu:0");
            t.type("\r");
            String allocated = t.await(" on cpu:0");
            var handle = java.util.regex.Pattern.compile("0x[0-9a-f]{16}").matcher(allocated);
            assertTrue(handle.find(), allocated);
            t.await("g! ");
            t.type("mem:free 0x\t"); // a live handle: the only one
            t.await(handle.group());
            t.type("\r");
            t.await("freed " + handle.group());
            t.await("g! ");
            t.type("mem:strategy mo\t");
            t.await("most-free");
            t.type("\r");
            t.await("active strategy: most-free");
            t.await("g! ");
            t.type("mem:handles\r");
            String handles = t.await("g! ");
            assertFalse(HANDLE.matcher(handles).find() || handles.contains("1.0 MiB"), "Ctrl-C ran the line: " + handles);
            t.type("exit\r");
            assertEquals(0, t.exitCode());
        }
        List<String> kept = Files.readAllLines(history);
        assertTrue(kept.stream().anyMatch(l -> l.endsWith("mem:strategy most-free")), "history: " + kept);
        assertFalse(kept.stream().anyMatch(l -> l.endsWith("mem:alloc 1m")), "a dropped line is not history: " + kept);

        try (Terminal t = new Terminal(dir, history)) {
            t.await("g! ");
            t.type("\u001BOA\u001BOA\u001BOA"); // Up (as xterm sends it in keypad mode) three times: exit, mem:handles, mem:strategy most-free
            t.type("\r"); // JLine reads keys in order: the line is the recalled one (its redraw moves the cursor)
            t.await("active strategy: most-free");
            // Keys typed before JLine reads again meet the terminal in line mode, where Ctrl-D is no
            // character but an end of input that nobody reads: wait for the prompt (raw mode) first.
            t.await("g! ");
            t.type("\u0004"); // Ctrl-D at an empty line leaves
            assertEquals(0, t.exitCode());
        }
    }
}
