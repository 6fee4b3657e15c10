package io.ferrum.memory.shell;

import java.lang.foreign.MemorySegment;
import java.util.function.Function;

import io.ferrum.memory.api.AdvancedMemoryManager;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryAccess;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryHandleInfo;

/**
 * CPU access to a block's bytes for the byte commands: the one "map, use, unmap" sequence and the
 * one range check (with its message). A block the user mapped with {@code mem:map} stays mapped
 * after a command reads or writes it; a block the command mapped is unmapped again, so that
 * defragmentation may move it.
 */
final class BlockAccess {
    private BlockAccess() {
    }

    /**
     * Maps a block, runs {@code use} on its bytes, and unmaps it unless it was mapped before.
     *
     * @param manager the block's manager
     * @param handle  the block
     * @param access  how {@code use} touches the bytes
     * @param use     what to do with the bytes; the segment is valid only during the call
     * @return what {@code use} returned
     */
    static <T> T use(AdvancedMemoryManager manager, MemoryHandle handle, MemoryAccess access, Function<MemorySegment, T> use) {
        boolean wasMapped = manager.handleInfo(handle).map(MemoryHandleInfo::mapped).orElse(false);
        MemorySegment bytes = manager.mapMemory(handle, access);
        try {
            return use.apply(bytes);
        } finally {
            if (!wasMapped) {
                manager.unmapMemory(handle);
            }
        }
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
        if (offset > blockSize) {
            throw new InvalidMemoryRequestException("Offset " + offset + " is past the end of " + handle + " ("
                    + blockSize + " bytes)");
        }
        return Math.min(length, blockSize - offset);
    }
}
