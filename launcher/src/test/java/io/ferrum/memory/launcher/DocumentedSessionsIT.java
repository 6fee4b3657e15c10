package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.regex.MatchResult;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The shell sessions that the README and docs/SHELL.md show, run in the distribution: every
 * documented command is piped in, in a fresh folder, and its answer must be what the document
 * prints, on standard output, or on standard error for an {@code error:} line. Only what changes
 * from one run to the next is left out of the comparison (durations and rates, a block's age, the
 * host's memory, the folder, column widths, and which handle a block got: see {@link Handles});
 * sizes, bytes and messages are compared as printed. So a change of an answer fails here until the
 * documents say it too.
 */
class DocumentedSessionsIT {
    /** The folder of the documented runs, printed in the answers of the file commands. */
    private static final String DOCUMENTED_FOLDER = "/tmp/ferrum-session";
    /** The file the documented file sessions load: 64 MiB of random bytes. */
    private static final String WEIGHTS = "weights.bin";
    private static final int WEIGHTS_BYTES = 64 << 20;

    private static final Pattern TIMING = Pattern.compile("in [0-9.]+ (ns|µs|us|ms|s|min) \\([0-9.]+ [KMGT]?B/s\\)");
    private static final Pattern HOST_SIZE = Pattern.compile("[0-9.]+ (GiB|TiB)");
    private static final Pattern AGE = Pattern.compile("^(0x[0-9a-f]{16} .*) [0-9.]+ (s|min|h)$");
    private static final Pattern LOADED_INTO = Pattern.compile(
            "^loaded .* from \\S+/" + Pattern.quote(WEIGHTS) + " into new block (0x[0-9a-f]{16}) ");
    private static final Pattern DUMP_LINE = Pattern.compile("^[0-9a-f]{8}  ((?:[0-9a-f]{2} ?)+)");

    /** One command of a session and the lines the document shows after it. */
    record Step(String command, List<String> answer) {
    }

    /** A fenced block of a document that shows a session: {@code g! } commands and their answers. */
    record Session(String where, List<Step> steps) {
        List<String> commands() {
            return steps.stream().map(Step::command).toList();
        }

        List<String> expected(boolean errors) {
            return steps.stream().flatMap(s -> s.answer().stream())
                    .filter(l -> l.startsWith("error: ") == errors).toList();
        }
    }

    private static Path root() {
        return Path.of(System.getProperty("ferrum.root"));
    }

    /**
     * @return every fenced block of {@code doc} with a line starting {@code g! }; lines before the
     *         first command (a terminal's greeting) and {@code exit} are left out
     */
    static List<Session> sessions(Path doc) throws IOException {
        List<Session> out = new ArrayList<>();
        List<String> lines = Files.readAllLines(doc, StandardCharsets.UTF_8);
        List<Step> steps = null;
        int start = 0;
        for (int i = 0; i < lines.size(); i++) {
            String line = lines.get(i);
            if (line.startsWith("```")) {
                if (steps == null) {
                    steps = new ArrayList<>();
                    start = i + 1;
                } else {
                    if (!steps.isEmpty()) {
                        out.add(new Session(doc.getFileName() + ":" + start, List.copyOf(steps)));
                    }
                    steps = null;
                }
            } else if (steps != null && line.startsWith("g! ")) {
                String command = line.substring(3).trim();
                if (!command.equals("exit")) {
                    steps.add(new Step(command, new ArrayList<>()));
                }
            } else if (steps != null && !steps.isEmpty() && !line.isBlank()) {
                steps.get(steps.size() - 1).answer().add(line);
            }
        }
        return out;
    }

    /** What does not repeat from run to run, taken out of a line; the rest is compared as printed. */
    static String shape(String line, Path folder) {
        String s = line.replace(folder.toString(), "FOLDER").replace(DOCUMENTED_FOLDER, "FOLDER");
        s = TIMING.matcher(s).replaceAll("in TIME (RATE)");
        s = HOST_SIZE.matcher(s).replaceAll("HOST");
        s = s.replaceAll("\\s+", " ").strip();
        Matcher age = AGE.matcher(s);
        return age.matches() ? age.group(1) + " AGE" : s;
    }

    private static List<String> shapes(List<String> lines, Path folder) {
        return lines.stream().filter(l -> !l.isBlank()).map(l -> shape(l, folder)).toList();
    }

    @TestFactory
    Stream<DynamicTest> everyDocumentedSessionAnswersAsDocumented() throws IOException {
        List<Session> all = new ArrayList<>();
        all.addAll(sessions(root().resolve("README.md")));
        all.addAll(sessions(root().resolve("docs/SHELL.md")));
        assertFalse(all.size() < 5, "the README's two sessions and SHELL.md's three: found " + all);
        return all.stream().map(s -> DynamicTest.dynamicTest(s.where(), () -> run(s)));
    }

    private static void run(Session session) throws Exception {
        Path folder = DistributionIT.freshDir("documented-" + session.where().replace(':', '-'));
        byte[] weights = null;
        if (session.commands().stream().anyMatch(c -> c.contains(WEIGHTS))) {
            weights = weights(session);
            Files.write(folder.resolve(WEIGHTS), weights);
        }
        Process p = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-jar",
                DistributionIT.jar().toString()).directory(folder.toFile()).start();
        BlockingQueue<String> out = lines(p.getInputStream());
        BlockingQueue<String> err = lines(p.getErrorStream());
        Handles handles = new Handles();
        try (Writer in = new OutputStreamWriter(p.getOutputStream(), StandardCharsets.UTF_8)) {
            for (Step step : session.steps()) {
                // One command at a time, each answered before the next: the handles the document
                // types are those of its run, so each goes in as the one this run answered in its place.
                String command = handles.ours(step.command());
                in.write(command + "\n");
                in.flush();
                String where = session.where() + ", after 'g! " + step.command() + "'";
                for (String documented : step.answer()) {
                    BlockingQueue<String> from = documented.startsWith("error: ") ? err : out;
                    String answered = from.poll(DistributionIT.WAIT_MS, TimeUnit.MILLISECONDS);
                    assertNotNull(answered, where + ": no line where the document shows '" + documented
                            + "'; unread: " + out + err);
                    assertEquals(shape(handles.match(documented, answered, where), folder), shape(answered, folder),
                            where);
                }
            }
        }
        assertTrue(p.waitFor(DistributionIT.WAIT_MS, TimeUnit.MILLISECONDS), session.where() + ": the run did not end");
        assertEquals(session.expected(true).isEmpty() ? 0 : 1, p.exitValue(), "exit code of " + session.where());
        drained(out, "standard output", session);
        drained(err, "standard error", session);
        for (String c : session.commands()) {
            String[] words = c.split(" ");
            if (words[0].equals("mem:save") && weights != null) {
                // The sessions save the block the file went into: the copy is the file (SHELL.md: cmp).
                Path saved = folder.resolve(words[2]);
                assertArrayEquals(weights, Files.readAllBytes(saved), "the bytes of " + saved);
            }
        }
    }

    /** Fails if a line the document does not show came (the readers end with the process). */
    private static void drained(BlockingQueue<String> lines, String stream, Session session) throws InterruptedException {
        List<String> more = new ArrayList<>();
        for (String l; !(l = lines.take()).equals(END); ) {
            if (!l.isBlank()) {
                more.add(l);
            }
        }
        assertEquals(List.of(), more, "lines on " + stream + " of " + session.where() + " that the document does not show");
    }

    private static final String END = "\u0000end";

    /** The lines of {@code s} as they come, then {@link #END}. */
    private static BlockingQueue<String> lines(InputStream s) {
        BlockingQueue<String> q = new LinkedBlockingQueue<>();
        Thread reader = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(s, StandardCharsets.UTF_8))) {
                for (String l; (l = r.readLine()) != null; ) {
                    if (!l.isBlank()) {
                        q.add(l);
                    }
                }
            } catch (IOException e) {
                q.add("(read failed: " + e + ")");
            }
            q.add(END);
        }, "documented session reader");
        reader.setDaemon(true);
        reader.start();
        return q;
    }

    /**
     * The handles of the documented run paired with those of this run, in the order the answers
     * name them. Which slot a handle gets depends on which of Gogo's threads ran the command, so
     * the numbers may differ from run to run; a handle the document names twice must be one handle
     * here too.
     */
    static final class Handles {
        private static final Pattern HANDLE = Pattern.compile("0x[0-9a-f]{16}");
        private final Map<String, String> ours = new HashMap<>();

        /** @return {@code command} with each documented handle this run has answered replaced by its own */
        String ours(String command) {
            Matcher m = HANDLE.matcher(command);
            return m.replaceAll(r -> Matcher.quoteReplacement(ours.getOrDefault(r.group(), r.group())));
        }

        /**
         * Pairs the handles of a documented line with those of the answered one.
         *
         * @return the documented line with its handles as this run's, to compare with the answer
         */
        String match(String documented, String answered, String where) {
            List<String> doc = HANDLE.matcher(documented).results().map(MatchResult::group).toList();
            List<String> run = HANDLE.matcher(answered).results().map(MatchResult::group).toList();
            if (doc.size() == run.size()) {
                for (int i = 0; i < doc.size(); i++) {
                    String known = ours.putIfAbsent(doc.get(i), run.get(i));
                    if (known != null && !known.equals(run.get(i))) {
                        fail(where + ": " + doc.get(i) + " was " + known + " in this run, now " + run.get(i));
                    }
                }
            }
            return ours(documented);
        }
    }

    /**
     * The session's 64 MiB of random bytes, beginning with the bytes the session shows read back from
     * the block it loaded them into (so its dump of them answers as documented).
     */
    private static byte[] weights(Session session) {
        byte[] bytes = new byte[WEIGHTS_BYTES];
        new Random(15).nextBytes(bytes);
        String loaded = null;
        for (Step step : session.steps()) {
            Matcher m = step.answer().isEmpty() ? null : LOADED_INTO.matcher(step.answer().get(0));
            if (m != null && m.find()) {
                loaded = m.group(1);
            } else if (loaded != null && step.command().startsWith("mem:read " + loaded + " 0 ")) {
                int at = 0;
                for (String line : step.answer()) {
                    Matcher d = DUMP_LINE.matcher(line);
                    if (d.find()) {
                        byte[] shown = HexFormat.of().parseHex(d.group(1).replace(" ", ""));
                        System.arraycopy(shown, 0, bytes, at, shown.length);
                        at += shown.length;
                    }
                }
            }
        }
        return bytes;
    }

    @Test
    void aSessionIsReadAsCommandsAndTheirAnswers() throws IOException {
        Path doc = Files.createTempFile("session", ".md");
        Files.writeString(doc, String.join("\n", "text", "```", "Greeting", "g! mem:alloc 1m",
                "0x0000100000000001 on cpu:0", "g! mem:free 0x1", "error: no", "g! exit", "```",
                "```sh", "./ferrum start", "```", ""));
        List<Session> sessions = sessions(doc);
        assertEquals(1, sessions.size(), sessions.toString());
        assertEquals(List.of("mem:alloc 1m", "mem:free 0x1"), sessions.get(0).commands());
        assertEquals(List.of("0x0000100000000001 on cpu:0"), sessions.get(0).expected(false));
        assertEquals(List.of("error: no"), sessions.get(0).expected(true));
        Path here = Path.of("/work/x");
        assertEquals("loaded 1 B from FOLDER/w.bin in TIME (RATE)",
                shape("loaded 1 B from /work/x/w.bin in 2.5 ms (0.4 MB/s)", here));
        assertEquals("cpu:0 ffm HOST 0 B HOST", shape("cpu:0       ffm  23.5 GiB   0 B  23.5 GiB", here));
        assertEquals("0x0000100000000001 cpu:0 64.0 MiB GENERAL 256 no AGE",
                shape("0x0000100000000001   cpu:0  64.0 MiB  GENERAL    256      no  1 s", here));
        Handles handles = new Handles();
        assertEquals("freed 0x0000100004000001",
                handles.match("freed 0x0000100001f00001", "freed 0x0000100004000001", "test"));
        assertEquals("mem:read 0x0000100004000001 0 4", handles.ours("mem:read 0x0000100001f00001 0 4"));
        Files.delete(doc);
    }
}
