package io.ferrum.memory.api;

import java.util.Objects;

/**
 * A copy of {@code size} bytes from {@code src} at {@code srcOffset} to {@code dst} at
 * {@code dstOffset}. Validated here for sign; the manager that executes it checks the bounds against
 * the blocks.
 *
 * <p>A size of zero is a valid no-op (as for {@code memcpy}).
 *
 * @param src       source handle, not null
 * @param dst       destination handle, not null
 * @param size      bytes to copy, zero or more
 * @param srcOffset byte offset into the source block, zero or more
 * @param dstOffset byte offset into the destination block, zero or more
 */
public record MemoryTransfer(MemoryHandle src, MemoryHandle dst, long size, long srcOffset, long dstOffset) {

    /**
     * @throws InvalidMemoryRequestException on a null handle or a negative size or offset
     */
    public MemoryTransfer {
        if (src == null || dst == null) {
            throw new InvalidMemoryRequestException("Invalid transfer: source and destination handles are required (src="
                    + src + ", dst=" + dst + ")");
        }
        if (size < 0) {
            throw new InvalidMemoryRequestException("Invalid transfer size " + size + " bytes: must be zero or more");
        }
        if (srcOffset < 0 || dstOffset < 0) {
            throw new InvalidMemoryRequestException("Invalid transfer offsets (src " + srcOffset + ", dst " + dstOffset
                    + "): offsets must be zero or more");
        }
    }

    /**
     * @param src  source handle
     * @param dst  destination handle
     * @param size bytes to copy
     * @return a transfer with both offsets 0
     */
    public static MemoryTransfer of(MemoryHandle src, MemoryHandle dst, long size) {
        return new MemoryTransfer(src, dst, size, 0, 0);
    }

    /**
     * @param offset byte offset into the source block
     * @return a copy of this transfer with that source offset
     */
    public MemoryTransfer withSrcOffset(long offset) {
        return new MemoryTransfer(src, dst, size, offset, dstOffset);
    }

    /**
     * @param offset byte offset into the destination block
     * @return a copy of this transfer with that destination offset
     */
    public MemoryTransfer withDstOffset(long offset) {
        return new MemoryTransfer(src, dst, size, srcOffset, offset);
    }

    /** @return true when source and destination are the same handle */
    public boolean isWithinOneBlock() {
        return Objects.equals(src, dst);
    }
}
