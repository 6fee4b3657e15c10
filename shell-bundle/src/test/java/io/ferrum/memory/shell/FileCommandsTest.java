package io.ferrum.memory.shell;

import static io.ferrum.memory.shell.ShellFixture.CPU0;
import static io.ferrum.memory.shell.ShellFixture.CPU1;
import static io.ferrum.memory.shell.ShellFixture.MiB;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeFalse;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.RandomAccessFile;
import java.lang.foreign.MemorySegment;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryRouter;
import io.ferrum.memory.api.MemoryType;

class FileCommandsTest {
    private static final Pattern NEW_BLOCK = Pattern.compile(
            "loaded (.+?) from (.+) into new block (0x[0-9a-f]{16}) on (cpu:\\d) in [0-9.]+ ms \\([0-9.]+ MB/s\\)");

    private final ShellFixture fixture = new ShellFixture();
    private final FileCommands commands = new FileCommands();

    @TempDir
    Path dir;

    FileCommandsTest() {
        commands.monitor = fixture.directory;
        commands.router = fixture.directory;
        commands.progressOutput = () -> null;
        commands.chunk = (int) MiB;
    }

    @AfterEach
    void close() throws Exception {
        fixture.close();
    }

    private static byte[] random(int size, long seed) {
        byte[] b = new byte[size];
        new Random(seed).nextBytes(b);
        return b;
    }

    private Path file(String name, byte[] contents) throws IOException {
        return Files.write(dir.resolve(name), contents);
    }

    private byte[] contents(MemoryHandle h) {
        byte[] out = new byte[(int) fixture.directory.handleInfo(h).orElseThrow().size()];
        fixture.directory.read(h, 0, MemorySegment.ofArray(out));
        return out;
    }

    private List<MemoryHandle> handles() {
        return Stream.concat(fixture.cpu0.handles().stream(), fixture.cpu1.handles().stream())
                .map(MemoryHandleInfo::handle).toList();
    }

    private static MemoryHandle newBlock(Reply loaded, String device) {
        Matcher m = NEW_BLOCK.matcher(loaded.toString());
        assertTrue(m.matches(), loaded.toString());
        assertEquals(device, m.group(4));
        return MemoryHandle.parse(m.group(3));
    }

    @Test
    void aFileOfSeveralMiBLoadsIntoANewBlockOnADeviceAndSavesBackByteForByte() throws IOException {
        byte[] weights = random((int) (5 * MiB + 123), 15);
        Path in = file("weights.bin", weights);

        Reply loaded = commands.load("-d", "cpu:1", "-t", "tensor", in.toString());
        MemoryHandle h = newBlock(loaded, "cpu:1");
        assertTrue(loaded.toString().startsWith("loaded 5.0 MiB (5243003 bytes) from " + in + " into new block "), loaded.toString());
        MemoryHandleInfo info = fixture.cpu1.handleInfo(h).orElseThrow();
        assertEquals(weights.length, info.size());
        assertEquals(MemoryType.TENSOR, info.memoryType());
        assertArrayEquals(weights, contents(h));

        Path out = dir.resolve("saved.bin");
        String saved = commands.save(h.toString(), out.toString()).toString();
        assertTrue(saved.matches("saved 5\\.0 MiB \\(5243003 bytes\\) of " + h + " on cpu:1 to " + Pattern.quote(out.toString())
                + " in [0-9.]+ ms \\([0-9.]+ MB/s\\)"), saved);
        assertEquals(-1, Files.mismatch(in, out));
        assertEquals(List.of("saved.bin", "weights.bin"), folder());
    }

    @Test
    void withoutAHandleOrADeviceTheRouterChoosesTheDevice() throws IOException {
        byte[] bytes = random(3000, 1);
        MemoryHandle h = newBlock(commands.load(file("small.bin", bytes).toString()), "cpu:0");
        assertArrayEquals(bytes, contents(h));
        assertEquals(MemoryType.GENERAL, fixture.cpu0.handleInfo(h).orElseThrow().memoryType());
    }

    @Test
    void theRouterAllocatesTheNewBlockWithTheTypeGiven() throws IOException {
        byte[] bytes = random(3000, 6);
        MemoryHandle h = newBlock(commands.load("-t", "cache", file("small.bin", bytes).toString()), "cpu:0");
        assertEquals(MemoryType.CACHE, fixture.cpu0.handleInfo(h).orElseThrow().memoryType());
        assertArrayEquals(bytes, contents(h));
    }

