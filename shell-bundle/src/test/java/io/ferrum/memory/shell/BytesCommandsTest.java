package io.ferrum.memory.shell;

import static io.ferrum.memory.shell.ShellFixture.CPU0;
import static io.ferrum.memory.shell.ShellFixture.CPU1;
import static io.ferrum.memory.shell.ShellFixture.lines;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import io.ferrum.memory.api.MemoryException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryRouter;

class BytesCommandsTest {
    private final ShellFixture fixture = new ShellFixture();
    private final BytesCommands commands = new BytesCommands();
    private final MemoryHandle block = fixture.cpu0.allocate(100, CPU0);

    BytesCommandsTest() {
        commands.monitor = fixture.directory;
        commands.router = fixture.directory;
    }

    @AfterEach
    void close() throws Exception {
        fixture.close();
    }

    private boolean mapped(MemoryHandle h) {
        return fixture.directory.handleInfo(h).orElseThrow().mapped();
    }

    @Test
    void fillThenDumpShowsTheBytesUpToTheBlocksEnd() {
        assertEquals("filled 100 bytes of " + block + " with 0xab", commands.fill(block.toString(), "0xab").toString());
        List<String> dump = lines(commands.dump(block.toString(), "96"));
        assertEquals(1, dump.size(), dump.toString());
        assertTrue(dump.get(0).startsWith("00000060  ab ab ab ab "), dump.get(0));
        assertTrue(dump.get(0).endsWith("|....|"), "only the 4 bytes left in the block: " + dump.get(0));
        assertFalse(mapped(block), "a block the command mapped is unmapped again");
    }

    @Test
    void dumpShowsTheFirst256BytesByDefault() {
        MemoryHandle big = fixture.cpu0.allocate(4096, CPU0);
        assertEquals(16, lines(commands.dump(big.toString())).size());
    }

    @Test
    void aBlockTheUserMappedStaysMappedAcrossFillAndDump() {
        String mapped = commands.map(block.toString(), "read_write").toString();
        assertTrue(mapped.startsWith("mapped " + block + " READ_WRITE: 100 bytes at 0x"), mapped);
        commands.fill(block.toString(), "65");
        assertTrue(lines(commands.dump(block.toString(), "0", "4")).get(0).endsWith("|AAAA|"));
        assertTrue(mapped(block));
        assertEquals("unmapped " + block, commands.unmap(block.toString()).toString());
        assertFalse(mapped(block));
    }

    @Test
    void copyMovesBytesAcrossDevicesAtTheOffsetsGiven() {
        MemoryHandle dst = fixture.cpu1.allocate(64, CPU1);
        commands.fill(block.toString(), "0x7a");
        commands.fill(dst.toString(), "0");
        assertEquals("copied 16 bytes " + block + "+0 -> " + dst + "+8",
                commands.copy(block.toString(), dst.toString(), "16", "0", "8").toString());
        String first = lines(commands.dump(dst.toString(), "0", "32")).get(0);
        assertTrue(first.startsWith("00000000  00 00 00 00 00 00 00 00 7a 7a"), first);
        assertTrue(first.endsWith("|........zzzzzzzz|"), first);
    }

    @Test
    void badInputIsOneErrorLineNamingTheValue() {
        String h = block.toString();
        commands.fill(h, "0x5a");
        byte[] before = contents(block);
        assertEquals("error: Invalid byte '300': use 0-255 or 0x00-0xff", commands.fill(h, "300").toString());
        for (String signed : List.of("+5", "0x+f", "-0", "0x-1", "0x", "0x100", "1e2")) {
            assertEquals("error: Invalid byte '" + signed + "': use 0-255 or 0x00-0xff", commands.fill(h, signed).toString());
        }
        assertEquals("error: Invalid handle '+" + block.id() + "': expected 0x followed by up to 16 hex digits, as"
                + " printed by mem:alloc", commands.fill("+" + block.id(), "0").toString());
        assertEquals("error: Invalid handle '0x+" + Long.toHexString(block.id()) + "': expected 0x followed by up to 16"
                + " hex digits, as printed by mem:alloc", commands.fill("0x+" + Long.toHexString(block.id()), "0").toString());
        assertEquals("error: Offset 5000 is past the end of " + h + " (100 bytes)", commands.dump(h, "5000").toString());
        assertEquals("error: Invalid access 'SIDEWAYS': use READ_ONLY, WRITE_ONLY or READ_WRITE",
                commands.map(h, "SIDEWAYS").toString());
        String unknown = commands.fill("0x0000000000000001", "1").toString();
        assertTrue(unknown.startsWith("error: Handle 0x0000000000000001 is not known"), unknown);
        String tooMuch = commands.copy(h, h, "5000").toString();
        assertTrue(tooMuch.startsWith("error: ") && tooMuch.contains("5000"), tooMuch);
        assertArrayEquals(before, contents(block));
        assertFalse(mapped(block));
    }

