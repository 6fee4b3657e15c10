package io.ferrum.memory.shell;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

import org.apache.felix.service.command.Descriptor;
import org.apache.felix.service.command.Parameter;
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

    @Descriptor("Copy bytes between two blocks, on one device or across devices")
    public Reply copy(@Descriptor("source handle") String src, @Descriptor("destination handle") String dst,
                      @Descriptor("bytes to copy, e.g. 4k") String size) {
        return copy(src, dst, size, "0", "0");
    }

    @Descriptor("Copy bytes between two blocks, from an offset in the source")
    public Reply copy(@Descriptor("source handle") String src, @Descriptor("destination handle") String dst,
                      @Descriptor("bytes to copy") String size, @Descriptor("source offset") String srcOffset) {
        return copy(src, dst, size, srcOffset, "0");
    }

    @Descriptor("Copy bytes between two blocks, from and to offsets")
    public Reply copy(@Descriptor("source handle") String src, @Descriptor("destination handle") String dst,
                      @Descriptor("bytes to copy") String size, @Descriptor("source offset") String srcOffset,
                      @Descriptor("destination offset") String dstOffset) {
        return Reply.attempt(() -> {
            MemoryTransfer t = new MemoryTransfer(MemoryHandle.parse(src), MemoryHandle.parse(dst), Sizes.parse(size),
                    Sizes.parse(srcOffset), Sizes.parse(dstOffset));
            Services.router(router).copy(t);
            return Reply.line("copied " + t.size() + " bytes " + t.src() + "+" + t.srcOffset() + " -> " + t.dst() + "+"
                    + t.dstOffset());
        });
    }

    @Descriptor("Write bytes into a block: hex (de ad be ef, 0xdeadbeef) or a quoted string")
    public Reply write(
            @Descriptor("take the data as UTF-8 text even when it looks like hex")
            @Parameter(names = {"-s", "--text"}, presentValue = "true", absentValue = "false") boolean text,
            @Descriptor("the handle") String handle, @Descriptor("offset in the block") String offset,
            @Descriptor("the bytes: hex pairs (de ad be ef), 0x-prefixed hex (0xdeadbeef), or text") String... data) {
        return Reply.attempt(() -> {
            MemoryHandle h = MemoryHandle.parse(handle);
            long at = Sizes.parse(offset);
            byte[] bytes = Arguments.data(text, data);
            Services.router(router).write(h, at, MemorySegment.ofArray(bytes));
            return Reply.line("wrote " + bytes.length + " bytes to " + h + " at offset " + at);
        });
    }

    @Descriptor("Show a range of a block's bytes in hex; the whole range must lie inside the block")
    public Reply read(@Descriptor("the handle") String handle, @Descriptor("offset in the block") String offset,
                      @Descriptor("bytes to show, at most 64k") String length) {
        return Reply.attempt(() -> {
            MemoryHandle h = MemoryHandle.parse(handle);
            long from = Sizes.parse(offset);
            return Reply.lines(hex(BlockAccess.show(Services.router(router), h, from, Sizes.parse(length)), from));
        });
    }

    @Descriptor("Set every byte of a block to one value")
    public Reply fill(@Descriptor("the handle") String handle, @Descriptor("the byte: 0-255, or 0x00-0xff") String value) {
        return Reply.attempt(() -> {
            MemoryHandle h = MemoryHandle.parse(handle);
            byte b = Arguments.byteValue(value);
            long filled = BlockAccess.fill(Services.router(router), h, b);
            return Reply.line("filled " + filled + " bytes of " + h + " with " + String.format(Locale.ROOT, "0x%02x", b));
        });
    }

    @Descriptor("Show a block's first bytes in hex")
    public Reply dump(@Descriptor("the handle") String handle) {
        return dump(handle, "0", DUMP_LENGTH);
    }

    @Descriptor("Show a block's bytes in hex from an offset")
    public Reply dump(@Descriptor("the handle") String handle, @Descriptor("offset") String offset) {
        return dump(handle, offset, DUMP_LENGTH);
    }

    @Descriptor("Show a range of a block's bytes in hex")
    public Reply dump(@Descriptor("the handle") String handle, @Descriptor("offset") String offset,
                      @Descriptor("bytes to show (at most to the end of the block, and at most 64k)") String length) {
        return Reply.attempt(() -> {
            MemoryHandle h = MemoryHandle.parse(handle);
            MemoryRouter r = Services.router(router);
            long from = Sizes.parse(offset);
            long n = BlockAccess.clamp(h, BlockAccess.info(r, h).size(), from, Sizes.parse(length));
            return Reply.lines(hex(BlockAccess.show(r, h, from, n), from));
        });
    }

    @Descriptor("Map a block for CPU access (it stays mapped, and is not moved, until mem:unmap)")
    public Reply map(@Descriptor("the handle") String handle) {
        return map(handle, MemoryAccess.READ_WRITE.name());
    }

    @Descriptor("Map a block for CPU access with an access mode")
    public Reply map(@Descriptor("the handle") String handle,
                     @Descriptor("READ_ONLY, WRITE_ONLY or READ_WRITE") String access) {
        return Reply.attempt(() -> {
            MemoryHandle h = MemoryHandle.parse(handle);
            MemoryAccess a = Arguments.access(access);
            MemorySegment s = Services.mappingManager(monitor, router, h).mapMemory(h, a);
            return Reply.line("mapped " + h + " " + a + ": " + s.byteSize() + " bytes at 0x" + Long.toHexString(s.address()));
        });
    }

    @Descriptor("Unmap a block: every view of it is closed")
    public Reply unmap(@Descriptor("the handle") String handle) {
        return Reply.attempt(() -> {
            MemoryHandle h = MemoryHandle.parse(handle);
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
