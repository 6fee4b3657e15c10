package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.Enumeration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.jar.Attributes;
import java.util.jar.JarEntry;
import java.util.jar.JarFile;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;
import java.util.regex.MatchResult;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.launcher.plugin.NoMetatypeActivator;
import io.ferrum.memory.launcher.plugin.NoMetatypeComponent;
import io.ferrum.memory.launcher.plugin.StartCountingActivator;

/**
 * The exported jar as a user runs it: {@code java -jar ferrum-memory.jar} in an empty folder, shell
 * commands on standard input, the output checked.
 */
class DistributionIT {
    static final long WAIT_MS = 30_000;

    static Path jar() {
        Path p = Path.of(System.getProperty("ferrum.distribution.jar"));
        assertTrue(Files.isRegularFile(p), "the distribution was not exported: " + p);
        return p;
    }

    static Path freshDir(String name) throws IOException {
        Path dir = Path.of(System.getProperty("ferrum.workdir"), name);
        if (Files.exists(dir)) {
            try (Stream<Path> s = Files.walk(dir)) {
                for (Path p : s.sorted(Comparator.reverseOrder()).toList()) {
                    Files.delete(p);
                }
            }
        }
        Files.createDirectories(dir);
        return dir;
    }

    static ProcessBuilder java(Path dir) {
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        return new ProcessBuilder(java, "--enable-native-access=ALL-UNNAMED", "--sun-misc-unsafe-memory-access=allow",
                "-jar", jar().toString()).directory(dir.toFile()).redirectErrorStream(true);
    }

    /** A running distribution driven line by line. */
    private static final class Session implements AutoCloseable {
        private final Process process;
        private final OutputStream in;
        private final StringBuffer out = new StringBuffer();
        private final Thread reader;

        Session(Path dir) throws IOException {
            this(java(dir));
        }

        Session(ProcessBuilder command) throws IOException {
            process = command.start();
            in = process.getOutputStream();
            InputStream stdout = process.getInputStream();
            reader = new Thread(() -> {
                byte[] buf = new byte[8192];
                try {
                    for (int n; (n = stdout.read(buf)) >= 0; ) {
                        out.append(new String(buf, 0, n, StandardCharsets.UTF_8));
                    }
                } catch (IOException ignored) {
                    // the process ended
                }
            });
            reader.setDaemon(true);
            reader.start();
        }

        String output() {
            return out.toString();
        }

        /** Waits until the output, from its start, contains {@code expected}. */
        void saw(String expected) throws Exception {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WAIT_MS);
            while (!output().contains(expected)) {
                if (System.nanoTime() > deadline) {
                    throw new AssertionError("'" + expected + "' never came; output:\n" + output());
                }
                Thread.sleep(20);
            }
        }

        void send(String line) throws IOException {
            in.write((line + "\n").getBytes(StandardCharsets.UTF_8));
            in.flush();
        }