    private byte[] contents(MemoryHandle h) {
        byte[] out = new byte[(int) fixture.directory.handleInfo(h).orElseThrow().size()];
        fixture.directory.read(h, 0, MemorySegment.ofArray(out));
        return out;
    }

    @Test
    void writePutsHexOrTextAtTheOffsetByteForByte() {
        String h = block.toString();
        commands.fill(h, "0");
        assertEquals("wrote 4 bytes to " + h + " at offset 0", commands.write(h, "0", "de", "ad", "be", "ef").toString());
        assertEquals("wrote 4 bytes to " + h + " at offset 4", commands.write(h, "4", "0xCAFEbabe").toString());
        assertEquals("wrote 2 bytes to " + h + " at offset 8", commands.write(h, "8", "0x01 ff").toString());
        assertEquals("wrote 12 bytes to " + h + " at offset 10", commands.write(h, "10", "hello  world").toString());
        assertEquals("wrote 8 bytes to " + h + " at offset 22", commands.write("--text", h, "22", "ab", "cd", "é").toString());
        assertEquals("wrote 2 bytes to " + h + " at offset 30", commands.write(h, "30", "hi").toString());
        byte[] expected = new byte[100];
        byte[] head = {(byte) 0xde, (byte) 0xad, (byte) 0xbe, (byte) 0xef, (byte) 0xca, (byte) 0xfe, (byte) 0xba,
            (byte) 0xbe, 0x01, (byte) 0xff};
        System.arraycopy(head, 0, expected, 0, head.length);
        byte[] text = "hello  worldab cd éhi".getBytes(StandardCharsets.UTF_8);
        System.arraycopy(text, 0, expected, 10, text.length);
        assertArrayEquals(expected, contents(block));
        assertFalse(mapped(block), "write maps nothing");
    }

    /**
     * Text holding half of a surrogate pair alone (Gogo's {@code "\\ud83d"} escape, a variable set
     * from another command's answer): String.getBytes wrote a {@code ?} (0x3f) in its place and
     * answered "wrote", a byte nobody typed. UTF-8 has no bytes for it: the write is refused naming
     * the character's place and code, and nothing is written.
     */
    @Test
    void textWithALoneSurrogateIsRefusedNotWrittenAsAQuestionMark() {
        String h = block.toString();
        byte[] before = contents(block);
        assertEquals("error: Invalid text: character 4 is U+D83D, half of a surrogate pair without its other half, which"
                + " UTF-8 cannot write; give the whole character, or its bytes in hex; nothing written",
                commands.write("--text", h, "0", "ab", "\ud83dc").toString());
        assertEquals("error: Invalid text: character 1 is U+DE00, half of a surrogate pair without its other half, which"
                + " UTF-8 cannot write; give the whole character, or its bytes in hex; nothing written",
                commands.write(h, "0", "\ude00").toString());
        assertArrayEquals(before, contents(block));
        assertEquals("wrote 4 bytes to " + h + " at offset 0", commands.write(h, "0", "\ud83d\ude00").toString(),
                "a whole pair is one character of 4 bytes");
    }

    /** The first 8 bytes of the block after {@code mem:write [--text] h 0 words...} over a block of zeros. */
    private byte[] written(boolean text, String... words) {
        commands.fill(block.toString(), "0");
        List<String> args = new ArrayList<>(text ? List.of("--text") : List.of());
        args.add(block.toString());
        args.add("0");
        args.addAll(List.of(words));
        String reply = commands.write(args.toArray(String[]::new)).toString();
        assertTrue(reply.startsWith("wrote "), reply);
        return Arrays.copyOf(contents(block), 8);
    }

    private static byte[] bytes(int... values) {
        byte[] out = new byte[8];
        for (int i = 0; i < values.length; i++) {
            out[i] = (byte) values[i];
        }
        return out;
    }

