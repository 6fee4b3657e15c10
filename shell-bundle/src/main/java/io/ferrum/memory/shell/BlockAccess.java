package io.ferrum.memory.shell;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.Locale;
import java.util.Optional;

import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;
import io.ferrum.memory.api.MemoryRouter;

/**
 * The byte commands' way to a block's bytes: the router's {@code write} and {@code read}, which pin
 * the block for the copy only. No command maps a block to touch its bytes, so a command never
 * changes whether a block is mapped, and defragmentation may move a block between two commands.
 * This class also holds the one rule (and message) for a range a command shows, and the one cap on
 * how many bytes a command prints.
 */
final class BlockAccess {
    /** Most bytes {@code mem:dump} and {@code mem:read} print (4,096 lines); {@code mem:save} takes any size. */
    static final long MAX_SHOWN = 64 * 1024;
    /** Size of the pattern {@code mem:fill} writes again and again: large copies, little heap. */
    private static final int FILL_CHUNK = 1 << 20;

    private BlockAccess() {
    }

    /**
     * @param router the router
     * @param handle a handle of any device
     * @return the block's information
     * @throws RuntimeException the router's own error if no device knows the handle: it alone knows
     *                          whether the handle was freed or its device went away
     */
    static MemoryHandleInfo info(MemoryRouter router, MemoryHandle handle) {
        Optional<MemoryHandleInfo> info = router.handleInfo(handle);
        if (info.isPresent()) {
            return info.get();
        }
        // handleInfo only says "empty"; a read of no bytes makes the router say why (its contract:
        // InvalidHandleException for a freed or unknown handle, DeviceUnavailableException for one
        // whose device went away), the same error mem:write and mem:read give. It copies nothing.
        router.read(handle, 0, MemorySegment.ofArray(new byte[0]));
        // The read passed: the block appeared between the two calls (a handle typed before its
        // mem:alloc answered). Its information, if it is still there.
        return router.handleInfo(handle).orElseThrow(() -> new InvalidMemoryRequestException("Handle " + handle
                + " is not known to any device (freed, or never allocated)"));
    }

    /**
     * The part of a block a command shows: from {@code offset}, {@code length} bytes but never
     * past the block's end.
     *
     * @param handle    the block, named in the message
     * @param blockSize the block's size in bytes
     * @param offset    the first byte, at most {@code blockSize}
     * @param length    the bytes asked for, not negative
     * @return the bytes there are from {@code offset}, at most {@code length}
     * @throws InvalidMemoryRequestException naming the offset, the handle and the size if the
     *                                       offset lies past the end
     */
    static long clamp(MemoryHandle handle, long blockSize, long offset, long length) {
        return clamp(handle, blockSize, offset, length, "");
    }

    /**
     * {@link #clamp(MemoryHandle, long, long, long)} for a command whose refusals say what did not
     * happen.
     *
     * @param outcome the end of the message, e.g. {@code "; nothing loaded"}
     */
    static long clamp(MemoryHandle handle, long blockSize, long offset, long length, String outcome) {
        if (offset > blockSize) {
            throw new InvalidMemoryRequestException("Offset " + offset + " is past the end of " + handle + " ("
                    + Sizes.count(blockSize) + ")" + outcome);
        }
        return Math.min(length, blockSize - offset);
    }

    /**
     * Reads bytes of a block to print them.
     *
     * @param router the router
     * @param handle the block
     * @param offset the first byte
     * @param length how many, at most {@link #MAX_SHOWN}; the range must lie inside the block
     * @return a copy of the bytes, exactly {@code length} of them
     * @throws InvalidMemoryRequestException if {@code length} is over the cap (nothing is read), or
     *                                       the router's error for a range outside the block
     */
    static MemorySegment show(MemoryRouter router, MemoryHandle handle, long offset, long length) {
        if (length > MAX_SHOWN) {
            throw new InvalidMemoryRequestException("Cannot show " + length + " bytes of " + handle + ": at most "
                    + MAX_SHOWN + " at a time; mem:save writes a whole block to a file");
        }
        MemorySegment bytes = MemorySegment.ofArray(new byte[(int) length]);
        router.read(handle, offset, bytes);
        return bytes;
    }

    /**
     * Sets every byte of a block, in writes of at most {@value #FILL_CHUNK} bytes. An interrupt of the
     * calling thread (Ctrl-C at the console) stops it between two writes: a large block takes minutes.
     *
     * @param router the router
     * @param handle the block
     * @param value  the byte
     * @return the bytes written: the block's size
     * @throws InterruptedException if the thread was interrupted before the last write, saying how
     *                              many bytes were filled; the interrupt stays set
     */
    static long fill(MemoryRouter router, MemoryHandle handle, byte value) throws InterruptedException {
        long size = info(router, handle).size();
        byte[] pattern = new byte[(int) Math.min(size, FILL_CHUNK)];
        Arrays.fill(pattern, value);
        MemorySegment chunk = MemorySegment.ofArray(pattern);
        for (long done = 0; done < size; done += pattern.length) {
            if (Thread.currentThread().isInterrupted()) {
                throw new InterruptedException(String.format(Locale.ROOT, "interrupted: %s of the %s of %s were filled"
                        + " with 0x%02x; the rest of the block is as it was", Sizes.amount(done), Sizes.count(size), handle, value));
            }
            router.write(handle, done, chunk.asSlice(0, Math.min(pattern.length, size - done)));
        }
        return size;
    }
}
