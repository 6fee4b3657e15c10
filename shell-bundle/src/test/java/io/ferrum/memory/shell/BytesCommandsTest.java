package io.ferrum.memory.shell;

import static io.ferrum.memory.shell.ShellFixture.CPU0;
import static io.ferrum.memory.shell.ShellFixture.CPU1;
import static io.ferrum.memory.shell.ShellFixture.lines;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.MemoryHandle;

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
        assertEquals("error: Invalid byte '300': use 0-255 or 0x00-0xff", commands.fill(h, "300").toString());
        assertEquals("error: Offset 5000 is past the end of " + h + " (100 bytes)", commands.dump(h, "5000").toString());
        assertEquals("error: Invalid access 'SIDEWAYS': use READ_ONLY, WRITE_ONLY or READ_WRITE",
                commands.map(h, "SIDEWAYS").toString());
        String unknown = commands.fill("0x0000000000000001", "1").toString();
        assertTrue(unknown.startsWith("error: Handle 0x0000000000000001 is not known"), unknown);
        String tooMuch = commands.copy(h, h, "5000").toString();
        assertTrue(tooMuch.startsWith("error: ") && tooMuch.contains("5000"), tooMuch);
        assertFalse(mapped(block));
    }
}