    @Test
    void aFileLoadsIntoAnExistingBlockAtAnOffsetAndNothingElseChanges() throws IOException {
        MemoryHandle block = fixture.cpu0.allocate(3 * MiB, CPU0);
        fixture.directory.write(block, 0, MemorySegment.ofArray(new byte[(int) (3 * MiB)]));
        byte[] bytes = random((int) (2 * MiB + 7), 2);
        Path in = file("part.bin", bytes);
        String loaded = commands.load(in.toString(), block.toString(), "1000").toString();
        assertTrue(loaded.startsWith("loaded 2.0 MiB (2097159 bytes) from " + in + " into " + block + " on cpu:0 at offset"
                + " 1000 in "), loaded);
        byte[] expected = new byte[(int) (3 * MiB)];
        System.arraycopy(bytes, 0, expected, 1000, bytes.length);
        assertArrayEquals(expected, contents(block));
        assertEquals(List.of(block), handles());

        String whole = commands.load(in.toString(), block.toString()).toString();
        assertTrue(whole.contains(" into " + block + " on cpu:0 at offset 0 in "), whole);
    }

    /**
     * An empty file loaded into an existing block answered "loaded 0 bytes from ... in 0 ms": like
     * mem:copy of 0 bytes, it says there was nothing to load, once the block and offset passed the
     * checks of any load.
     */
    @Test
    void anEmptyFileLoadedIntoABlockSaysThereWasNothingToLoad() throws IOException {
        MemoryHandle block = fixture.cpu0.allocate(100, CPU0);
        Path empty = file("empty.bin", new byte[0]);
        assertEquals("Nothing to load: " + empty + " is empty; " + block + " is unchanged",
                commands.load(empty.toString(), block.toString(), "100").toString());
        assertTrue(commands.load(empty.toString(), block.toString(), "101").toString().startsWith("error: "),
                "an offset past the block's end is still an error");
    }

    @Test
    void refusedLoadsNameTheProblemAndChangeNothing() throws IOException {
        MemoryHandle block = fixture.cpu0.allocate(100, CPU0);
        fixture.directory.write(block, 0, MemorySegment.ofArray(random(100, 3)));
        byte[] before = contents(block);
        List<MemoryHandle> handles = handles();
        String h = block.toString();
        Path ten = file("ten.bin", new byte[10]);
        Path empty = file("empty.bin", new byte[0]);
        Path missing = dir.resolve("missing.bin");

        assertEquals("error: No file " + missing + "; nothing loaded", commands.load(missing.toString()).toString());
        assertEquals("error: No file " + missing + "; nothing loaded", commands.load(missing.toString(), h).toString());
        assertEquals("error: " + dir + " is a folder, not a file; nothing loaded", commands.load(dir.toString()).toString());
        assertEquals("error: File " + ten + " (10 bytes) does not fit in block " + h + " at offset 95: the block has 100"
                + " bytes, 5 of them from there; nothing loaded", commands.load(ten.toString(), h, "95").toString());
        assertEquals("error: Offset 101 is past the end of " + h + " (100 bytes); nothing loaded",
                commands.load(ten.toString(), h, "101").toString());
        assertEquals("error: --device and --type are for a new block; with a handle the file goes into that block: drop"
                + " them, or drop the handle", commands.load("-d", "cpu:0", ten.toString(), h).toString());
        assertEquals("error: File " + empty + " is empty: there is nothing to load into a new block; nothing allocated",
                commands.load(empty.toString()).toString());
        assertEquals("error: No device cpu:7 is registered; mem:devices lists the devices there are",
                commands.load("-d", "cpu:7", ten.toString()).toString());
        assertTrue(commands.load("-t", "SHINY", ten.toString()).toString().startsWith("error: Invalid memory type 'SHINY'"));
        String unknown = commands.load(ten.toString(), "0x0000000000000001").toString();
        assertEquals("error: Handle 0x0000000000000001 is not known to any device: it was freed, or it was never allocated", unknown);
        Path huge = dir.resolve("huge.bin");
        try (RandomAccessFile sparse = new RandomAccessFile(huge.toFile(), "rw")) {
            sparse.setLength(65 * MiB); // more than the device holds
        }
        String tooBig = commands.load("-d", "cpu:1", huge.toString()).toString();
        assertTrue(tooBig.startsWith("error: ") && tooBig.contains("cpu:1"), tooBig);

        assertArrayEquals(before, contents(block));
        assertEquals(handles, handles());
    }

