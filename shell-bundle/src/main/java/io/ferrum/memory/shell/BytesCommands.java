package io.ferrum.memory.shell;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

import org.apache.felix.service.command.Descriptor;
import org.osgi.service.component.annotations.Component;
import org.osgi.service.component.annotations.Reference;
import org.osgi.service.component.annotations.ReferenceCardinality;
import org.osgi.service.component.annotations.ReferencePolicy;
import org.osgi.service.component.annotations.ReferencePolicyOption;

import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryRouter;
import io.ferrum.memory.api.MemoryTransfer;

/**
 * The commands on a block's contents: {@code mem:copy} (through the router, so across devices
 * too), {@code mem:write}, {@code mem:read}, {@code mem:fill}, {@code mem:dump}, and {@code
 * mem:map}/{@code mem:unmap}, which keep a block mapped between commands. Write, read, fill and dump
 * go through the router's write and read ({@link BlockAccess}) and never map a block; a refused one
 * writes nothing.
 */
@Component(service = BytesCommands.class)
@MemCommand(function = {"copy", "write", "read", "fill", "dump", "map", "unmap"})
public final class BytesCommands {
    /** Bytes {@code mem:dump} shows when no length is given. */
    private static final String DUMP_LENGTH = "256";

    @Reference(cardinality = ReferenceCardinality.OPTIONAL, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY)
    volatile GlobalMemoryMonitor monitor;

    @Reference(cardinality = ReferenceCardinality.OPTIONAL, policy = ReferencePolicy.DYNAMIC,
            policyOption = ReferencePolicyOption.GREEDY)
    volatile MemoryRouter router;

    private static final Syntax COPY = Syntax.of("copy").required("SRC").required("DST").required("SIZE")
            .optional("SRC_OFFSET").optional("DST_OFFSET");
    private static final Syntax WRITE = Syntax.of("write").flag("-s", "--text").required("HANDLE").required("OFFSET")
            .rest("DATA");
    private static final Syntax READ = Syntax.of("read").required("HANDLE").required("OFFSET").required("LENGTH");
    private static final Syntax FILL = Syntax.of("fill").required("HANDLE").required("VALUE");
    private static final Syntax DUMP = Syntax.of("dump").required("HANDLE").optional("OFFSET").optional("LENGTH");
    private static final Syntax MAP = Syntax.of("map").required("HANDLE").optional("ACCESS");
    private static final Syntax UNMAP = Syntax.of("unmap").required("HANDLE");

    @Descriptor("Copy bytes between two blocks, on one device or across devices: mem:copy SRC DST SIZE [SRC_OFFSET"
            + " [DST_OFFSET]] (offsets default to 0)")
    public Reply copy(@Descriptor("SRC DST SIZE [SRC_OFFSET [DST_OFFSET]]") String... args) {
        return Reply.attempt("copy", () -> {
            Syntax.Words w = COPY.parse(args);
            MemoryTransfer t = new MemoryTransfer(Arguments.handle(w.get("SRC")), Arguments.handle(w.get("DST")),
                    Sizes.parse(w.get("SIZE")), Sizes.parse("source offset", w.get("SRC_OFFSET", "0")),
                    Sizes.parse("destination offset", w.get("DST_OFFSET", "0")));
            // A copy of 0 bytes is still checked as any copy (handles, offsets), and then says it copied
            // nothing, as mem:read of length 0 says it shows nothing.
            Services.router(router).copy(t);
            if (t.size() == 0) {
                return Reply.line("Nothing to copy: the size is 0");
            }
            return Reply.line("copied " + Sizes.amount(t.size()) + " " + t.src() + "+" + t.srcOffset() + " -> " + t.dst() + "+"
                    + t.dstOffset());
        });
    }

    @Descriptor("Write bytes into a block: mem:write [--text] HANDLE OFFSET DATA...; DATA is hex when its first word"
            + " is pairs of hex digits (de ad be ef, cafe, 0xdeadbeef; a word starting with 0x must be), else text;"
            + " --text (-s) takes it as UTF-8 text even when it looks like hex; data starting"
            + " with - goes after --")
    public Reply write(@Descriptor("[--text] HANDLE OFFSET DATA...") String... args) {
        return Reply.attempt("write", () -> {
            Syntax.Words w = WRITE.parse(args);
            MemoryHandle h = Arguments.handle(w.get("HANDLE"));
            long at = Sizes.parse("offset", w.get("OFFSET"));
            byte[] bytes = Arguments.data(w.flag("--text"), w.rest().toArray(String[]::new));
            Services.router(router).write(h, at, MemorySegment.ofArray(bytes));
            return Reply.line("wrote " + Sizes.amount(bytes.length) + " to " + h + " at offset " + at);
        });
    }

