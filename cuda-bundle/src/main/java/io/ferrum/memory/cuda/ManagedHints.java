package io.ferrum.memory.cuda;

import java.util.concurrent.ConcurrentHashMap;

import jcuda.driver.CUmem_advise;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryUsageHint;

/**
 * The hints of one GPU's managed memory: prefetch ({@code cuMemPrefetchAsync}) and usage advice
 * ({@code cuMemAdvise}). Both are hints (the API says they never change contents), so where the
 * driver cannot take them they are no-ops, never errors: on memory that is not managed, for a
 * target that is no CUDA destination, and on a GPU whose {@code
 * CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS} is 0 (Windows and WSL, GPUs before Pascal), where
 * the driver refuses both: a prefetch needs the attribute on the GPU whose stream runs it and on a
 * GPU it moves memory to. The attribute is asked once per GPU.
 *
 * <p>The driver calls go through {@link Driver}, so that tests run this logic without a GPU.
 */
final class ManagedHints {
    /** {@link #prefetchOrdinal}: the host ({@code CU_DEVICE_CPU}). */
    static final int CPU_ORDINAL = -1;
    /** {@link #prefetchOrdinal}: no CUDA destination, the hint is a no-op. */
    static final int NO_PREFETCH = -2;

    /** The driver calls behind the hints; the caller's context is current and its stream in use. */
    interface Driver {
        /** @return whether GPU {@code ordinal}'s {@code CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS} is not 0 */
        boolean concurrentManagedAccess(int ordinal);

        /** {@code cuMemPrefetchAsync} of the range to GPU {@code ordinal} or the host ({@link #CPU_ORDINAL}), synchronised. */
        void prefetch(CudaChunk chunk, long offset, long bytes, int ordinal);

        /** {@code cuMemAdvise} of the range with {@code advice} ({@code CUmem_advise}) for this GPU. */
        void advise(CudaChunk chunk, long offset, long bytes, int advice);
    }

    private final Device device;
    private final Driver driver;
    private final ConcurrentHashMap<Integer, Boolean> concurrentAccess = new ConcurrentHashMap<>();

    /**
     * @param device the GPU whose managed memory and streams these hints are for
     * @param driver its driver calls
     */
    ManagedHints(Device device, Driver driver) {
        this.device = device;
        this.driver = driver;
    }

    /**
     * Prefetches managed memory to {@code target} ({@code cuda:N}, this GPU or another, or the host
     * for a cpu target). A no-op for other memory, other targets, and where this GPU or the target
     * GPU lacks concurrent managed access.
     */
    void prefetch(CudaChunk chunk, long offset, long bytes, Device target) {
        int ordinal = prefetchOrdinal(target, device);
        if (chunk.kind() != ChunkKind.MANAGED || bytes == 0 || ordinal == NO_PREFETCH
                || !concurrent(device.index()) || (ordinal != CPU_ORDINAL && !concurrent(ordinal))) {
            return;
        }
        driver.prefetch(chunk, offset, bytes, ordinal);
    }

    /**
     * Managed memory only: READ_MOSTLY sets {@code CU_MEM_ADVISE_SET_READ_MOSTLY}; RESIDENT and
     * WRITE_MOSTLY make this GPU the preferred location; the other hints have no CUDA advice. A
     * no-op where this GPU lacks concurrent managed access.
     */
    void advise(CudaChunk chunk, long offset, long bytes, MemoryUsageHint hint) {
        int advice = advice(hint);
        if (chunk.kind() != ChunkKind.MANAGED || bytes == 0 || advice < 0 || !concurrent(device.index())) {
            return;
        }
        driver.advise(chunk, offset, bytes, advice);
    }

    /**
     * Undoes every advice {@link #advise} may have set on a freed block's range (READ_MOSTLY and
     * the preferred location), so that the next owner of those bytes starts without it. The driver
     * rounds advice out to whole CPU pages, so a neighbour sharing a page loses its advice too: a
     * cost in speed only, as advice never changes contents. Nothing to undo where {@link #advise}
     * set nothing.
     */
    void unadvise(CudaChunk chunk, long offset, long bytes) {
        if (chunk.kind() != ChunkKind.MANAGED || bytes == 0 || !concurrent(device.index())) {
            return;
        }
        driver.advise(chunk, offset, bytes, CUmem_advise.CU_MEM_ADVISE_UNSET_READ_MOSTLY);
        driver.advise(chunk, offset, bytes, CUmem_advise.CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION);
    }

    /**
     * Whether the CPU may address {@code chunk} at any moment, so that the engine may hand out a view
     * of the memory itself ({@code hostSegment}). Pinned memory: always. Managed memory: only where
     * this GPU has concurrent managed access; without it (Windows, WSL, GPUs before Pascal) a CPU
     * access while any work of the context runs on the GPU (another thread's copy, say) faults, which
     * would crash the JVM, so views of it stage through copies as device memory's do. Device memory:
     * never.
     */
    boolean hostMayAddress(CudaChunk chunk) {
        return switch (chunk.kind()) {
            case PINNED -> true;
            case MANAGED -> concurrent(device.index());
            case DEVICE -> false;
        };
    }

    private boolean concurrent(int ordinal) {
        return concurrentAccess.computeIfAbsent(ordinal, driver::concurrentManagedAccess);
    }

    /**
     * @param target where the block will be used; null for this GPU
     * @param self   this upstream's device
     * @return the CUDA ordinal a prefetch to {@code target} moves memory to: the GPU's index for
     *         {@code cuda:N}, {@link #CPU_ORDINAL} for the host, {@link #NO_PREFETCH} for another kind
     */
    static int prefetchOrdinal(Device target, Device self) {
        if (target == null) {
            return self.index();
        }
        if (target.isCpu()) {
            return CPU_ORDINAL;
        }
        return Device.CUDA.equals(target.kind()) ? target.index() : NO_PREFETCH;
    }

    /** @return the {@code CUmem_advise} value for a hint, or -1 where CUDA has none */
    static int advice(MemoryUsageHint hint) {
        return switch (hint) {
            case READ_MOSTLY -> CUmem_advise.CU_MEM_ADVISE_SET_READ_MOSTLY;
            case RESIDENT, WRITE_MOSTLY -> CUmem_advise.CU_MEM_ADVISE_SET_PREFERRED_LOCATION;
            case SEQUENTIAL, RANDOM, TEMPORARY -> -1;
        };
    }
}