    @Test
    void anEmptyDeviceOrTypeIsRefusedAsMemAllocRefusesItNotTakenForNone() throws IOException {
        MemoryHandle block = fixture.cpu0.allocate(100, CPU0);
        byte[] before = contents(block);
        List<MemoryHandle> handles = handles();
        Path ten = file("ten.bin", new byte[10]);
        String noDevice = "error: Invalid device '': expected kind or kind:index, for example cpu, cpu:1, cuda:0, metal";
        // --device $d with d = "": the router's choice, without a word, was not what was asked for.
        assertEquals(noDevice, commands.load(ten.toString(), "--device=").toString());
        assertEquals(noDevice, commands.load("-d", "", ten.toString()).toString());
        assertEquals("error: Invalid memory type '': use GENERAL, TENSOR, CACHE, TEMPORARY, PINNED or MAPPED",
                commands.load("--type", "", ten.toString()).toString());
        assertEquals("error: --device and --type are for a new block; with a handle the file goes into that block: drop"
                + " them, or drop the handle", commands.load(ten.toString(), block.toString(), "-d=").toString());
        assertArrayEquals(before, contents(block));
        assertEquals(handles, handles());
    }

    @Test
    void aLoadOrSaveInterruptedSaysSoInWordsAndLeavesNothingBehind() throws IOException {
        MemoryHandle block = fixture.cpu0.allocate(MiB, CPU0);
        Path in = file("in.bin", random((int) MiB, 14));
        Path out = dir.resolve("out.bin");
        List<MemoryHandle> handles = handles();
        // Ctrl-C at the console interrupts the command's thread; the file channel then closes itself.
        try {
            Thread.currentThread().interrupt();
            assertEquals("error: Cannot save to " + out + ": interrupted; nothing saved",
                    commands.save(block.toString(), out.toString()).toString());
            Thread.currentThread().interrupt();
            assertEquals("error: Cannot read " + in + ": interrupted; nothing loaded", commands.load(in.toString()).toString());
        } finally {
            Thread.interrupted();
        }
        assertEquals(List.of("in.bin"), folder());
        assertEquals(handles, handles());
    }

