package io.ferrum.memory.cuda;

import io.ferrum.memory.api.InvalidMemoryRequestException;

/**
 * The CUDA backend's own settings of one device, besides the pool's.
 *
 * @param stagingSlots     page-locked buffers in the staging ring, 2 to 64 (two let the CPU fill one
 *                         while the DMA engine moves the other)
 * @param stagingSlotBytes bytes per buffer, 64 KiB to 1 GiB, a multiple of 4096; also the size of the
 *                         bounce buffer of overlapping device copies
 */
record CudaSettings(int stagingSlots, long stagingSlotBytes) {
    static final int MIN_SLOTS = 2;
    static final int MAX_SLOTS = 64;
    static final long MIN_SLOT_BYTES = 64L << 10;
    static final long MAX_SLOT_BYTES = 1L << 30;

    /** Four slots of 4 MiB: 16 MiB of pinned memory per device, made on the first staged copy. */
    static final CudaSettings DEFAULTS = new CudaSettings(4, 4L << 20);

    /** @throws InvalidMemoryRequestException naming the bad value and the range it must be in */
    CudaSettings {
        if (stagingSlots < MIN_SLOTS || stagingSlots > MAX_SLOTS) {
            throw new InvalidMemoryRequestException("Invalid stagingSlots " + stagingSlots + ": use " + MIN_SLOTS
                    + " to " + MAX_SLOTS);
        }
        if (stagingSlotBytes < MIN_SLOT_BYTES || stagingSlotBytes > MAX_SLOT_BYTES || stagingSlotBytes % 4096 != 0) {
            throw new InvalidMemoryRequestException("Invalid stagingSlotBytes " + stagingSlotBytes + ": use a multiple"
                    + " of 4096 from " + MIN_SLOT_BYTES + " (64 KiB) to " + MAX_SLOT_BYTES + " (1 GiB)");
        }
    }
}