    @Test
    void aFirstWordOfHexDigitPairsIsHexWhateverItsLength() {
        assertArrayEquals(bytes(0xca, 0xfe), written(false, "cafe"));
        assertArrayEquals(bytes(1, 2, 3, 4, 5, 6, 7, 8), written(false, "0102030405060708"));
        assertArrayEquals(bytes(0xde, 0xad, 0xbe, 0xef), written(false, "de", "adbeef"));
        assertArrayEquals(bytes(0xde, 0xad, 0xbe, 0xef), written(false, "deadbeef"));
        assertArrayEquals(bytes(0xde, 0xad, 0xbe, 0xef), written(false, "0xdead", "beef"));
        assertArrayEquals(bytes('c', 'a', 'f', 'e'), written(true, "cafe"));
        assertArrayEquals(bytes('0', 'x', 'a', 'b', 'c'), written(true, "0xabc"));
        assertArrayEquals(bytes('c', 'a', 'f', 'e', 's'), written(false, "cafes"), "a word with a non-hex letter: text");
        assertArrayEquals(bytes('a', 'b', 'c'), written(false, "abc"), "an odd number of digits: text");
    }

    @Test
    void aFirstWordStartingWith0xMustBeHexAndIsNeverWrittenAsText() {
        String h = block.toString();
        commands.fill(h, "0x5a");
        byte[] before = contents(block);
        for (String bad : List.of("0xabc", "0xZZ", "0x", "0Xa")) {
            assertEquals("error: Invalid hex data '" + bad + "': write bytes as pairs of hex digits (de ad be ef, or"
                    + " 0xdeadbeef), or pass --text to write the words as text", commands.write(h, "0", bad).toString());
        }
        assertEquals("error: Invalid hex data 'abc': write bytes as pairs of hex digits (de ad be ef, or"
                + " 0xdeadbeef), or pass --text to write the words as text", commands.write(h, "0", "cafe abc").toString());
        assertArrayEquals(before, contents(block));
    }

    @Test
    void everyCommandOnABlockOfADeviceThatWentAwaySaysSo(@TempDir Path dir) throws IOException {
        MemoryHandle gone = fixture.cpu1.allocate(4096, CPU1);
        String h = gone.toString();
        fixture.directory.remove(CPU1);
        Path file = Files.write(dir.resolve("in.bin"), new byte[16]);
        FileCommands files = new FileCommands();
        files.monitor = fixture.directory;
        files.router = fixture.directory;
        files.progressOutput = () -> null;
        String wentAway = "error: Handle " + h + " belongs to cpu:1, which went away (its backend stopped or its"
                + " configuration was deleted); its memory was released";

        Map<String, String> answers = new LinkedHashMap<>();
        answers.put("write", commands.write(h, "0", "00").toString());
        answers.put("read", commands.read(h, "0", "16").toString());
        answers.put("read of 0 bytes", commands.read(h, "0", "0").toString());
        answers.put("copy", commands.copy(h, block.toString(), "16").toString());
        answers.put("fill", commands.fill(h, "0").toString());
        answers.put("dump", commands.dump(h).toString());
        answers.put("map", commands.map(h).toString());
        answers.put("unmap", commands.unmap(h).toString());
        answers.put("save", files.save(h, dir.resolve("out.bin").toString()).toString());
        answers.put("load into it", files.load(file.toString(), h).toString());
        answers.forEach((command, answer) -> assertEquals(wentAway, answer, command));
        assertFalse(Files.exists(dir.resolve("out.bin")));
    }

    @Test
    void readShowsExactlyTheRangeAsAHexDump() {
        String h = block.toString();
        assertTrue(commands.write(h, "90", "Ferrum mem").toString().startsWith("wrote 10 bytes"));
        List<String> read = lines(commands.read(h, "90", "10"));
        assertEquals(List.of("0000005a  46 65 72 72 75 6d 20 6d 65 6d                    |Ferrum mem|"), read);
        List<String> two = lines(commands.read(h, "0", "17"));
        assertEquals(2, two.size(), two.toString());
        assertTrue(two.get(1).startsWith("00000010  00 "), two.get(1));
    }