    /** A router that passes every call to the fixture's, and interrupts the calling thread (Ctrl-C) in each {@code method}. */
    private MemoryRouter interrupting(String method) {
        return (MemoryRouter) Proxy.newProxyInstance(MemoryRouter.class.getClassLoader(), new Class<?>[] {MemoryRouter.class},
                (proxy, m, args) -> {
                    if (m.getName().equals(method)) {
                        Thread.currentThread().interrupt();
                    }
                    try {
                        return m.invoke(fixture.directory, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }

    /**
     * Ctrl-C in the middle of a load (it lands while the first chunk is written): into a block, the
     * answer said the block "may hold part of" the file, not which part, though the transfer knew;
     * into a new block, that the file could not be read. The answer now says how far the load got and
     * what it left: that part in the block and the rest as it was, or the new block freed.
     */
    @Test
    void aLoadInterruptedBetweenTwoChunksSaysHowFarItGotAndWhatItLeft() throws IOException {
        byte[] file = random((int) (3 * MiB), 16);
        Path in = file("three.bin", file);
        MemoryHandle block = fixture.cpu0.allocate(4 * MiB, CPU0);
        List<MemoryHandle> handles = handles();
        commands.router = interrupting("write");
        try {
            assertEquals("error: interrupted: 1.0 MiB (1048576 bytes) of the 3145728 bytes of " + in + " were loaded into "
                    + block + " at offset 100; the rest of the block is as it was",
                    commands.load(in.toString(), block.toString(), "100").toString());
            assertTrue(Thread.interrupted(), "the interrupt stays for the shell to see");
            assertEquals("error: interrupted: 1.0 MiB (1048576 bytes) of the 3145728 bytes of " + in + " were loaded into"
                    + " a new block on cpu:1, which was freed; nothing loaded",
                    commands.load(in.toString(), "--device", "cpu:1").toString());
            assertTrue(Thread.interrupted(), "the interrupt stays for the shell to see");
            commands.router = interrupting("read");
            Path out = dir.resolve("out.bin");
            assertEquals("error: Cannot save to " + out + ": interrupted; nothing saved",
                    commands.save(block.toString(), out.toString()).toString());
        } finally {
            Thread.interrupted();
        }
        assertEquals(List.of("three.bin"), folder(), "an interrupted save leaves no file");
        assertEquals(handles, handles(), "the new block is freed");
        byte[] got = contents(block);
        assertEquals(file[0], got[100]);
        assertEquals(file[(int) MiB - 1], got[100 + (int) MiB - 1]);
        assertEquals(0, got[100 + (int) MiB], "nothing written after the interrupt (a new block reads zeros here)");
    }

    /** A router that passes every call to the fixture's, but fails the {@code failAt}-th call of {@code method}. */
    private MemoryRouter failing(String method, int failAt) {
        AtomicInteger calls = new AtomicInteger();
        return (MemoryRouter) Proxy.newProxyInstance(MemoryRouter.class.getClassLoader(), new Class<?>[] {MemoryRouter.class},
                (proxy, m, args) -> {
                    if (m.getName().equals(method) && calls.incrementAndGet() == failAt) {
                        throw new DeviceUnavailableException(CPU1, "cpu:1 went away in the middle of the transfer");
                    }
                    try {
                        return m.invoke(fixture.directory, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
    }

    @Test
    void aLoadThatFailsAfterItsNewBlockWasAllocatedFreesTheBlock() throws IOException {
        commands.router = failing("write", 2);
        List<MemoryHandle> before = handles();
        String failed = commands.load(file("three.bin", random((int) (3 * MiB), 4)).toString()).toString();
        assertEquals("error: cpu:1 went away in the middle of the transfer", failed);
        assertEquals(before, handles(), "the new block is freed again");
    }

    @Test
    void aSaveThatFailsLeavesTheTargetAsItWasAndNoTemporaryFile() throws IOException {
        MemoryHandle block = fixture.cpu1.allocate(3 * MiB, CPU1);
        Path target = file("target.bin", "old contents".getBytes(StandardCharsets.UTF_8));
        commands.router = failing("read", 2);
        assertEquals("error: cpu:1 went away in the middle of the transfer",
                commands.save(block.toString(), target.toString()).toString());
        assertEquals("old contents", Files.readString(target));
        assertEquals(List.of("target.bin"), folder());
    }

    @Test
    void refusedSavesNameTheProblemAndWriteNothing() throws IOException {
        MemoryHandle block = fixture.cpu0.allocate(64, CPU0);
        String h = block.toString();
        Path noFolder = dir.resolve("no/such/folder/out.bin");
        assertEquals("error: No folder " + noFolder.getParent() + " for " + noFolder + "; create it first; nothing saved",
                commands.save(h, noFolder.toString()).toString());
        assertEquals("error: " + dir + " is a folder; give a file name; nothing saved", commands.save(h, dir.toString()).toString());
        Path aFile = file("plain.bin", new byte[1]);
        Path under = aFile.resolve("out.bin");
        assertEquals("error: No folder " + aFile + " for " + under + "; create it first; nothing saved",
                commands.save(h, under.toString()).toString());
        assertEquals("error: Handle 0x0000000000000001 is not known to any device: it was freed, or it was never allocated",
                commands.save("0x0000000000000001", dir.resolve("x.bin").toString()).toString());
        assertEquals(List.of("plain.bin"), folder());
    }

    @Test
    void aReadOnlyTargetIsRefused() throws IOException {
        assumeFalse("root".equals(System.getProperty("user.name")), "root may write any file: nothing to refuse");
        MemoryHandle block = fixture.cpu0.allocate(64, CPU0);
        Path target = file("locked.bin", new byte[3]);
        assertTrue(target.toFile().setWritable(false));
        assertEquals("error: File " + target + " is not writable; nothing saved",
                commands.save(block.toString(), target.toString()).toString());
        assertEquals(3, Files.size(target));
    }

    @Test
    void onATerminalProgressShowsBytesPercentAndRateThenClearsTheLine() throws IOException {
        ByteArrayOutputStream shown = new ByteArrayOutputStream();
        PrintStream terminal = new PrintStream(shown, true, StandardCharsets.UTF_8);
        AtomicLong now = new AtomicLong();
        commands.progressOutput = () -> terminal;
        commands.clock = () -> now.getAndAdd(TransferProgress.REFRESH_NANOS); // every chunk is due a line
        MemoryHandle h = newBlock(commands.load(file("four.bin", random((int) (4 * MiB), 5)).toString()), "cpu:0");

        String out = shown.toString(StandardCharsets.UTF_8);
        List<String> lines = List.of(out.split("\r"));
        assertTrue(lines.contains("loading 1.0 MiB / 4.0 MiB   25%  5.2 MB/s"), lines.toString());
        assertTrue(lines.stream().anyMatch(l -> l.startsWith("loading 4.0 MiB / 4.0 MiB  100%  ")), lines.toString());
        assertTrue(out.endsWith("\r") && lines.get(lines.size() - 1).isBlank(), "the last line is erased: " + lines);

        shown.reset();
        commands.save(h.toString(), dir.resolve("four-again.bin").toString());
        assertTrue(shown.toString(StandardCharsets.UTF_8).contains("saving 4.0 MiB / 4.0 MiB  100%"));
        assertEquals(-1, Files.mismatch(dir.resolve("four.bin"), dir.resolve("four-again.bin")));
    }

    @Test
    void withoutATerminalThereIsNoProgressLine() {
        assertNull(TransferProgress.terminal(), "the test JVM's standard streams are no terminal");
        assertEquals("- MB/s", TransferProgress.rate(10, 0));
        assertEquals("1000.0 MB/s", TransferProgress.rate(1_000_000, 1_000_000));
        assertEquals("0.1 MB/s", TransferProgress.rate(100, 1_000_000));
        assertEquals("2.3 kB/s", TransferProgress.rate(16, 7_100_000), "16 bytes in 7.1 ms are not 0.0 MB/s");
        assertEquals("0.0 MB/s", TransferProgress.rate(0, 1_000_000));
    }

    @Test
    void aFileShorterThanItsSizeBeforeTheFirstWriteLeavesTheBlockAsItWasAndSaysSo() throws IOException {
        MemoryHandle block = fixture.cpu0.allocate(3 * MiB, CPU0);
        fixture.directory.write(block, 0, MemorySegment.ofArray(random((int) (3 * MiB), 11)));
        byte[] before = contents(block);
        Path cut = file("cut.bin", random((int) (3 * MiB), 12));
        // The transfer asks for its progress line after the size was read and before the first chunk:
        // the file is cut there, as a writer truncating it would, and as a file of /sys is from the start.
        commands.progressOutput = () -> {
            try (var ch = java.nio.channels.FileChannel.open(cut, StandardOpenOption.WRITE)) {
                ch.truncate(100);
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
            return null;
        };
        assertEquals("error: File " + cut + " ended after 100 of the " + 3 * MiB + " bytes its size says (a special file,"
                + " as in /sys, or one cut while loading); nothing loaded", commands.load(cut.toString(), block.toString())
                .toString());
        assertArrayEquals(before, contents(block), "no byte was written");
    }

    @Test
    void aFileOfSysWhoseSizeSaysMoreThanItHoldsIsRefusedAndTheBlockKept() throws IOException {
        Path sys = Path.of("/sys/devices/system/cpu/online");
        assumeTrue(Files.isReadable(sys), "no " + sys + " here (not Linux, or no sysfs)");
        MemoryHandle block = fixture.cpu0.allocate(8192, CPU0);
        fixture.directory.write(block, 0, MemorySegment.ofArray(random(8192, 13)));
        byte[] before = contents(block);
        String refused = commands.load(sys.toString(), block.toString()).toString();
        assertTrue(refused.startsWith("error: File " + sys + " ended after ") && refused.endsWith(" of the 4096 bytes its size"
                + " says (a special file, as in /sys, or one cut while loading); nothing loaded"), refused);
        assertArrayEquals(before, contents(block), "no byte was written");
    }

    @Test
    void aFileCutWhileItLoadsIntoABlockSaysTheBlockMayHoldPartOfIt() throws IOException {
        MemoryHandle block = fixture.cpu0.allocate(3 * MiB, CPU0);
        Path shrinking = file("shrinking.bin", random((int) (3 * MiB), 9));
        // The first chunk's write cuts the file to 1 MiB, as a writer truncating it would.
        commands.router = (MemoryRouter) Proxy.newProxyInstance(MemoryRouter.class.getClassLoader(),
                new Class<?>[] {MemoryRouter.class}, (proxy, m, args) -> {
                    if (m.getName().equals("write") && Files.size(shrinking) > MiB) {
                        try (var ch = java.nio.channels.FileChannel.open(shrinking, StandardOpenOption.WRITE)) {
                            ch.truncate(MiB);
                        }
                    }
                    try {
                        return m.invoke(fixture.directory, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        assertEquals("error: File " + shrinking + " ended after " + MiB + " of " + 3 * MiB + " bytes: it changed while"
                + " loading; block " + block + " may hold part of it", commands.load(shrinking.toString(), block.toString())
                .toString());
    }

    @Test
    void aPathThroughALinkToAFolderIsResolvedAsTheFileSystemDoes() throws IOException {
        MemoryHandle block = fixture.cpu0.allocate(8, CPU0);
        Files.createDirectories(dir.resolve("other/x"));
        Files.write(dir.resolve("other/b.bin"), "OTHER---".getBytes(StandardCharsets.UTF_8));
        Files.write(dir.resolve("b.bin"), "LOCAL---".getBytes(StandardCharsets.UTF_8));
        Files.createSymbolicLink(dir.resolve("sl"), Path.of("other/x"));
        // sl/../b.bin is other/b.bin to the file system; as text, "sl/.." would cancel out.
        String loaded = commands.load(dir.resolve("sl/../b.bin").toString(), block.toString()).toString();
        assertTrue(loaded.startsWith("loaded 8 bytes from "), loaded);
        assertArrayEquals("OTHER---".getBytes(StandardCharsets.UTF_8), contents(block));
        commands.save(block.toString(), dir.resolve("sl/../saved.bin").toString());
        assertTrue(Files.exists(dir.resolve("other/saved.bin")));
        assertFalse(Files.exists(dir.resolve("saved.bin")));
    }

    @Test
    void aSaveToALinkIntoProcIsRefusedAndTheFileItLeadsToKept() throws IOException {
        assumeTrue(Files.isDirectory(Path.of("/proc/self/fd")), "a Linux /proc");
        MemoryHandle block = fixture.cpu0.allocate(16, CPU0);
        Path log = file("run.log", "EARLIER LOG LINES".getBytes(StandardCharsets.UTF_8));
        try (var open = java.nio.channels.FileChannel.open(log, StandardOpenOption.APPEND)) {
            // A link such as /dev/stdout: into /proc, where this process's open file is named.
            String n = openFileNumber(log);
            Path fd = Path.of("/proc/self/fd").resolve(n);
            Path stdout = Files.createSymbolicLink(dir.resolve("stdout"), fd);
            // A relative link climbing to /, a /proc path itself, and /dev/fd (a link to /proc/self/fd).
            Path relative = Files.createSymbolicLink(dir.resolve("rel"),
                    Path.of("../".repeat(dir.getNameCount()) + "proc/self/fd/" + n));
            for (Path target : List.of(stdout, relative, fd, Path.of("/dev/fd").resolve(n))) {
                String refused = commands.save(block.toString(), target.toString()).toString();
                assertTrue(refused.startsWith("error: " + target + " leads to a file a process has open (through /proc/"),
                        refused);
                assertTrue(refused.endsWith("mem:save writes files by name only; nothing saved"), refused);
            }
        }
        assertEquals("EARLIER LOG LINES", Files.readString(log));
    }

    /** @return the number under /proc/self/fd of an open file of this process that is {@code file} */
    private static String openFileNumber(Path file) throws IOException {
        try (Stream<Path> fds = Files.list(Path.of("/proc/self/fd"))) {
            for (Path fd : fds.toList()) {
                try {
                    if (Files.readSymbolicLink(fd).equals(file)) {
                        return fd.getFileName().toString();
                    }
                } catch (IOException gone) {
                    // a descriptor closed while listing
                }
            }
        }
        throw new AssertionError("no open descriptor of " + file);
    }

    @Test
    void aSaveKeepsThePermissionsOfTheFileItReplaces() throws IOException {
        MemoryHandle block = fixture.cpu0.allocate(16, CPU0);
        Path secret = file("secret.bin", new byte[4]);
        Files.setPosixFilePermissions(secret, java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"));
        commands.save(block.toString(), secret.toString());
        assertEquals(16, Files.size(secret));
        assertEquals("rw-------", java.nio.file.attribute.PosixFilePermissions.toString(
                Files.getPosixFilePermissions(secret)), "a private file stays private");
    }

    @Test
    void aPrivateFileIsReadableByNoOneElseWhileItsSaveIsWritten() throws IOException {
        MemoryHandle block = fixture.cpu0.allocate(3 * MiB, CPU0);
        Path secret = file("secret.bin", new byte[4]);
        Files.setPosixFilePermissions(secret, java.nio.file.attribute.PosixFilePermissions.fromString("rw-r-----"));
        // Each chunk's read runs while the temporary file holds the chunks before it: what could another
        // user open then? An open descriptor keeps reading after the file's permissions change.
        List<String> seen = new java.util.ArrayList<>();
        commands.router = (MemoryRouter) Proxy.newProxyInstance(MemoryRouter.class.getClassLoader(),
                new Class<?>[] {MemoryRouter.class}, (proxy, m, args) -> {
                    if (m.getName().equals("read")) {
                        try (Stream<Path> parts = Files.list(dir).filter(p -> p.getFileName().toString().endsWith(".part"))) {
                            for (Path part : parts.toList()) {
                                seen.add(java.nio.file.attribute.PosixFilePermissions.toString(Files.getPosixFilePermissions(part)));
                            }
                        }
                    }
                    try {
                        return m.invoke(fixture.directory, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        assertTrue(commands.save(block.toString(), secret.toString()).toString().startsWith("saved 3.0 MiB"));
        assertEquals(List.of("rw-------", "rw-------", "rw-------"), seen, "the temporary file, chunk by chunk");
        assertEquals("rw-r-----", java.nio.file.attribute.PosixFilePermissions.toString(
                Files.getPosixFilePermissions(secret)), "the saved file gets the permissions of the one it replaced");
    }

    @Test
    void aLinkInALoopIsNamedAsOne() throws IOException {
        MemoryHandle block = fixture.cpu0.allocate(16, CPU0);
        Path one = Files.createSymbolicLink(dir.resolve("loop1"), Path.of("loop2"));
        Files.createSymbolicLink(dir.resolve("loop2"), Path.of("loop1"));
        String loop = "error: Cannot reach " + one + " (a symbolic link to loop2): Too many levels of symbolic links";
        String load = commands.load(one.toString(), block.toString()).toString();
        assertTrue(load.startsWith(loop) && load.endsWith("; nothing loaded"), load);
        String save = commands.save(block.toString(), one.toString()).toString();
        assertTrue(save.startsWith(loop) && save.endsWith("; nothing saved"), save);
        assertTrue(Files.isSymbolicLink(one), "the link is left as it was");
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

    @Test
    void specialFilesAreRefusedByNameAndNothingChanges() throws Exception {
        Path devNull = Path.of("/dev/null");
        Path procStatus = Path.of("/proc/self/status");
        assumeTrue(Files.exists(devNull) && Files.exists(procStatus), "a Linux /dev and /proc");
        MemoryHandle block = fixture.cpu0.allocate(100, CPU0);
        fixture.directory.write(block, 0, MemorySegment.ofArray(random(100, 6)));
        byte[] before = contents(block);
        List<MemoryHandle> handles = handles();
        String h = block.toString();

        // A device opens and reads as empty: without the check, "loaded 0 bytes" or "is empty".
        String notRegular = " is not a regular file (a device, a pipe or a socket); mem:load reads regular files only;"
                + " nothing loaded";
        assertEquals("error: " + devNull + notRegular, commands.load(devNull.toString(), h).toString());
        assertEquals("error: " + devNull + notRegular, commands.load(devNull.toString()).toString());
        // A pipe would block the open until a writer comes: the check comes before the open.
        Path fifo = dir.resolve("pipe");
        mkfifo(fifo);
        assertEquals("error: " + fifo + notRegular, commands.load(fifo.toString(), h).toString());
        // /proc's files say 0 bytes and have more.
        String lies = " has more than the 0 bytes its size says (a special file, as in /proc, or one being written);"
                + " nothing loaded";
        assertEquals("error: File " + procStatus + lies, commands.load(procStatus.toString(), h).toString());
        assertEquals("error: File " + procStatus + lies, commands.load(procStatus.toString()).toString());

        // A save would rename its file over the pipe: refused, and the pipe stays a pipe.
        assertEquals("error: " + fifo + " is not a regular file (a device, a pipe or a socket); mem:save writes regular"
                + " files only; nothing saved", commands.save(h, fifo.toString()).toString());
        assertTrue(Files.exists(fifo) && !Files.isRegularFile(fifo) && !Files.isSymbolicLink(fifo));

        assertArrayEquals(before, contents(block));
        assertEquals(handles, handles());
        assertEquals(List.of("pipe"), folder());
    }

    @Test
    void aSaveThroughASymbolicLinkReplacesTheFileItNamesAndKeepsTheLink() throws IOException {
        MemoryHandle block = fixture.cpu0.allocate(64, CPU0);
        byte[] bytes = random(64, 7);
        fixture.directory.write(block, 0, MemorySegment.ofArray(bytes));
        Files.createDirectory(dir.resolve("other"));
        Path target = file("other/target.bin", "original".getBytes(StandardCharsets.UTF_8));
        Path link = Files.createSymbolicLink(dir.resolve("link.bin"), Path.of("other/target.bin"));

        String saved = commands.save(block.toString(), link.toString()).toString();
        assertTrue(saved.startsWith("saved 64 bytes of " + block + " on cpu:0 to " + link + " in "), saved);
        assertTrue(Files.isSymbolicLink(link), "the link is kept");
        assertArrayEquals(bytes, Files.readAllBytes(target));

        Path dangling = Files.createSymbolicLink(dir.resolve("dangling.bin"), Path.of("nowhere/x.bin"));
        assertEquals("error: " + dangling + " is a symbolic link to nowhere/x.bin, which does not exist; nothing saved",
                commands.save(block.toString(), dangling.toString()).toString());
        assertTrue(Files.isSymbolicLink(dangling));
        assertEquals(List.of("dangling.bin", "link.bin", "other"), folder());
        try (Stream<Path> other = Files.list(dir.resolve("other"))) {
            assertEquals(List.of(target), other.toList(), "no temporary file is left beside the target");
        }
    }

    @Test
    void aNameEndingWithASlashNamesAFolder() throws IOException {
        MemoryHandle block = fixture.cpu0.allocate(64, CPU0);
        String h = block.toString();
        Path plain = file("plain.bin", new byte[8]);
        String out = dir.resolve("out") + "/";
        assertEquals("error: '" + out + "' ends with /, so it names a folder; give a file name; nothing saved",
                commands.save(h, out).toString());
        assertEquals("error: '" + plain + "/' ends with /, so it names a folder; give a file name; nothing saved",
                commands.save(h, plain + "/").toString());
        assertEquals("error: '" + plain + "//' ends with /, but " + plain + " is a file, not a folder; nothing loaded",
                commands.load(plain + "//", h).toString());
        assertEquals(List.of("plain.bin"), folder());
        assertArrayEquals(new byte[8], Files.readAllBytes(plain));
    }

    @Test
    void aLongFileNameSavesWhereTheFileSystemTakesIt() throws IOException {
        MemoryHandle block = fixture.cpu0.allocate(64, CPU0);
        Path target = dir.resolve("a".repeat(250) + ".bin"); // 254 bytes: a name most file systems take
        String saved = commands.save(block.toString(), target.toString()).toString();
        assertTrue(saved.startsWith("saved 64 bytes of " + block), saved);
        assertEquals(64, Files.size(target));
        Path tooLong = dir.resolve("b".repeat(300));
        String refused = commands.save(block.toString(), tooLong.toString()).toString();
        assertTrue(refused.startsWith("error: Cannot reach " + tooLong + ": ") && refused.endsWith("; nothing saved"),
                refused);
        assertEquals(List.of(target.getFileName().toString()), folder());
    }

    @Test
    void aFileThatGrowsWhileItLoadsIsReportedAndItsNewBlockFreed() throws IOException {
        Path growing = file("growing.bin", random((int) (2 * MiB), 8));
        List<MemoryHandle> before = handles();
        // The first chunk's write appends to the file, as a writer still filling it would.
        commands.router = (MemoryRouter) Proxy.newProxyInstance(MemoryRouter.class.getClassLoader(),
                new Class<?>[] {MemoryRouter.class}, (proxy, m, args) -> {
                    if (m.getName().equals("write") && Files.size(growing) == 2 * MiB) {
                        Files.write(growing, new byte[] {1}, StandardOpenOption.APPEND);
                    }
                    try {
                        return m.invoke(fixture.directory, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        assertEquals("error: File " + growing + " grew past " + 2 * MiB + " bytes: it changed while loading; nothing loaded",
                commands.load(growing.toString()).toString());
        assertEquals(before, handles(), "the new block is freed again");
    }

    private List<String> folder() throws IOException {
        try (Stream<Path> files = Files.list(dir)) {
            return files.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }
}