    @Descriptor("Show a range of a block's bytes in hex: mem:read HANDLE OFFSET LENGTH (at most 64k); the whole range"
            + " must lie inside the block")
    public Reply read(@Descriptor("HANDLE OFFSET LENGTH") String... args) {
        return Reply.attempt("read", () -> {
            Syntax.Words w = READ.parse(args);
            MemoryHandle h = Arguments.handle(w.get("HANDLE"));
            long from = Sizes.parse("offset", w.get("OFFSET"));
            long length = Sizes.parse("length", w.get("LENGTH"));
            if (length == 0) {
                // Nothing to show, but the range is checked as any read's: an unknown handle or an
                // offset past the block's end is still an error, in the router's words.
                Services.router(router).read(h, from, MemorySegment.ofArray(new byte[0]));
                return Reply.line("Nothing to show: the length is 0");
            }
            return Reply.lines(hex(BlockAccess.show(Services.router(router), h, from, length), from));
        });
    }

    @Descriptor("Set every byte of a block to one value: mem:fill HANDLE VALUE (0-255, or 0x00-0xff)")
    public Reply fill(@Descriptor("HANDLE VALUE") String... args) {
        return Reply.attempt("fill", () -> {
            Syntax.Words w = FILL.parse(args);
            MemoryHandle h = Arguments.handle(w.get("HANDLE"));
            byte b = Arguments.byteValue(w.get("VALUE"));
            long filled = BlockAccess.fill(Services.router(router), h, b);
            return Reply.line("filled " + Sizes.amount(filled) + " of " + h + " with " + String.format(Locale.ROOT, "0x%02x", b));
        });
    }

    @Descriptor("Show a block's bytes in hex: mem:dump HANDLE [OFFSET [LENGTH]] (from 0, 256 bytes, at most to the"
            + " block's end and at most 64k)")
    public Reply dump(@Descriptor("HANDLE [OFFSET [LENGTH]]") String... args) {
        return Reply.attempt("dump", () -> {
            Syntax.Words w = DUMP.parse(args);
            MemoryHandle h = Arguments.handle(w.get("HANDLE"));
            long from = Sizes.parse("offset", w.get("OFFSET", "0"));
            long length = Sizes.parse("length", w.get("LENGTH", DUMP_LENGTH));
            MemoryRouter r = Services.router(router);
            long size = BlockAccess.info(r, h).size();
            long n = BlockAccess.clamp(h, size, from, length);
            if (n == 0) {
                return Reply.line("Nothing to show: " + (from == size ? "offset " + from + " is the end of " + h + " ("
                        + Sizes.count(size) + ")" : "the length is 0"));
            }
            return Reply.lines(hex(BlockAccess.show(r, h, from, n), from));
        });
    }

    @Descriptor("Map a block for CPU access: mem:map HANDLE [ACCESS] (READ_ONLY, WRITE_ONLY or READ_WRITE, the"
            + " default); it stays mapped, and is not moved, until mem:unmap")
    public Reply map(@Descriptor("HANDLE [ACCESS]") String... args) {
        return Reply.attempt("map", () -> {
            Syntax.Words w = MAP.parse(args);
            MemoryHandle h = Arguments.handle(w.get("HANDLE"));
            MemoryAccess a = Arguments.access(w.get("ACCESS", MemoryAccess.READ_WRITE.name()));
            MemorySegment s = Services.mappingManager(monitor, router, h).mapMemory(h, a);
            return Reply.line("mapped " + h + " " + a + ": " + Sizes.amount(s.byteSize()) + " at 0x" + Long.toHexString(s.address()));
        });
    }

    @Descriptor("Unmap a block: mem:unmap HANDLE; every view of it is closed")
    public Reply unmap(@Descriptor("HANDLE") String... args) {
        return Reply.attempt("unmap", () -> {
            MemoryHandle h = Arguments.handle(UNMAP.parse(args).get("HANDLE"));
            Services.mappingManager(monitor, router, h).unmapMemory(h);
            return Reply.line("unmapped " + h);
        });
    }

    /**
     * @param s    the bytes to show, all of them
     * @param from the block offset of {@code s}'s first byte, shown on the left
     * @return one line per 16 bytes: the offset, the bytes in hex, and the printable ASCII ones as
     *         text ({@code .} for the others)
     */
    static List<String> hex(MemorySegment s, long from) {
        long n = s.byteSize();
        List<String> lines = new ArrayList<>();
        for (long line = 0; line < n; line += 16) {
            StringBuilder sb = new StringBuilder(String.format(Locale.ROOT, "%08x ", from + line));
            StringBuilder ascii = new StringBuilder();
            for (int i = 0; i < 16; i++) {
                if (line + i < n) {
                    int v = s.get(ValueLayout.JAVA_BYTE, line + i) & 0xff;
                    sb.append(String.format(Locale.ROOT, " %02x", v));
                    ascii.append(v >= 32 && v < 127 ? (char) v : '.');
                } else {
                    sb.append("   ");
                }
            }
            lines.add(sb.append("  |").append(ascii).append('|').toString());
        }
        return lines;
    }
}