    @Test
    void refusedWritesAndReadsChangeNothingAndNameTheValue() {
        String h = block.toString();
        commands.fill(h, "0x5a");
        byte[] before = contents(block);
        List<MemoryHandle> handles = fixture.cpu0.handles().stream().map(i -> i.handle()).toList();

        String outside = commands.write(h, "98", "01 02 03").toString();
        assertTrue(outside.startsWith("error: A write of 3 bytes at offset 98 falls outside block " + h), outside);
        assertEquals("error: Invalid hex data 'zz': write bytes as pairs of hex digits (de ad be ef, or 0xdeadbeef),"
                + " or pass --text to write the words as text", commands.write(h, "0", "de", "zz").toString());
        assertEquals("error: Invalid hex data '0xabc': write bytes as pairs of hex digits (de ad be ef, or 0xdeadbeef),"
                + " or pass --text to write the words as text", commands.write(h, "0", "0xab 0xabc").toString());
        assertTrue(commands.write(h, "0").toString().startsWith("error: No data to write"));
        assertTrue(commands.write(h, "0", "").toString().startsWith("error: No data to write"));
        assertTrue(commands.write(h, "-1", "00").toString().startsWith("error: Invalid offset '-1'"));
        String unknown = commands.write("0x0000000000000001", "0", "00").toString();
        assertTrue(unknown.startsWith("error: ") && unknown.contains("0x0000000000000001"), unknown);
        String pastEnd = commands.read(h, "96", "5").toString();
        assertTrue(pastEnd.startsWith("error: A read of 5 bytes at offset 96 falls outside block " + h), pastEnd);
        assertEquals("error: Cannot show 65537 bytes of " + h + ": at most 65536 at a time; mem:save writes a whole"
                + " block to a file", commands.read(h, "0", "65537").toString());

        assertArrayEquals(before, contents(block));
        assertEquals(handles, fixture.cpu0.handles().stream().map(i -> i.handle()).toList());
        assertFalse(mapped(block));
    }

    @Test
    void aReadOfNothingIsStillRefusedPastTheBlocksEnd() {
        String h = block.toString();
        assertEquals("error: A read of 0 bytes at offset 9999999 falls outside block " + h + " of 100 bytes on cpu:0;"
                + " nothing was copied", commands.read(h, "9999999", "0").toString());
        assertEquals("error: A read of 0 bytes at offset 101 falls outside block " + h + " of 100 bytes on cpu:0;"
                + " nothing was copied", commands.read(h, "101", "0").toString());
        assertEquals("Nothing to show: the length is 0", commands.read(h, "100", "0").toString());
    }

    @Test
    void oneByteIsSaidInTheSingular() {
        String h = block.toString();
        assertEquals("error: A write of 1 byte at offset 100 falls outside block " + h + " of 100 bytes on cpu:0;"
                + " nothing was copied", commands.write(h, "100", "00").toString());
        String tiny = fixture.cpu0.allocate(1, CPU0).toString();
        assertEquals("error: A read of 2 bytes at offset 0 falls outside block " + tiny + " of 1 byte on cpu:0;"
                + " nothing was copied", commands.read(tiny, "0", "2").toString());
        assertEquals("error: Copy of 1 byte at source offset 1 falls outside source block " + tiny + " of 1 byte on"
                + " cpu:0", commands.copy(tiny, h, "1", "1").toString());
        assertEquals("error: Offset 2 is past the end of " + tiny + " (1 byte)", commands.dump(tiny, "2").toString());
        assertEquals("Nothing to show: offset 1 is the end of " + tiny + " (1 byte)", commands.dump(tiny, "1").toString());
        assertEquals("wrote 1 byte to " + tiny + " at offset 0", commands.write(tiny, "0", "ff").toString());
    }

    @Test
    void fillCoversABlockLargerThanOneWrite() {
        MemoryHandle big = fixture.cpu1.allocate(3 * ShellFixture.MiB + 5, CPU1);
        assertEquals("filled 3.0 MiB (" + (3 * ShellFixture.MiB + 5) + " bytes) of " + big + " with 0x11",
                commands.fill(big.toString(), "17").toString());
        byte[] expected = new byte[(int) (3 * ShellFixture.MiB + 5)];
        Arrays.fill(expected, (byte) 0x11);
        assertArrayEquals(expected, contents(big));
    }

