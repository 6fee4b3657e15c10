package io.ferrum.memory.cuda;

import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;

import io.ferrum.memory.pool.DeviceChunk;

/**
 * One reservation from the driver. Every kind has a device pointer (for pinned memory the mapped
 * one, which unified addressing makes equal to the host address); {@code hostAddress} is the
 * address the CPU uses, 0 for device memory.
 *
 * @param kind        where the memory came from, which decides how it is given back
 * @param pointer     the device pointer of byte 0
 * @param address     the pointer's value
 * @param hostAddress the CPU's address of byte 0, 0 when the CPU cannot address it
 * @param size        bytes
 * @param hostPointer the pointer to give to {@code cuMemFreeHost}: the one JCuda's {@code cuMemHostAlloc}
 *                    filled, or one to the address {@link LargeHostAlloc} gave; null for other kinds
 * @param context     the retain of the context it was reserved in (its upstream's): a copy by another
 *                    device's upstream (a peer copy) learns from it whose memory this is; null in
 *                    tests without a GPU
 */
record CudaChunk(ChunkKind kind, CUdeviceptr pointer, long address, long hostAddress, long size,
                 Pointer hostPointer, PrimaryContext context) implements DeviceChunk {

    /** @return the device pointer {@code offset} bytes in */
    CUdeviceptr at(long offset) {
        return pointer.withByteOffset(offset);
    }
}
