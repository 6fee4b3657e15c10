package io.ferrum.memory.shell;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedByInterruptException;
import java.nio.channels.FileChannel;
import java.nio.file.Path;

import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryRouter;

/**
 * Streams bytes between a file and a block in chunks, through one native buffer of at most {@code
 * chunk} bytes and the router's {@code write}/{@code read}: a file of any size costs that buffer and
 * no heap, and every device's blocks work the same (a GPU's manager copies each chunk from host
 * memory). Each chunk is one {@code read} of the file and one {@code write} of the block, or the
 * reverse; the buffer is confined to the calling thread and freed when the transfer returns.
 *
 * <p>A transfer checks nothing about sizes: its callers ({@link FileCommands}) check the file
 * against the block before the first byte moves. A load stops between two chunks when its thread is
 * interrupted (Ctrl-C at the console), and says how many bytes it wrote ({@link Interrupted}).
 */
final class FileTransfer {
    /**
     * A load stopped by an interrupt of its thread, before a chunk or while the file was read (the
     * channel then closed itself); the interrupt stays set.
     */
    static final class Interrupted extends InterruptedException {
        private static final long serialVersionUID = 1L;
        /** The bytes written into the block before it stopped, from its offset. */
        final long loaded;

        Interrupted(long loaded) {
            this.loaded = loaded;
        }
    }

    /** Default chunk: large enough that a call's fixed cost is lost in its copy, small enough to be a modest fixed buffer. */
    static final int CHUNK = 8 << 20;

    private final MemoryRouter router;
    private final int chunk;

    /**
     * @param router the router the bytes go through
     * @param chunk  the most bytes one write or read moves, at least 1
     */
    FileTransfer(MemoryRouter router, int chunk) {
        this.router = router;
        this.chunk = chunk;
    }

    /**
     * Copies {@code size} bytes from the start of a file into a block.
     *
     * @param in       the open file, read from its position 0
     * @param file     the file's path, for messages
     * @param size     the bytes to copy; the file must have them
     * @param dst      the block
     * @param offset   where in the block the first byte goes
     * @param progress told after every chunk
     * @param leftBehind   what a failure leaves, for its message: {@code "; nothing loaded"}
     * @throws IOException                   if the file cannot be read
     * @throws InvalidMemoryRequestException if the file ends before {@code size} bytes (before the
     *                                       first write: nothing loaded) or has more after them (it
     *                                       changed while loading)
     * @throws Interrupted                   if the thread was interrupted, saying how many bytes it wrote
     */
    void load(FileChannel in, Path file, long size, MemoryHandle dst, long offset, TransferProgress progress,
              String leftBehind) throws IOException, Interrupted {
        long done = 0;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buffer = arena.allocate(Math.max(1, Math.min(size, chunk)), 64);
            ByteBuffer io = buffer.asByteBuffer();
            while (done < size) {
                if (Thread.currentThread().isInterrupted()) {
                    throw new Interrupted(done);
                }
                int n = (int) Math.min(buffer.byteSize(), size - done);
                io.clear().limit(n);
                while (io.hasRemaining()) {
                    if (in.read(io, done + io.position()) < 0) {
                        throw ended(file, done, done + io.position(), size, leftBehind);
                    }
                }
                router.write(dst, offset + done, buffer.asSlice(0, n));
                done += n;
                progress.advance(done);
            }
            io.clear().limit(1);
            if (in.read(io, size) > 0) {
                throw new InvalidMemoryRequestException("File " + file + " grew past " + Sizes.count(size) + ": it changed"
                        + " while loading" + leftBehind);
            }
        } catch (ClosedByInterruptException e) {
            throw new Interrupted(done);
        }
    }

    /**
     * @param written the bytes written into the block before the file ended
     * @param read    the bytes the file had
     * @return the refusal of a file that ended before its size: before the first write the block is
     *         as it was, whatever {@code leftBehind} says of a later failure, and the file may never
     *         have had its size (a file of {@code /sys} says 4096 bytes and holds a line)
     */
    private static InvalidMemoryRequestException ended(Path file, long written, long read, long size, String leftBehind) {
        if (written == 0) {
            return new InvalidMemoryRequestException("File " + file + " ended after " + read + " of the " + Sizes.count(size)
                    + " its size says (a special file, as in /sys, or one cut while loading); nothing loaded");
        }
        return new InvalidMemoryRequestException("File " + file + " ended after " + read + " of " + Sizes.count(size)
                + ": it changed while loading" + leftBehind);
    }

    /**
     * Copies a block's first {@code size} bytes to the start of a file.
     *
     * @param src      the block
     * @param size     the bytes to copy
     * @param out      the open file, written from its position 0
     * @param progress told after every chunk
     * @throws IOException if the file cannot be written
     */
    void save(MemoryHandle src, long size, FileChannel out, TransferProgress progress) throws IOException {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment buffer = arena.allocate(Math.max(1, Math.min(size, chunk)), 64);
            ByteBuffer io = buffer.asByteBuffer();
            long done = 0;
            while (done < size) {
                int n = (int) Math.min(buffer.byteSize(), size - done);
                router.read(src, done, buffer.asSlice(0, n));
                io.clear().limit(n);
                while (io.hasRemaining()) {
                    out.write(io, done + io.position());
                }
                done += n;
                progress.advance(done);
            }
        }
    }
}