    /**
     * Ctrl-C at the console interrupts the command's thread (docs/SHELL.md: the command ends with
     * {@code error: interrupted}). A fill went on to the block's end whatever its size, minutes for a
     * large device, while the console took the next command.
     */
    @Test
    void anInterruptedFillStopsBetweenTwoWritesAndSaysHowFarItGot() {
        MemoryHandle big = fixture.cpu1.allocate(3 * ShellFixture.MiB, CPU1);
        // Ctrl-C lands while the first write runs.
        commands.router = (MemoryRouter) Proxy.newProxyInstance(MemoryRouter.class.getClassLoader(),
                new Class<?>[] {MemoryRouter.class}, (proxy, m, args) -> {
                    if (m.getName().equals("write")) {
                        Thread.currentThread().interrupt();
                    }
                    try {
                        return m.invoke(fixture.directory, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        try {
            assertEquals("error: interrupted: 1.0 MiB (1048576 bytes) of the 3145728 bytes of " + big + " were filled with"
                    + " 0x11; the rest of the block is as it was", commands.fill(big.toString(), "17").toString());
            assertTrue(Thread.currentThread().isInterrupted(), "the interrupt stays for the shell to see");
        } finally {
            Thread.interrupted();
        }
        byte[] got = contents(big);
        assertEquals(0x11, got[(int) ShellFixture.MiB - 1]);
        assertEquals(0, got[(int) ShellFixture.MiB], "nothing written after the interrupt (a new block reads zeros here)");
    }

    /**
     * Ctrl-C during {@code mem:copy} between two devices: the monitor's router stops before the next
     * piece (or before the first) with a {@code MemoryException} in the router's words, the interrupt
     * set. The command said so in those words, the bytes counted as a program reads them; it now says
     * how far it got as {@code mem:fill} does. The router of the test throws what the monitor's throws
     * ({@code CrossDeviceCopierTest} pins those messages).
     */
    @Test
    void anInterruptedCopyBetweenDevicesSaysHowFarItGot() {
        MemoryHandle dst = fixture.cpu1.allocate(100, CPU1);
        List<String> thrown = new ArrayList<>(List.of(
                "Copy of 3145851 bytes from " + block + " on cpu:0 to " + dst + " on cpu:1 interrupted after 1048576 bytes:"
                        + " the destination holds part of the source (destination offsets 0 to 1048576), the rest of its"
                        + " range is as it was; copy again to complete it",
                "Copy of 3145851 bytes from " + block + " on cpu:0 to " + dst + " on cpu:1 interrupted before its first"
                        + " byte: the destination is as it was"));
        commands.router = (MemoryRouter) Proxy.newProxyInstance(MemoryRouter.class.getClassLoader(),
                new Class<?>[] {MemoryRouter.class}, (proxy, m, args) -> {
                    if (m.getName().equals("copy")) {
                        Thread.currentThread().interrupt();
                        throw new MemoryException(thrown.remove(0), new InterruptedException("interrupted"));
                    }
                    try {
                        return m.invoke(fixture.directory, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        try {
            assertEquals("error: interrupted: 1.0 MiB (1048576 bytes) of the 3145851 bytes from " + block + " on cpu:0 were"
                    + " copied to " + dst + " on cpu:1 (destination offsets 0 to 1048576); the rest of the destination's"
                    + " range is as it was; copy again to complete it", commands.copy(block.toString(), dst.toString(),
                    "3145851").toString());
            assertTrue(Thread.currentThread().isInterrupted(), "the interrupt stays for the shell to see");
            Thread.interrupted();
            assertEquals("error: interrupted: 0 bytes of the 3145851 bytes from " + block + " on cpu:0 were copied to "
                    + dst + " on cpu:1; the destination is as it was", commands.copy(block.toString(), dst.toString(),
                    "3145851").toString());
            assertTrue(Thread.currentThread().isInterrupted(), "the interrupt stays for the shell to see");
        } finally {
            Thread.interrupted();
        }
    }

    /**
     * An Error of a command (here thrown by the router, as a class gone with an uninstalled bundle or
     * an exhausted stack would be) went past the command to Gogo, which the console showed as
     * {@code error: io/ferrum/...}, a class name alone, or with no message at all. The line now says
     * that it is an internal error, of which command, and what it was.
     */
    @Test
    void anErrorOfACommandIsAnInternalErrorLineNamingTheCommandAndTheError() {
        List<Error> thrown = new java.util.ArrayList<>(List.of(
                new NoClassDefFoundError("io/ferrum/memory/pool/internal/Gone"), new StackOverflowError()));
        commands.router = (MemoryRouter) Proxy.newProxyInstance(MemoryRouter.class.getClassLoader(),
                new Class<?>[] {MemoryRouter.class}, (proxy, m, args) -> {
                    if (m.getName().equals("copy")) {
                        throw thrown.remove(0);
                    }
                    try {
                        return m.invoke(fixture.directory, args);
                    } catch (InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        assertEquals("error: internal error in mem:copy: NoClassDefFoundError: io/ferrum/memory/pool/internal/Gone; see"
                + " the log", commands.copy(block.toString(), block.toString(), "4", "0", "8").toString());
        assertEquals("error: internal error in mem:copy: StackOverflowError; see the log",
                commands.copy(block.toString(), block.toString(), "4", "0", "8").toString());
    }
}