        /** Sends {@code command} until the output after it contains {@code expected}. */
        String until(String command, String expected) throws Exception {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WAIT_MS);
            while (System.nanoTime() < deadline) {
                int from = out.length();
                send(command);
                long pause = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500);
                while (System.nanoTime() < pause) {
                    String after = out.substring(from);
                    if (after.contains(expected)) {
                        return after;
                    }
                    Thread.sleep(20);
                }
            }
            throw new AssertionError("'" + expected + "' never followed '" + command + "'; output:\n" + output());
        }

        /**
         * Sends {@code command} until its output contains {@code expected} {@code times} times or more.
         * Each try waits for its output to end (the bundle list sent after it begins), so that no
         * output of an earlier try is counted.
         */
        String until(String command, String expected, int times) throws Exception {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WAIT_MS);
            while (System.nanoTime() < deadline) {
                int from = out.length();
                send(command);
                send("lb org.apache.felix.framework");
                int end;
                while ((end = out.indexOf("START LEVEL", from)) < 0 && System.nanoTime() < deadline) {
                    Thread.sleep(20);
                }
                String after = out.substring(from, Math.max(from, end));
                if (end >= 0 && Pattern.compile(Pattern.quote(expected)).matcher(after).results().count() >= times) {
                    return after;
                }
                Thread.sleep(100);
            }
            throw new AssertionError("'" + expected + "' did not follow '" + command + "' " + times + " times; output:\n" + output());
        }

        /**
         * Sends {@code command} until its output lacks {@code gone}. Each try waits for its output to end
         * (the framework's row of the bundle list sent after it).
         */
        void untilGone(String command, String gone) throws Exception {
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WAIT_MS);
            while (System.nanoTime() < deadline) {
                int from = out.length();
                send(command);
                send("lb -s org.apache.felix.framework");
                int end;
                while ((end = out.indexOf("|org.apache.felix.framework", from)) < 0 && System.nanoTime() < deadline) {
                    Thread.sleep(20);
                }
                if (end >= 0 && !out.substring(from, end).contains(gone)) {
                    return;
                }
                Thread.sleep(100);
            }
            throw new AssertionError("'" + gone + "' still followed '" + command + "'; output:\n" + output());
        }

        int finish() throws Exception {
            in.close();
            assertTrue(process.waitFor(WAIT_MS, TimeUnit.MILLISECONDS), "the distribution did not stop at end of input");
            reader.join(WAIT_MS);
            return process.exitValue();
        }

        @Override
        public void close() {
            process.destroyForcibly();
        }
    }

    /** Uninstalls the distribution's own CPU backend, so that the test can bring one in again. */
    private static void uninstallTheCpuBackend(Session s) throws Exception {
        String backends = s.until("mem:backends", "io.ferrum.memory.cpu");
        Matcher id = Pattern.compile("(\\d+)\\s+io\\.ferrum\\.memory\\.cpu").matcher(backends);
        assertTrue(id.find(), backends);
        s.send("uninstall " + id.group(1));
        s.until("mem:devices", "No memory devices");
    }

    @Test
    void pipedCommandsPrintTheirResultsOnlyAndAFailureExitsOne() throws Exception {
        Path dir = freshDir("piped");
        Path script = dir.resolve("commands.txt");
        Files.writeString(script, String.join("\n",
                "mem:devices",
                "mem:alloc 64k",
                "mem:alloc -5",
                "mem:strategies",
                "mem:backends",
                "mem:pressure",
                "") );
        Process p = java(dir).redirectInput(script.toFile()).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(WAIT_MS, TimeUnit.MILLISECONDS));
        assertEquals(1, p.exitValue(), "a failed command (mem:alloc -5) fails the script: " + out);
        assertFalse(out.contains("g!") || out.contains("Welcome") || out.contains("gosh"), "results only: " + out);
        assertTrue(out.contains("DEVICE  BACKEND"), out);
        assertTrue(Pattern.compile("cpu:0\\s+ffm").matcher(out).find(), out);
        assertTrue(Pattern.compile("0x[0-9a-f]{16} on cpu:0").matcher(out).find(), "mem:alloc prints the handle: " + out);
        assertTrue(out.contains("error: Invalid size '-5'"), "bad input is one clear line: " + out);
        assertTrue(Pattern.compile("\\*\\s+best-fit").matcher(out).find(), "best-fit is marked active: " + out);
        assertTrue(Pattern.compile("io\\.ferrum\\.memory\\.cpu\\s+cpu\\s+ACTIVE\\s+cpu:0").matcher(out).find(), out);
        assertTrue(out.contains("overall: LOW"), out);
        assertFalse(out.contains("\tat "), "no stack trace reaches the user: " + out);
        assertFalse(out.contains("WARNING"), "a clean start: " + out);
        assertTrue(Files.isDirectory(dir.resolve("plugins")) && Files.isDirectory(dir.resolve("config")),
                "the watched folders are created");
    }

    @Test
    void aBackendDroppedIntoPluginsAppearsAndLeavesWithoutARestart() throws Exception {
        Path dir = freshDir("plugins");
        try (Session s = new Session(dir)) {
            uninstallTheCpuBackend(s);

            Path plugin = dir.resolve("plugins").resolve("io.ferrum.memory.cpu.jar");
            Files.copy(Path.of(System.getProperty("ferrum.bundle.cpu")), plugin);
            s.until("mem:devices", "cpu:0");

            Files.writeString(dir.resolve("config").resolve("io.ferrum.memory.cpu.device-tenant1.cfg"),
                    "index=1\ncapacity=67108864\ninitialSize=4194304\ngrowthIncrement=4194304\n");
            String devices = s.until("mem:devices", "cpu:1");
            assertTrue(devices.contains("64.0 MiB"), devices);

            Files.delete(plugin);
            s.until("mem:devices", "No memory devices");
            assertEquals(0, s.finish(), s.output());
        }
    }

    @Test
    void aBackendInstalledFromTheShellAppearsAndUninstallingItRemovesIt() throws Exception {
        Path dir = freshDir("install");
        try (Session s = new Session(dir)) {
            uninstallTheCpuBackend(s);
            String installed = s.until("install " + Path.of(System.getProperty("ferrum.bundle.cpu")).toUri(), "Bundle ID:");
            Matcher newId = Pattern.compile("Bundle ID: (\\d+)").matcher(installed);
            assertTrue(newId.find(), installed);
            s.send("start " + newId.group(1));
            s.until("mem:devices", "cpu:0");
            s.until("mem:alloc 1m cpu:0", " on cpu:0");
            s.send("uninstall " + newId.group(1));
            s.until("mem:devices", "No memory devices");
            List<String> lines = new ArrayList<>(s.output().lines().toList());
            assertFalse(lines.stream().anyMatch(l -> l.startsWith("\tat ")), s.output());
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * The distribution's installers bring what they claimed to FileInstall's notice again (they move its file's time
     * on) only after a restart of their bundle in a running framework, never at a launch. The bnd launcher hands the
     * framework 1 as its beginning start level and raises the level itself, so the framework's own property said that
     * every launch had "started" at level 1: a user's jar in {@code plugins/} that is no bundle had its time moved at
     * each start of the distribution, and the console, asking the same, ran its first statement at level 10, before
     * the plugins started (ConsoleIT's {@code test:print}, "Command not found").
     */
    @Test
    void aLaunchTouchesNoFileOfPlugins() throws Exception {
        Path dir = freshDir("launch-touches-nothing");
        Path plain = Files.writeString(Files.createDirectories(dir.resolve("plugins")).resolve("plain.jar"), "no jar");
        FileTime old = FileTime.fromMillis(TimeUnit.DAYS.toMillis(365 * 50));
        Files.setLastModifiedTime(plain, old);
        try (Session s = new Session(dir)) {
            s.until("log 50 error", plain + " is not installed");
            s.send("frameworklevel");
            s.saw("Level is 100");
            assertEquals(0, s.finish(), s.output());
        }
        assertEquals(old, Files.getLastModifiedTime(plain), "the time of a user's file in plugins/");
    }

    /**
     * The bnd launcher sets a bundle's start level at each update as it does at each install: to the level its
     * -runbundles give that name and version, else to 11. So a plugin that FileInstall had put at 20, or one a user
     * had moved with {@code bundlelevel -s}, was at 11 after any update: {@code update ID}, a bare {@code update},
     * {@code Bundle.update()} itself, FileInstall's update of a changed jar. Each keeps the level now (after a restart
     * of the distribution's bundle too: {@link ConsoleIT}, at a terminal, where the console survives it).
     */
    @Test
    void anUpdateKeepsTheBundlesStartLevel() throws Exception {
        Path dir = freshDir("update-keeps-level");
        Path plugin = ConsoleIT.writeActivatorBundle(Files.createDirectories(dir.resolve("plugins")).resolve("counting.jar"),
                "io.ferrum.memory.test.counting", StartCountingActivator.class);
        String name = "io.ferrum.memory.test.counting";
        try (Session s = new Session(dir)) {
            s.saw("started " + name + " 1.0.0"); // FileInstall set its level before it started it
            assertEquals(20, levelAfter(s, "lb -s " + name), "FileInstall's level");
            Matcher id = Pattern.compile("(\\d+)\\|Active").matcher(s.output());
            assertTrue(id.find(), s.output());
            assertEquals(20, levelAfter(s, "update " + name), "a bare update");
            assertEquals(20, levelAfter(s, "update " + name + " " + plugin), "an update from a jar");
            assertEquals(20, levelAfter(s, "b = ($.context bundle " + id.group(1) + "); $b update"), "Bundle.update()");
            assertEquals(30, levelAfter(s, "bundlelevel -s 30 " + name), "a level a user set");

            // FileInstall's update of a changed jar: the new version's start says it is done.
            Path changed = ConsoleIT.writeActivatorBundle(dir.resolve("changed.jar"), name, "1.0.1", StartCountingActivator.class);
            Files.move(changed, plugin, StandardCopyOption.REPLACE_EXISTING);
            s.saw("started " + name + " 1.0.1");
            assertEquals(30, levelAfter(s, "lb -s " + name), "FileInstall's update of a changed jar");

            assertFalse(s.output().contains("\tat "), s.output());
        }
    }

    /**
     * Sends {@code command}, then one {@code bundlelevel} of the counting plugin; the next level said is that
     * statement's, as the console runs them in order.
     */
    private static int levelAfter(Session s, String command) throws Exception {
        String bundle = "io.ferrum.memory.test.counting";
        Pattern said = Pattern.compile(Pattern.quote(bundle) + " \\[\\d+\\] is level (\\d+)");
        long before = said.matcher(s.output()).results().count();
        s.send(command);
        s.send("bundlelevel " + bundle);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WAIT_MS);
        List<MatchResult> levels;
        while ((levels = said.matcher(s.output()).results().toList()).size() <= before) {
            assertTrue(System.nanoTime() < deadline, "no level followed '" + command + "': " + s.output());
            Thread.sleep(20);
        }
        return Integer.parseInt(levels.get((int) before).group(1));
    }

    /**
     * Issue 17: a strategy name that no strategy has is refused with the list of those there are and
     * changes nothing; a valid choice is written to config/ and is still active after a restart.
     */
    @Test
    void aStrategyChoiceSurvivesARestartAndATypoIsRefused() throws Exception {
        Path dir = freshDir("strategy");
        Path cfg = dir.resolve("config").resolve("io.ferrum.memory.monitor.cfg");
        try (Session s = new Session(dir)) {
            String typo = s.until("mem:strategy bestfit", "nothing changed");
            assertTrue(typo.contains("error: Unknown strategy 'bestfit': the strategies present are best-fit, most-free,"
                    + " preferred-order, round-robin; nothing changed"), typo);
            s.until("mem:strategy \"\"", "error: Unknown strategy ''");
            assertFalse(Files.exists(cfg), "a refused name is not saved");
            s.until("mem:strategy most-free", "active strategy: most-free");
            assertEquals(1, s.finish(), "the refused names failed the piped session: " + s.output());
        }
        assertTrue(Files.readAllLines(cfg).contains("strategy=most-free"), "written where the distribution keeps its configuration");
        try (Session s = new Session(dir)) {
            s.until("mem:strategy", "active strategy: most-free");
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * The monitor configured by a typed {@code .config} file: {@code mem:strategy} saves the choice in
     * that file, keeping its other values, rather than in a new {@code .cfg} file for the same PID,
     * which FileInstall would apply as the whole configuration (dropping maxAttempts and
     * samplePeriodMs) and which would leave two files fighting over one PID at the next start.
     */
    @Test
    void aStrategyChoiceIsSavedInTheMonitorsConfigFile() throws Exception {
        Path dir = freshDir("strategy-config");
        Path config = dir.resolve("config").resolve("io.ferrum.memory.monitor.config");
        Files.createDirectories(config.getParent());
        Files.writeString(config, "maxAttempts=I\"2\"\nsamplePeriodMs=L\"0\"\nstrategy=\"round-robin\"\n");
        try (Session s = new Session(dir)) {
            s.until("mem:strategy", "active strategy: round-robin");
            s.until("mem:strategy most-free", "active strategy: most-free");
            Thread.sleep(1500);
            String info = s.until("scr:info io.ferrum.memory.monitor.MemoryMonitor", "- Strategy:");
            assertTrue(Pattern.compile("maxAttempts<Integer> = 2").matcher(info).find(), "the file's other values stay: " + info);
            assertEquals(0, s.finish(), s.output());
        }
        assertFalse(Files.exists(dir.resolve("config").resolve("io.ferrum.memory.monitor.cfg")), "no second file for the PID");
        String saved = Files.readString(config);
        assertTrue(saved.contains("strategy=\"most-free\"") && saved.contains("maxAttempts=I\"2\""), saved);
        try (Session s = new Session(dir)) {
            s.until("mem:strategy", "active strategy: most-free");
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * Issue 17: a copy of a built-in bundle dropped into plugins/ does not replace it (its device and
     * blocks stay), and deleting the copy does not uninstall the built-in bundle.
     */
    @Test
    void aCopyOfABuiltInBundleInPluginsNeitherReplacesNorRemovesIt() throws Exception {
        Path dir = freshDir("duplicate");
        try (Session s = new Session(dir)) {
            String before = s.until("mem:backends", "io.ferrum.memory.cpu");
            Matcher allocated = Pattern.compile("0x[0-9a-f]{16}").matcher(s.until("mem:alloc 1m cpu:0", " on cpu:0"));
            assertTrue(allocated.find(), s.output());
            String handle = allocated.group();
            Path copy = dir.resolve("plugins").resolve("io.ferrum.memory.cpu.jar");
            Files.copy(Path.of(System.getProperty("ferrum.bundle.cpu")), copy);
            // FileInstall takes a file after it is unchanged over one poll (50 ms): give it many polls.
            Thread.sleep(1500);
            s.until("mem:handles", handle);
            Files.delete(copy);
            Thread.sleep(1500);
            String after = s.until("mem:backends", "io.ferrum.memory.cpu");
            assertEquals(backendRow(before), backendRow(after), "the same built-in bundle, active, serving cpu:0");
            s.until("mem:handles", handle);
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * A copy of a built-in bundle already in plugins/ when the distribution starts is refused as well:
     * FileInstall scans plugins/ as it starts, and the guard must be there before that scan, or the
     * copy is taken as an update of the built-in bundle and replaces it.
     */
    @Test
    void aCopyOfABuiltInBundleInPluginsAtStartDoesNotReplaceIt() throws Exception {
        Path dir = freshDir("duplicate-at-start");
        Path copy = dir.resolve("plugins").resolve("io.ferrum.memory.cpu.jar");
        Files.createDirectories(copy.getParent());
        rewriteManifest(Path.of(System.getProperty("ferrum.bundle.cpu")), copy, Map.of("Bundle-Name", "A copy of the CPU backend"));
        try (Session s = new Session(dir)) {
            String refused = s.until("log 50 error", "Bundle symbolic name and version are not unique: io.ferrum.memory.cpu");
            assertTrue(refused.contains(copy.toString()), "the refusal names the file: " + refused);
            String lb = s.until("lb io.ferrum.memory.cpu", "CPU backend");
            assertFalse(lb.contains("A copy of the CPU backend"), "the built-in bundle is not replaced: " + lb);
            s.until("mem:alloc 1m cpu:0", " on cpu:0");
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * Another version of the CPU backend dropped into plugins/ registers a manager for cpu:0 too, but
     * the built-in one (the older service) goes on serving it: mem:backends says which one serves and
     * that the other stands by, rather than listing cpu:0 as served by both.
     */
    @Test
    void aSecondVersionOfABackendIsShownStandingByForTheDeviceItDoesNotServe() throws Exception {
        Path dir = freshDir("second-version");
        try (Session s = new Session(dir)) {
            String before = s.until("mem:backends", "io.ferrum.memory.cpu");
            Matcher builtIn = Pattern.compile("(\\d+)\\s+io\\.ferrum\\.memory\\.cpu").matcher(before);
            assertTrue(builtIn.find(), before);
            rewriteManifest(Path.of(System.getProperty("ferrum.bundle.cpu")), dir.resolve("plugins").resolve("cpu-next.jar"),
                    Map.of("Bundle-Version", "9.0.0"));
            s.until("lb -s io.ferrum.memory.cpu", "|9.0.0");
            String after = s.until("mem:backends", "standing by");
            Matcher standby = Pattern.compile("\\d+\\s+io\\.ferrum\\.memory\\.cpu\\s+cpu\\s+ACTIVE\\s+cpu:0[ \\t]*(.*)").matcher(after);
            List<String> notes = new ArrayList<>();
            while (standby.find()) {
                notes.add(standby.group(1).strip());
            }
            assertEquals(List.of("", "standing by for cpu:0, which bundle " + builtIn.group(1) + " serves"), notes, after);
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * Review defect: a corrupt, empty or non-bundle jar in plugins/ was ignored without a word, even at
     * FileInstall's log level 4. Each is one error line naming the file and why, once per version of
     * the file; a real bundle put in the place of one installs.
     */
    @Test
    void aJarInPluginsThatIsNoBundleIsReportedOnceNamingTheFile() throws Exception {
        Path dir = freshDir("not-a-bundle");
        try (Session s = new Session(dir)) {
            s.until("mem:devices", "cpu:0");
            Path plugins = dir.resolve("plugins");
            Path corrupt = plugins.resolve("corrupt.jar");
            Path empty = plugins.resolve("empty.jar");
            Path plain = plugins.resolve("plain.jar");
            // Each file is written beside plugins/ and moved in whole: a poll must not see one half
            // written (a jar without its end, a file not yet filled), which is another version of it.
            byte[] noise = new byte[3000];
            new java.util.Random(7).nextBytes(noise);
            Files.write(dir.resolve("corrupt.jar"), noise);
            Files.write(dir.resolve("empty.jar"), new byte[0]);
            Manifest m = new Manifest();
            m.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
            try (JarOutputStream out = new JarOutputStream(Files.newOutputStream(dir.resolve("plain.jar")), m)) {
                out.putNextEntry(new JarEntry("a.txt"));
                out.write("not a bundle".getBytes(StandardCharsets.UTF_8));
                out.closeEntry();
            }
            for (Path p : List.of(corrupt, empty, plain)) {
                Files.move(dir.resolve(p.getFileName()), p, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
            }
            s.until("log 50 error", plain + " is not installed: it is no OSGi bundle: its manifest has no Bundle-SymbolicName");
            s.until("log 50 error", empty + " is not installed: it is empty (0 bytes)");
            s.until("log 50 error", corrupt + " is not installed: it is no readable jar (ZipException");
            // Many polls (50 ms each) later, still one line each.
            Thread.sleep(1500);
            String log = s.until("log 200 error", "plain.jar");
            for (Path p : List.of(corrupt, empty, plain)) {
                assertEquals(1, log.split(Pattern.quote(p + " is not installed"), -1).length - 1, "once: " + log);
            }

            rewriteManifest(Path.of(System.getProperty("ferrum.bundle.cpu")), plain, Map.of("Bundle-Version", "9.0.0"));
            s.until("lb -s io.ferrum.memory.cpu", "|9.0.0");
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * Review defect: with io.ferrum.memory.cpu.cfg and io.ferrum.memory.cpu.config both in config/,
     * one silently won, and deleting it deleted the configuration although the other file was still
     * there. A warning names both files, and the remaining file applies again.
     */
    @Test
    void twoFilesForOnePidAreNamedAndDeletingOneKeepsTheOther() throws Exception {
        Path dir = freshDir("two-files");
        Path cfg = dir.resolve("config").resolve("io.ferrum.memory.cpu.cfg");
        Path config = dir.resolve("config").resolve("io.ferrum.memory.cpu.config");
        try (Session s = new Session(dir)) {
            s.until("mem:devices", "cpu:0");
            Files.writeString(cfg, "capacity=64m\ninitialSize=4m\ngrowthIncrement=4m\n");
            s.until("mem:devices", "64.0 MiB");
            Files.writeString(config, "capacity=\"32m\"\ninitialSize=\"4m\"\ngrowthIncrement=\"4m\"\n");
            s.until("mem:devices", "32.0 MiB");
            String warning = s.until("log 50 warn", "2 files configure io.ferrum.memory.cpu:");
            assertTrue(warning.contains(config + " applies, " + cfg + " is ignored"), warning);

            Files.delete(config);
            s.until("mem:devices", "64.0 MiB");
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * A file in config/ whose PID no bundle designates (a typo: {@code device} spelt {@code devcie}, or
     * {@code cpux}) became a configuration that configured nothing, without a word. One warning names
     * the file, its PID and ours; a file there at start is named too, once the framework started.
     */
    @Test
    void aFileForAPidThatNothingUsesIsNamed() throws Exception {
        Path dir = freshDir("unknown-pid");
        Path atStart = dir.resolve("config").resolve("io.ferrum.memory.cpux.cfg");
        Files.createDirectories(atStart.getParent());
        Files.writeString(atStart, "capacity=64m\n");
        Files.writeString(atStart.resolveSibling("io.ferrum.memory.monitor.cfg"), "maxAttempts=3\n"); // ours: not named
        Files.writeString(atStart.resolveSibling("io.ferrum.memory.cpu.device-t2.cfg"), "index=2\ncapacity=64m\n");
        Path typo = dir.resolve("config").resolve("io.ferrum.memory.cpu.devcie-t1.cfg");
        try (Session s = new Session(dir)) {
            String first = s.until("log 50 warn", "configures io.ferrum.memory.cpux,");
            assertTrue(first.contains(atStart + " configures io.ferrum.memory.cpux, which no bundle designates: it"
                    + " changes nothing until a bundle that does is installed; check the name (ours: io.ferrum.memory.cpu,"
                    + " io.ferrum.memory.cpu.device-<name>,"
                    + " io.ferrum.memory.cuda, io.ferrum.memory.cuda.device-<name>, io.ferrum.memory.monitor)"), first);
            Files.writeString(typo, "index=1\ncapacity=64m\n");
            String second = s.until("log 50 warn", "configures io.ferrum.memory.cpu.devcie,");
            assertTrue(second.contains(typo + " configures io.ferrum.memory.cpu.devcie, which no bundle designates"), second);
            assertFalse(second.contains("configures io.ferrum.memory.monitor,") || second.contains("configures io.ferrum.memory.cpu.device,"),
                    "a PID in use is not named: " + second);
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * {@code io.ferrum.memory.cpu-t1.cfg}, meant as {@code io.ferrum.memory.cpu.device-t1.cfg}, is a
     * factory configuration of the PID that configures cpu:0 alone: it configured cpu:0 (64 MiB
     * instead of the machine's RAM) without a word, as its factory PID is one a bundle designates,
     * but not as a factory PID.
     */
    @Test
    void aFactoryFileOfASingleConfigurationsPidIsNamed() throws Exception {
        Path dir = freshDir("factory-of-single-pid");
        Path file = dir.resolve("config").resolve("io.ferrum.memory.cpu-t1.cfg");
        Files.createDirectories(file.getParent());
        Files.writeString(file, "capacity=64m\n");
        try (Session s = new Session(dir)) {
            String warned = s.until("log 50 warn", "io.ferrum.memory.cpu-t1.cfg");
            assertTrue(warned.contains(file + " is a factory configuration of io.ferrum.memory.cpu, which is designated"
                    + " as a single configuration: it configures that one as io.ferrum.memory.cpu.cfg would; check the name"
                    + " (ours: io.ferrum.memory.cpu, io.ferrum.memory.cpu.device-<name>,"), warned);
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * A file saved before the plugin that designates its PID: it was named at once as changing nothing
     * ("check the name"), and when the plugin came and applied it, nothing said so. The warning says
     * that the file waits for such a bundle, and a second one says when one has come. (At start, both
     * already in their folders, nothing is named: FileInstall installs plugins/ as it starts, before the
     * framework reports it started.)
     */
    @Test
    void aFileSavedBeforeItsPluginIsNamedAsWaitingAndThenAsApplied() throws Exception {
        Path dir = freshDir("file-before-plugin");
        try (Session s = new Session(dir)) {
            uninstallTheCpuBackend(s);
            Path file = dir.resolve("config").resolve("io.ferrum.memory.cpu.device-t1.cfg");
            Files.writeString(file, "index=1\ncapacity=64m\n");
            String warned = s.until("log 50 warn", "configures io.ferrum.memory.cpu.device,");
            assertTrue(warned.contains(file + " configures io.ferrum.memory.cpu.device, which no bundle designates: it changes"
                    + " nothing until a bundle that does is installed; check the name (ours: "), warned);

            Files.copy(Path.of(System.getProperty("ferrum.bundle.cpu")), dir.resolve("plugins").resolve("io.ferrum.memory.cpu.jar"));
            assertTrue(s.until("mem:devices", "cpu:1").contains("64.0 MiB"), "the plugin applies the file");
            String applied = s.until("log 50 warn", "designates now");
            assertTrue(applied.contains(file + " configures io.ferrum.memory.cpu.device, which io.ferrum.memory.cpu "), applied);
            assertTrue(applied.contains(" designates now: the file, named as configuring nothing, applies"), applied);
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * A file and the plugin that designates its PID, both there at start: the file is not named, as
     * FileInstall installs what plugins/ holds as it starts, before the framework reports it started
     * and the files there are looked at. {@code io.ferrum.memory.cpux.cfg}, there too, is named in the
     * same pass, so its warning shows that the pass has run.
     */
    @Test
    void aFileAndItsPluginThereAtStartAreNotNamed() throws Exception {
        Path dir = freshDir("file-and-plugin-at-start");
        Path config = Files.createDirectories(dir.resolve("config"));
        Path plugins = Files.createDirectories(dir.resolve("plugins"));
        Files.writeString(config.resolve("io.ferrum.memory.extra.cfg"), "size=3\n");
        Files.writeString(config.resolve("io.ferrum.memory.cpux.cfg"), "capacity=64m\n");
        Manifest m = new Manifest();
        m.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
        m.getMainAttributes().put(new Attributes.Name("Bundle-ManifestVersion"), "2");
        m.getMainAttributes().put(new Attributes.Name("Bundle-SymbolicName"), "io.ferrum.memory.extra");
        try (JarOutputStream jar = new JarOutputStream(Files.newOutputStream(plugins.resolve("extra.jar")), m)) {
            jar.putNextEntry(new JarEntry("OSGI-INF/metatype/extra.xml"));
            jar.write(("<metatype:MetaData xmlns:metatype=\"http://www.osgi.org/xmlns/metatype/v1.2.0\">"
                    + "<OCD id=\"extra\" name=\"Extra\"><AD id=\"size\" type=\"Integer\" default=\"1\"/></OCD>"
                    + "<Designate pid=\"io.ferrum.memory.extra\"><Object ocdref=\"extra\"/></Designate>"
                    + "</metatype:MetaData>").getBytes(StandardCharsets.UTF_8));
            jar.closeEntry();
        }
        try (Session s = new Session(dir)) {
            String warned = s.until("log 50 warn", "configures io.ferrum.memory.cpux,");
            assertTrue(warned.contains("io.ferrum.memory.extra, io.ferrum.memory.monitor)"), "the plugin's PID is among ours: " + warned);
            assertFalse(warned.contains("configures io.ferrum.memory.extra,"), "a file its plugin uses is not named: " + warned);
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * Writes a plugin bundle of our namespace, {@code io.ferrum.memory.extra} 1.0.0, with no metatype:
     * a component (its own description) takes {@code io.ferrum.memory.extra}, its activator's managed
     * service {@code io.ferrum.memory.extra.managed} and managed service factory {@code
     * io.ferrum.memory.extra.device}; each prints what it gets.
     */
    static void writePluginWithoutMetatype(Path jarFile) throws IOException {
        Manifest m = new Manifest();
        Attributes a = m.getMainAttributes();
        a.put(Attributes.Name.MANIFEST_VERSION, "1.0");
        a.put(new Attributes.Name("Bundle-ManifestVersion"), "2");
        a.put(new Attributes.Name("Bundle-SymbolicName"), "io.ferrum.memory.extra");
        a.put(new Attributes.Name("Bundle-Version"), "1.0.0");
        a.put(new Attributes.Name("Bundle-Activator"), NoMetatypeActivator.class.getName());
        a.put(new Attributes.Name("Import-Package"), "org.osgi.framework,org.osgi.service.cm");
        a.put(new Attributes.Name("Service-Component"), "OSGI-INF/extra.xml");
        try (JarOutputStream jar = new JarOutputStream(Files.newOutputStream(jarFile), m)) {
            jar.putNextEntry(new JarEntry("OSGI-INF/extra.xml"));
            jar.write(("<scr:component xmlns:scr=\"http://www.osgi.org/xmlns/scr/v1.3.0\" name=\"io.ferrum.memory.extra.Plugin\""
                    + " configuration-pid=\"io.ferrum.memory.extra\" configuration-policy=\"require\" immediate=\"true\">"
                    + "<implementation class=\"" + NoMetatypeComponent.class.getName() + "\"/></scr:component>")
                    .getBytes(StandardCharsets.UTF_8));
            jar.closeEntry();
            for (Class<?> c : List.of(NoMetatypeComponent.class, NoMetatypeActivator.class)) {
                String entry = c.getName().replace('.', '/') + ".class";
                jar.putNextEntry(new JarEntry(entry));
                try (InputStream body = c.getClassLoader().getResourceAsStream(entry)) {
                    body.transferTo(jar);
                }
                jar.closeEntry();
            }
        }
    }

    /**
     * Review defect: a plugin of our namespace without metatype (a component with its own
     * configuration PID, a managed service, a managed service factory) took its files, and each was
     * named as configuring nothing ("which no bundle designates ... check the name"), as only
     * metatype was read. A file a bundle's component or managed service takes is not named: the
     * component's there at start (the plugin's description is read, as FileInstall starts plugins/ only
     * after the files there are looked at), the managed services' saved once the plugin runs (a typo
     * saved after them shows that they were looked at: Config Admin's events come in order).
     */
    @Test
    void aFileThatAPluginWithoutMetatypeTakesIsNotNamed() throws Exception {
        Path dir = freshDir("plugin-without-metatype");
        Path config = Files.createDirectories(dir.resolve("config"));
        writePluginWithoutMetatype(Files.createDirectories(dir.resolve("plugins")).resolve("extra.jar"));
        Files.writeString(config.resolve("io.ferrum.memory.extra.cfg"), "size=3\n");
        Files.writeString(config.resolve("io.ferrum.memory.cpux.cfg"), "capacity=64m\n");
        try (Session s = new Session(dir)) {
            s.saw("plugin component got size=3");
            s.until("log 50 warn", "configures io.ferrum.memory.cpux,");
            String warned = s.until("log 50 warn", "configures io.ferrum.memory.cpux,", 1);
            assertFalse(warned.contains("configures io.ferrum.memory.extra"), "a file the plugin takes is not named: " + warned);

            Files.writeString(config.resolve("io.ferrum.memory.extra.managed.cfg"), "size=4\n");
            Files.writeString(config.resolve("io.ferrum.memory.extra.device-a.cfg"), "size=5\n");
            s.saw("plugin managed service got size=4");
            s.saw("plugin managed service factory got size=5");
            Files.writeString(config.resolve("io.ferrum.memory.cpuy.cfg"), "capacity=64m\n");
            s.until("log 50 warn", "configures io.ferrum.memory.cpuy,");
            String later = s.until("log 50 warn", "configures io.ferrum.memory.cpuy,", 1);
            assertFalse(later.contains("configures io.ferrum.memory.extra"), "a file the plugin takes is not named: " + later);
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * Files saved before a plugin without metatype that takes them: named as waiting, and when the
     * plugin came and took them, nothing said so (only a bundle's metatype counted). The component's
     * file applies once the plugin is installed, the managed service's once it registers it.
     */
    @Test
    void aFileSavedBeforeAPluginWithoutMetatypeIsNamedAsAppliedWhenItComes() throws Exception {
        Path dir = freshDir("file-before-plugin-without-metatype");
        try (Session s = new Session(dir)) {
            s.until("mem:devices", "cpu:0"); // started: config/ is there
            Path file = dir.resolve("config").resolve("io.ferrum.memory.extra.cfg");
            Path managed = dir.resolve("config").resolve("io.ferrum.memory.extra.managed.cfg");
            Files.writeString(file, "size=3\n");
            Files.writeString(managed, "size=4\n");
            String warned = s.until("log 50 warn", "configures io.ferrum.memory.extra,");
            assertTrue(warned.contains(file + " configures io.ferrum.memory.extra, which no bundle designates: it changes"
                    + " nothing until a bundle that does is installed"), warned);
            s.until("log 50 warn", "configures io.ferrum.memory.extra.managed,");

            writePluginWithoutMetatype(dir.resolve("plugins").resolve("extra.jar"));
            s.saw("plugin component got size=3");
            s.saw("plugin managed service got size=4");
            String applied = s.until("log 50 warn", "io.ferrum.memory.extra.managed, which io.ferrum.memory.extra 1.0.0 uses now");
            assertTrue(applied.contains(file + " configures io.ferrum.memory.extra, which io.ferrum.memory.extra 1.0.0 uses now:"
                    + " the file, named as configuring nothing, applies"), applied);
            assertTrue(applied.contains(managed + " configures io.ferrum.memory.extra.managed, which io.ferrum.memory.extra 1.0.0"
                    + " uses now: the file, named as configuring nothing, applies"), applied);
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * A typo in our namespace ({@code io.ferum.memory.cpu-1.cfg}, {@code io.ferrum.memmory.pool.cfg})
     * made a file that configured nothing, without a word: only {@code io.ferrum.memory.*} was looked at.
     * One warning names the file and the nearest PID of ours; another project's PID is not named.
     */
    @Test
    void aTypoInOurNamespaceIsNamedWithTheNearestPid() throws Exception {
        Path dir = freshDir("namespace-typo");
        Path atStart = dir.resolve("config").resolve("io.ferum.memory.cpu-1.cfg");
        Files.createDirectories(atStart.getParent());
        Files.writeString(atStart, "index=1\ncapacity=64m\n");
        Files.writeString(atStart.resolveSibling("org.apache.felix.example.cfg"), "size=3\n"); // not ours: not named
        Path later = dir.resolve("config").resolve("io.ferrum.memmory.pool.cfg");
        try (Session s = new Session(dir)) {
            String first = s.until("log 50 warn", "configures io.ferum.memory.cpu,");
            assertTrue(first.contains(atStart + " configures io.ferum.memory.cpu, whose namespace is not ours (io.ferrum.memory.)"
                    + " but close to it: it changes nothing; the nearest PID of ours is io.ferrum.memory.cpu.device-<name>;"
                    + " check the name (ours: io.ferrum.memory.cpu, io.ferrum.memory.cpu.device-<name>, io.ferrum.memory.cuda,"
                    + " io.ferrum.memory.cuda.device-<name>, io.ferrum.memory.monitor)"), first);
            Files.writeString(later, "maxSize=64m\n");
            String second = s.until("log 50 warn", "configures io.ferrum.memmory.pool,");
            assertTrue(second.contains(later + " configures io.ferrum.memmory.pool, whose namespace is not ours"
                    + " (io.ferrum.memory.) but close to it: it changes nothing; the nearest PID of ours is io.ferrum.memory.cpu;"), second);
            assertFalse(second.contains("org.apache.felix.example"), "another project's PID is not named: " + second);
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * A file saved with a UTF-8 byte order mark (Windows editors' "UTF-8 with BOM"): FileInstall kept
     * the mark as the start of the first key, and the user got no word of the mark (our components
     * refused an unknown attribute {@code \u00ef\u00bb\u00bfcapacity}, a plugin's took its default).
     * One warning names the file and the mark, for a file there at start and for one saved later.
     */
    @Test
    void aFileSavedWithAByteOrderMarkIsNamed() throws Exception {
        Path dir = freshDir("byte-order-mark");
        Path atStart = dir.resolve("config").resolve("io.ferrum.memory.cpu.cfg");
        Files.createDirectories(atStart.getParent());
        byte[] bom = {(byte) 0xef, (byte) 0xbb, (byte) 0xbf};
        Files.write(atStart, bom);
        Files.writeString(atStart, "capacity=64m\n", java.nio.file.StandardOpenOption.APPEND);
        Path later = dir.resolve("config").resolve("org.example.plugin.cfg");
        try (Session s = new Session(dir)) {
            String first = s.until("log 50 warn", "io.ferrum.memory.cpu.cfg starts with");
            assertTrue(first.contains(atStart + " starts with a UTF-8 byte order mark (BOM), which FileInstall reads as part"
                    + " of its first line: the key 'capacity' is read as '\\u00ef\\u00bb\\u00bfcapacity' and configures"
                    + " nothing; save the file as UTF-8 without BOM (or as ASCII)"), first);
            Files.write(later, bom);
            Files.writeString(later, "# a plugin's file\nsize=3\n", java.nio.file.StandardOpenOption.APPEND);
            String second = s.until("log 50 warn", "org.example.plugin.cfg starts with");
            assertTrue(second.contains(later + " starts with a UTF-8 byte order mark (BOM)"), second);
            // Counted in one whole answer: what until saw may hold answers to earlier tries that came
            // late on a loaded machine (nine copies of the one warning, in CI once).
            s.until("mem:devices", "DEVICE  BACKEND", 1); // one whole answer: every earlier one has come
            String whole = s.until("log 50 warn", "org.example.plugin.cfg starts with", 1);
            assertEquals(1, Pattern.compile(Pattern.quote(atStart + " starts with")).matcher(whole).results().count(),
                    "one warning per file: " + whole);
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * A key given twice in a file (capacity=64m, then further down capacity=1g): FileInstall keeps the
     * last and drops the other without a word, so the device ran with 1 GiB and nothing said that the
     * file also said 64 MiB. The file is named, there at start and saved later, once per file.
     */
    @Test
    void aFileThatGivesAKeyTwiceIsNamed() throws Exception {
        Path dir = freshDir("duplicate-keys");
        Path atStart = Files.createDirectories(dir.resolve("config")).resolve("io.ferrum.memory.cpu.device-t1.cfg");
        Files.writeString(atStart, "index=1\ncapacity=64m\ninitialSize=2m\n# tuned later\ncapacity=1g\n");
        Path later = dir.resolve("config").resolve("org.example.plugin.cfg");
        try (Session s = new Session(dir)) {
            String first = s.until("log 50 warn", "io.ferrum.memory.cpu.device-t1.cfg gives");
            assertTrue(first.contains(atStart + " gives capacity twice ('64m', then '1g'; '1g' applies): FileInstall keeps"
                    + " the last value of a key and drops the others without a word; give each key once"), first);
            assertTrue(s.until("mem:devices", "cpu:1").contains("1.0 GiB"), "the last value applies");
            Files.writeString(later, "size=3\nsize=4\n");
            String second = s.until("log 50 warn", "org.example.plugin.cfg gives");
            assertTrue(second.contains(later + " gives size twice ('3', then '4'; '4' applies)"), second);
            s.until("mem:devices", "DEVICE  BACKEND", 1); // one whole answer: every earlier one has come
            String whole = s.until("log 50 warn", "org.example.plugin.cfg gives", 1);
            assertEquals(1, Pattern.compile(Pattern.quote(atStart + " gives")).matcher(whole).results().count(),
                    "one warning per file: " + whole);
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * A file that gives two keys differing only in case ({@code capacity} and {@code Capacity}): Config
     * Admin takes keys in any case as one and refused FileInstall's dictionary, which FileInstall logged
     * as an error with two stack traces, naming one key. One error line names the file, both keys and
     * what became of the configuration: none for a new file, the one before the edit for an edited one
     * (a typed {@code .config} file here). Fixed, the file applies.
     */
    @Test
    void aFileWithKeysDifferingOnlyInCaseIsRefusedInOneLine() throws Exception {
        Path dir = freshDir("keys-differing-in-case");
        Path config = Files.createDirectories(dir.resolve("config"));
        Path atStart = config.resolve("io.ferrum.memory.cpu.device-t1.cfg");
        Files.writeString(atStart, "index=1\ncapacity=64m\nCapacity=1g\n");
        Path edited = config.resolve("io.ferrum.memory.cpu.device-t2.config");
        try (Session s = new Session(dir)) {
            String first = s.until("log 50 error", atStart.toString());
            assertTrue(first.contains(atStart + " gives keys that differ only in case, capacity and Capacity: Config Admin"
                    + " takes them as one key and refuses the file, so no configuration is made of it; give each key once"),
                    first);
            Files.writeString(edited, "index=I\"2\"\ncapacity=\"64m\"\n");
            assertTrue(s.until("mem:devices", "cpu:2").contains("64.0 MiB"), s.output());
            Files.writeString(edited, "index=I\"2\"\ncapacity=\"64m\"\nCAPACITY=\"128m\"\n");
            String second = s.until("log 50 error", edited.toString());
            assertTrue(second.contains(edited + " gives keys that differ only in case, capacity and CAPACITY: Config Admin"
                    + " takes them as one key and refuses the file, so the configuration made of it"
                    + " before stays as it was; give each key once"), second);
            Files.writeString(atStart, "index=1\ncapacity=1g\n");
            assertTrue(s.until("mem:devices", "cpu:1").contains("64.0 MiB"), "cpu:2 keeps 64 MiB: " + s.output());
            assertFalse(s.output().contains("Exception"), "no stack trace: " + s.output());
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * A typed value FileInstall cannot read ({@code index=I"abc"} in a file whose values are all
     * typed): its reader threw NumberFormatException, which FileInstall logged as an error with a stack
     * trace naming neither the key nor what became of the configuration. One error line names the
     * file, the key and its value; an edited file keeps the configuration made of it before.
     */
    @Test
    void aTypedValueFileInstallCannotReadIsRefusedInOneLine() throws Exception {
        Path dir = freshDir("typed-value-unreadable");
        Path config = Files.createDirectories(dir.resolve("config"));
        Path atStart = config.resolve("io.ferrum.memory.cpu.device-t1.config");
        Files.writeString(atStart, "index=I\"abc\"\ncapacity=\"64m\"\n");
        Path edited = config.resolve("io.ferrum.memory.cpu.device-t2.config");
        try (Session s = new Session(dir)) {
            String first = s.until("log 50 error", atStart.toString());
            assertTrue(first.contains(atStart + " gives index=I\"abc\", which FileInstall cannot read as a typed value (I: a"
                    + " whole number), so no configuration is made of it; write the value as its type takes it"), first);
            Files.writeString(edited, "index=I\"2\"\ncapacity=\"64m\"\n");
            assertTrue(s.until("mem:devices", "cpu:2").contains("64.0 MiB"), s.output());
            Files.writeString(edited, "index=I\"2\"\ncapacity=\"128m\"\nmaxConcurrentTransfers=I\"2x\"\n");
            String second = s.until("log 50 error", edited.toString());
            assertTrue(second.contains(edited + " gives maxConcurrentTransfers=I\"2x\", which FileInstall cannot read as a typed"
                    + " value (I: a whole number), so the configuration made of it before stays as it was; write the value as"
                    + " its type takes it"), second);
            Files.writeString(atStart, "index=I\"1\"\ncapacity=\"64m\"\n");
            String devices = s.until("mem:devices", "cpu:1");
            assertTrue(devices.contains("cpu:2") && !devices.contains("128.0 MiB"), "cpu:2 keeps 64 MiB: " + devices);
            assertFalse(s.output().contains("Exception"), "no stack trace: " + s.output());
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * A folder in config/ named as a configuration file (a file replaced by a folder): FileInstall packs
     * it into a jar that none of its installers takes, and said nothing, at any log level. One error
     * line names the folder; replaced by a file again, the file applies.
     */
    @Test
    void aFolderNamedAsAConfigFileIsNamedAndAFileInItsPlaceApplies() throws Exception {
        Path dir = freshDir("folder-named-as-config-file");
        Path folder = Files.createDirectories(dir.resolve("config").resolve("io.ferrum.memory.cpu.device-t1.cfg"));
        Files.writeString(folder.resolve("inner.cfg"), "index=1\ncapacity=64m\n");
        try (Session s = new Session(dir)) {
            String error = s.until("log 50 error", folder + " is a folder");
            assertTrue(error.contains(folder + " is a folder: FileInstall makes configurations of files only, so it configures"
                    + " nothing; put the configuration in a file of that name"), error);
            Files.delete(folder.resolve("inner.cfg"));
            Files.delete(folder);
            Files.writeString(dir.resolve("t1.cfg"), "index=1\ncapacity=64m\n");
            Files.move(dir.resolve("t1.cfg"), folder, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
            assertTrue(s.until("mem:devices", "cpu:1").contains("64.0 MiB"), s.output());
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * A symbolic link in config/ that leads to no file ({@code ln -s /nowhere}), and one to an empty
     * folder: FileInstall skipped both without a word, at any log level (it takes the first for a file
     * deleted, and fails to pack the second into a jar). One error line names each, once; the link
     * pointed at a configuration file, it applies.
     */
    @Test
    void aLinkInConfigToNothingOrToAnEmptyFolderIsNamedOnce() throws Exception {
        Path dir = freshDir("links-in-config");
        Path config = Files.createDirectories(dir.resolve("config"));
        Path nowhere = Files.createSymbolicLink(config.resolve("io.ferrum.memory.cpu.device-t1.cfg"), Path.of("/nowhere"));
        Path empty = Files.createDirectories(dir.resolve("empty"));
        Path toEmpty = Files.createSymbolicLink(config.resolve("io.ferrum.memory.cpu.device-t2.cfg"), empty);
        String dangling = nowhere + " (a symbolic link to /nowhere) leads to no file FileInstall can see (gone, never there,"
                + " out of reach, or a loop of links): FileInstall skips it, so nothing is made of it; point the link at a"
                + " file or remove it";
        String emptyFolder = toEmpty + " (a symbolic link to " + empty + ") is an empty folder: FileInstall makes"
                + " configurations of files only, so it configures nothing; put the configuration in a file of that name";
        try (Session s = new Session(dir)) {
            s.until("log 50 error", dangling, 1);
            s.until("log 50 error", emptyFolder, 1);
            Files.writeString(dir.resolve("t1.cfg"), "index=1\ncapacity=64m\n");
            Files.delete(nowhere);
            Files.createSymbolicLink(nowhere, dir.resolve("t1.cfg"));
            assertTrue(s.until("mem:devices", "cpu:1").contains("64.0 MiB"), s.output());
            String log = s.until("log 50 error", emptyFolder, 1);
            assertEquals(1, Pattern.compile(Pattern.quote(dangling)).matcher(log).results().count(), "named once: " + log);
            assertEquals(1, Pattern.compile(Pattern.quote(emptyFolder)).matcher(log).results().count(), "named once: " + log);
            assertFalse(s.output().contains("Exception"), "no stack trace: " + s.output());
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * A folder in config/ holding a configuration file ({@code config/ferrum/io.ferrum.memory.cpu.device-t1.cfg},
     * a user expecting subfolders to be read): FileInstall packed the folder into a jar that no installer
     * takes, again at every poll, and the device was missing without a word at any log level. One error line
     * names the folder, once; the file moved into config/ applies. An exploded bundle in plugins/ that
     * FileInstall installs (it holds a file its filter takes, a jar) is still installed, and not named.
     */
    @Test
    void aFolderInConfigHoldingAConfigFileIsNamedOnceAndAnExplodedBundleStillInstalls() throws Exception {
        Path dir = freshDir("folder-in-config");
        Path config = Files.createDirectories(dir.resolve("config"));
        Path ferrum = Files.createDirectories(config.resolve("ferrum"));
        Path inFolder = Files.writeString(ferrum.resolve("io.ferrum.memory.cpu.device-t1.cfg"), "index=1\ncapacity=64m\n");
        Path bundle = Files.createDirectories(dir.resolve("plugins").resolve("exploded"));
        Files.writeString(Files.createDirectories(bundle.resolve("META-INF")).resolve("MANIFEST.MF"), "Manifest-Version: 1.0\n"
                + "Bundle-ManifestVersion: 2\nBundle-SymbolicName: org.example.exploded\nBundle-Version: 1.0.0\n\n");
        Files.writeString(Files.createDirectories(bundle.resolve("lib")).resolve("inner.jar"), "not read");
        String line = ferrum + " is a folder: " + config + " is not read recursively, so the configuration files and bundles"
                + " in it are neither applied nor installed; put them in " + config + " itself (a folder there is installed"
                + " only as an exploded bundle, one holding META-INF/MANIFEST.MF)";
        try (Session s = new Session(dir)) {
            s.until("log 50 error", line, 1);
            s.until("lb org.example.exploded", "Active");
            String log = s.until("log 50 error", line, 1);
            assertEquals(1, Pattern.compile(Pattern.quote(line)).matcher(log).results().count(), "named once: " + log);
            assertFalse(log.contains(bundle.toString()), "the exploded bundle is not named: " + log);
            Files.move(inFolder, config.resolve(inFolder.getFileName()));
            assertTrue(s.until("mem:devices", "cpu:1").contains("64.0 MiB"), s.output());
            assertFalse(s.output().contains("Exception"), "no stack trace: " + s.output());
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * A folder no installer takes ({@code config/ferrum/} holding a configuration file, a user expecting
     * subfolders to be read): FileInstall 3.7.4 packed it into {@code tmp/ferrum.jar} again at every poll
     * (50 ms), reading and writing all of it, for as long as it was there, since it retries at every poll
     * what no installer took. It is now packed once. Each round sets the packed jar's time back, then
     * drops a configuration file into config/ and waits until it applies, which takes config/'s watcher two
     * polls at least: a folder packed again at every poll has a new time by then.
     */
    @Test
    void aFolderNoInstallerTakesIsPackedOnceNotAtEveryPoll() throws Exception {
        Path dir = freshDir("folder-packed-once");
        Path config = Files.createDirectories(dir.resolve("config"));
        Path ferrum = Files.createDirectories(config.resolve("ferrum"));
        Files.writeString(ferrum.resolve("io.ferrum.memory.cpu.device-t1.cfg"), "index=1\ncapacity=64m\n");
        Path packed = dir.resolve("tmp").resolve("ferrum.jar");
        FileTime back = FileTime.fromMillis(1_000_000_000_000L);
        try (Session s = new Session(dir)) {
            s.until("log 50 error", ferrum + " is a folder", 1);
            s.until("mem:devices", "cpu:0");
            assertTrue(Files.isRegularFile(packed), "FileInstall packed the folder into " + packed);
            for (int device = 2; device <= 3; device++) {
                Files.setLastModifiedTime(packed, back);
                Path file = Files.writeString(dir.resolve("t.cfg"), "index=" + device + "\ncapacity=64m\n");
                Files.move(file, config.resolve("io.ferrum.memory.cpu.device-t" + device + ".cfg"),
                        java.nio.file.StandardCopyOption.ATOMIC_MOVE);
                s.until("mem:devices", "cpu:" + device);
            }
            assertEquals(back, Files.getLastModifiedTime(packed), "the folder was packed again");
            assertEquals(0, s.finish(), s.output());
        }
    }

    /** Writes an exploded bundle's manifest into {@code bundle}, moved in whole. */
    static void explodedManifest(Path bundle, String symbolicName, String version) throws IOException {
        Path written = Files.writeString(bundle.resolveSibling(bundle.getFileName() + ".MF"), "Manifest-Version: 1.0\n"
                + "Bundle-ManifestVersion: 2\nBundle-SymbolicName: " + symbolicName + "\nBundle-Version: " + version + "\n\n");
        Files.move(written, Files.createDirectories(bundle.resolve("META-INF")).resolve("MANIFEST.MF"),
                java.nio.file.StandardCopyOption.REPLACE_EXISTING, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
    }

    /**
     * An exploded bundle that FileInstall notices (it holds a file its filter takes, a jar) is installed,
     * updated when that file changes, and uninstalled when the folder is removed.
     */
    @Test
    void anExplodedBundleInstallsUpdatesAndLeavesWithItsFolder() throws Exception {
        Path dir = freshDir("exploded-bundle");
        Path bundle = Files.createDirectories(dir.resolve("plugins").resolve("exploded"));
        explodedManifest(bundle, "org.example.exploded", "1.0.0");
        Path inner = Files.writeString(Files.createDirectories(bundle.resolve("lib")).resolve("inner.jar"), "not read");
        try (Session s = new Session(dir)) {
            s.until("lb -s org.example.exploded", "Active     |   20|org.example.exploded (1.0.0)");
            explodedManifest(bundle, "org.example.exploded", "1.0.1");
            Files.writeString(inner, "not read, changed");
            s.until("lb -s org.example.exploded", "org.example.exploded (1.0.1)");
            try (Stream<Path> all = Files.walk(bundle)) {
                for (Path p : all.sorted(Comparator.reverseOrder()).toList()) {
                    Files.delete(p);
                }
            }
            // Not lb: its row of a bundle being uninstalled as it lists fails the statement ("error: Bundle
            // is uninstalled.", exit 1), a race the framework's listing of bundles does not have.
            s.untilGone("$.context bundles", "org.example.exploded");
            assertFalse(s.output().contains("Exception"), "no stack trace: " + s.output());
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * A folder being copied into plugins/ whose manifest comes last (FileInstall notices it by its jar,
     * packs it and finds no bundle) is installed once the manifest is there.
     */
    @Test
    void aFolderCopiedInBeforeItsManifestIsInstalledOnceComplete() throws Exception {
        Path dir = freshDir("folder-copied-in");
        Path plugins = Files.createDirectories(dir.resolve("plugins"));
        try (Session s = new Session(dir)) {
            s.until("mem:devices", "cpu:0");
            Path late = Files.createDirectories(dir.resolve("late"));
            Files.writeString(Files.createDirectories(late.resolve("lib")).resolve("inner.jar"), "not read");
            Manifest m = new Manifest();
            m.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
            try (JarOutputStream out = new JarOutputStream(Files.newOutputStream(dir.resolve("plain.jar")), m)) {
                out.putNextEntry(new JarEntry("a.txt"));
                out.closeEntry();
            }
            Files.move(late, plugins.resolve("late"), java.nio.file.StandardCopyOption.ATOMIC_MOVE);
            Files.move(dir.resolve("plain.jar"), plugins.resolve("plain.jar"), java.nio.file.StandardCopyOption.ATOMIC_MOVE);
            // Named in the pass of plugins/'s watcher that packed the folder and found no bundle in it.
            s.until("log 50 error", plugins.resolve("plain.jar") + " is not installed");
            assertTrue(Files.isRegularFile(dir.resolve("tmp").resolve("late.jar")), "FileInstall packed the folder");
            explodedManifest(plugins.resolve("late"), "org.example.late", "1.0.0");
            s.until("lb -s org.example.late", "Active");
            assertFalse(s.output().contains("Exception"), "no stack trace: " + s.output());
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * FileInstall kept its temporary folder ({@code fileinstall-<random>}, where it packs a folder named
     * as a file, one for each watched folder) in {@code java.io.tmpdir}, to be deleted at exit only if
     * empty: a folder packed there when the process was stopped by a signal (its jar is deleted only when
     * FileInstall stops), or a process killed, left it behind for good (some 90 in /tmp). A run now
     * leaves nothing in {@code java.io.tmpdir} but JCuda's natives, which it extracts there once and reuses.
     */
    @Test
    void aRunLeavesNothingOfFileInstallsInTheTemporaryFolder() throws Exception {
        Path dir = freshDir("tmpdir-of-a-run");
        Path tmp = freshDir("tmpdir-of-a-run-java-io-tmpdir");
        Path folder = Files.createDirectories(dir.resolve("config").resolve("io.ferrum.memory.cpu.device-t1.cfg"));
        Files.writeString(folder.resolve("inner.cfg"), "index=1\ncapacity=64m\n");
        ProcessBuilder command = java(dir);
        command.command().add(1, "-Djava.io.tmpdir=" + tmp);
        try (Session s = new Session(command)) {
            s.until("log 50 error", folder + " is a folder");
            s.process.destroy(); // SIGTERM, as a service manager stops it: the JVM's shutdown hooks run
            assertTrue(s.process.waitFor(WAIT_MS, TimeUnit.MILLISECONDS), s.output());
        }
        try (Stream<Path> left = Files.list(tmp)) {
            assertEquals(List.of(), left.map(p -> p.getFileName().toString()).filter(n -> !n.startsWith("libJCuda")).toList());
        }
    }

    /**
     * A configuration file of hundreds of MiB (here a sparse one of 256 MiB, which reads as NULs):
     * FileInstall's reader read it whole into memory, and the distribution's checks after it, without a
     * word. It is now refused in one error line naming its size, and nothing reads it.
     */
    @Test
    void aConfigFileAboveFourMibIsRefusedNamingItsSize() throws Exception {
        Path dir = freshDir("config-file-above-4-mib");
        Path big = Files.createDirectories(dir.resolve("config")).resolve("io.ferrum.memory.cpu.device-big.cfg");
        try (java.io.RandomAccessFile f = new java.io.RandomAccessFile(big.toFile(), "rw")) {
            f.setLength(256L << 20);
        }
        try (Session s = new Session(dir)) {
            String error = s.until("log 50 error", big + " is 256.0 MiB");
            assertTrue(error.contains(big + " is 256.0 MiB (268435456 bytes), more than the 4 MiB a configuration file may be:"
                    + " FileInstall would read it whole into memory, so no configuration is made of it; keep a configuration"
                    + " in a file of 4 MiB at most"), error);
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * A named pipe in config/ named as a configuration file ({@code mkfifo config/x.cfg}): the gate's
     * reader opened it to read, and an open of a pipe waits for a writer; FileInstall's first scan runs
     * on the framework's start-level thread, so the distribution hung at start for good, with no word.
     * It is now refused unopened in one error line, and the rest starts.
     */
    @Test
    void aNamedPipeInConfigIsRefusedUnopenedAndTheDistributionStarts() throws Exception {
        Path dir = freshDir("named-pipe-in-config");
        Path pipe = Files.createDirectories(dir.resolve("config")).resolve("io.ferrum.memory.cpu.device-t1.cfg");
        Process mkfifo;
        try {
            mkfifo = new ProcessBuilder("mkfifo", pipe.toString()).inheritIO().start();
        } catch (IOException e) {
            org.junit.jupiter.api.Assumptions.assumeTrue(false, "no mkfifo here: " + e.getMessage());
            return;
        }
        org.junit.jupiter.api.Assumptions.assumeTrue(mkfifo.waitFor() == 0 && Files.exists(pipe), "mkfifo failed");
        try (Session s = new Session(dir)) {
            String error = s.until("log 50 error", pipe + " is not a regular file");
            assertTrue(error.contains(pipe + " is not a regular file (a pipe, a socket or a device): FileInstall would wait on"
                    + " it for ever, and the distribution with it, so no configuration is made of it; put the configuration"
                    + " in a regular file"), error);
            assertTrue(s.until("mem:devices", "cpu:0").contains("cpu:0"), s.output());
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * A named pipe in plugins/ named as a bundle jar ({@code mkfifo plugins/x.jar}): FileInstall's own
     * bundle installer opened it as a zip to see whether it takes it, and an open of a pipe waits for a
     * writer, on the framework's start-level thread: the distribution hung at start for good, with no
     * word. It is now refused unopened in one error line, and the rest starts.
     */
    @Test
    void aNamedPipeInPluginsIsRefusedUnopenedAndTheDistributionStarts() throws Exception {
        Path dir = freshDir("named-pipe-in-plugins");
        Path pipe = Files.createDirectories(dir.resolve("plugins")).resolve("x.jar");
        Process mkfifo;
        try {
            mkfifo = new ProcessBuilder("mkfifo", pipe.toString()).inheritIO().start();
        } catch (IOException e) {
            org.junit.jupiter.api.Assumptions.assumeTrue(false, "no mkfifo here: " + e.getMessage());
            return;
        }
        org.junit.jupiter.api.Assumptions.assumeTrue(mkfifo.waitFor() == 0 && Files.exists(pipe), "mkfifo failed");
        try (Session s = new Session(dir)) {
            String error = s.until("log 50 error", pipe + " is not installed");
            assertTrue(error.contains(pipe + " is not installed: it is not a regular file (a pipe, a socket or a device),"
                    + " which FileInstall would wait on for ever, and the distribution with it; put a bundle jar in its"
                    + " place or remove it"), error);
            assertTrue(s.until("mem:devices", "cpu:0").contains("cpu:0"), s.output());
            assertEquals(0, s.finish(), s.output());
        }
    }

    /**
     * A file named (a PID nothing designates, a byte order mark), deleted, and saved again as it was
     * (a deployment that copies config/ anew): each warning was given once per file name for the
     * whole run, so the file saved again configured nothing without a word. A file is named again
     * once its configuration was deleted. The deletions are known to be done when cpu:2, whose file is
     * deleted last, has gone.
     */
    @Test
    void aFileDeletedAndSavedAgainIsNamedAgain() throws Exception {
        Path dir = freshDir("deleted-and-saved-again");
        Path config = Files.createDirectories(dir.resolve("config"));
        Path typo = config.resolve("io.ferrum.memory.cpux.cfg");
        Path marked = config.resolve("org.example.plugin.cfg");
        Path device = config.resolve("io.ferrum.memory.cpu.device-t2.cfg");
        byte[] withMark = "\ufeffsize=3\n".getBytes(StandardCharsets.UTF_8);
        try (Session s = new Session(dir)) {
            Files.writeString(device, "index=2\ncapacity=64m\n");
            s.until("mem:devices", "cpu:2");
            Files.writeString(typo, "capacity=64m\n");
            Files.write(marked, withMark);
            s.until("log 50 warn", "org.example.plugin.cfg starts with");
            s.until("log 50 warn", "configures io.ferrum.memory.cpux,");

            Files.delete(typo);
            Files.delete(marked);
            Files.delete(device);
            long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(WAIT_MS);
            while (s.until("mem:devices", "cpu:0", 1).contains("cpu:2")) {
                assertTrue(System.nanoTime() < deadline, "cpu:2 did not go: " + s.output());
            }
            Files.writeString(typo, "capacity=64m\n");
            Files.write(marked, withMark);
            s.until("log 50 warn", "configures io.ferrum.memory.cpux,", 2);
            s.until("log 50 warn", "org.example.plugin.cfg starts with", 2);
            assertEquals(0, s.finish(), s.output());
        }
    }

    /** Writes {@code src} to {@code dst} with the main manifest attributes {@code changes} set. */
    static void rewriteManifest(Path src, Path dst, Map<String, String> changes) throws IOException {
        try (JarFile in = new JarFile(src.toFile());
             JarOutputStream out = new JarOutputStream(Files.newOutputStream(dst))) {
            Manifest m = new Manifest(in.getManifest());
            changes.forEach((k, v) -> m.getMainAttributes().put(new Attributes.Name(k), v));
            out.putNextEntry(new JarEntry(JarFile.MANIFEST_NAME));
            m.write(out);
            out.closeEntry();
            for (Enumeration<JarEntry> e = in.entries(); e.hasMoreElements(); ) {
                JarEntry entry = e.nextElement();
                if (entry.getName().equals(JarFile.MANIFEST_NAME)) {
                    continue;
                }
                out.putNextEntry(new JarEntry(entry.getName()));
                try (InputStream body = in.getInputStream(entry)) {
                    body.transferTo(out);
                }
                out.closeEntry();
            }
        }
    }

    private static String backendRow(String backends) {
        Matcher row = Pattern.compile("\\d+\\s+io\\.ferrum\\.memory\\.cpu\\s+cpu\\s+ACTIVE\\s+cpu:0").matcher(backends);
        assertTrue(row.find(), backends);
        return row.group();
    }
}
