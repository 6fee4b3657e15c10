package io.ferrum.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;

import jcuda.driver.CUmem_advise;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryUsageHint;

/**
 * Which driver calls the managed-memory hints make, over a fake driver that records them (and
 * answers the concurrent-managed-access attribute per GPU); {@link ManagedHints} is the real one.
 */
class ManagedHintsTest {
    private static final CudaChunk MANAGED = new CudaChunk(ChunkKind.MANAGED, new NativePointers.DevicePointer(),
            0x10000, 0x10000, 1 << 20, null, null);
    private static final CudaChunk DEVICE = new CudaChunk(ChunkKind.DEVICE, new NativePointers.DevicePointer(),
            0x20000, 0, 1 << 20, null, null);

    /** Records the calls; GPUs in {@code concurrent} have concurrent managed access. */
    static final class RecordingDriver implements ManagedHints.Driver {
        final List<String> calls = new ArrayList<>();
        private final Set<Integer> concurrent;

        RecordingDriver(Set<Integer> concurrent) {
            this.concurrent = concurrent;
        }

        @Override
        public boolean concurrentManagedAccess(int ordinal) {
            calls.add("attribute cuda:" + ordinal);
            return concurrent.contains(ordinal);
        }

        @Override
        public void prefetch(CudaChunk chunk, long offset, long bytes, int ordinal) {
            calls.add("prefetch " + offset + "+" + bytes + " to " + ordinal);
        }

        @Override
        public void advise(CudaChunk chunk, long offset, long bytes, int advice) {
            calls.add("advise " + offset + "+" + bytes + " " + advice);
        }
    }

    /**
     * Review defect: on a GPU without concurrent managed access (Windows, WSL, before Pascal) the
     * driver refuses cuMemPrefetchAsync and cuMemAdvise, and prefetch / setUsageHint of a MAPPED
     * block threw a MemoryException a caller cannot avoid, for calls the API calls hints.
     */
    @Test
    void withoutConcurrentManagedAccessHintsAreNoOpsAndTheAttributeIsAskedOnce() {
        RecordingDriver driver = new RecordingDriver(Set.of());
        ManagedHints hints = new ManagedHints(Device.cuda(0), driver);
        hints.prefetch(MANAGED, 0, 4096, Device.cuda(0));
        hints.prefetch(MANAGED, 0, 4096, Device.cpu(0));
        hints.advise(MANAGED, 0, 4096, MemoryUsageHint.READ_MOSTLY);
        hints.advise(MANAGED, 0, 4096, MemoryUsageHint.RESIDENT);
        assertEquals(List.of("attribute cuda:0"), driver.calls);
    }

    /**
     * Review finding: managed memory was handed to the engine as host memory whatever the GPU, so a
     * view of a MAPPED block was the memory itself. Without concurrent managed access a CPU access
     * while the GPU runs any work of the context faults (a JVM crash); such a GPU's managed memory
     * now stages like device memory. Pinned memory is always the CPU's, device memory never.
     */
    @Test
    void theCpuAddressesManagedMemoryOnlyWithConcurrentManagedAccess() {
        CudaChunk pinned = new CudaChunk(ChunkKind.PINNED, new NativePointers.DevicePointer(), 0x30000, 0x30000,
                1 << 20, null, null);
        RecordingDriver without = new RecordingDriver(Set.of());
        ManagedHints old = new ManagedHints(Device.cuda(0), without);
        assertEquals(List.of(false, true, false),
                List.of(old.hostMayAddress(MANAGED), old.hostMayAddress(pinned), old.hostMayAddress(DEVICE)));
        RecordingDriver with = new RecordingDriver(Set.of(1));
        ManagedHints recent = new ManagedHints(Device.cuda(1), with);
        assertEquals(List.of(true, true, false),
                List.of(recent.hostMayAddress(MANAGED), recent.hostMayAddress(pinned), recent.hostMayAddress(DEVICE)));
        recent.hostMayAddress(MANAGED);
        assertEquals(List.of("attribute cuda:1"), with.calls, "asked once");
    }

    /** A prefetch to another GPU needs the attribute there too (and the stream's GPU's, this one). */
    @Test
    void aPrefetchToAGpuWithoutConcurrentManagedAccessIsANoOp() {
        RecordingDriver driver = new RecordingDriver(Set.of(0));
        ManagedHints hints = new ManagedHints(Device.cuda(0), driver);
        hints.prefetch(MANAGED, 0, 4096, Device.cuda(1));
        hints.prefetch(MANAGED, 4096, 4096, Device.cuda(1));
        hints.prefetch(MANAGED, 0, 4096, Device.cuda(0));
        hints.prefetch(MANAGED, 0, 4096, Device.cpu(0));
        assertEquals(List.of("attribute cuda:0", "attribute cuda:1", "prefetch 0+4096 to 0",
                "prefetch 0+4096 to " + ManagedHints.CPU_ORDINAL), driver.calls);
    }

    @Test
    void withConcurrentManagedAccessHintsReachTheDriverForManagedMemoryOnly() {
        RecordingDriver driver = new RecordingDriver(Set.of(0, 1));
        ManagedHints hints = new ManagedHints(Device.cuda(0), driver);
        hints.prefetch(DEVICE, 0, 4096, Device.cuda(0));
        hints.advise(DEVICE, 0, 4096, MemoryUsageHint.READ_MOSTLY);
        hints.prefetch(MANAGED, 0, 4096, Device.rocm(0));
        hints.advise(MANAGED, 0, 4096, MemoryUsageHint.SEQUENTIAL);
        hints.prefetch(MANAGED, 0, 4096, Device.cuda(1));
        hints.advise(MANAGED, 8192, 4096, MemoryUsageHint.READ_MOSTLY);
        assertEquals(List.of("attribute cuda:0", "attribute cuda:1", "prefetch 0+4096 to 1",
                "advise 8192+4096 " + CUmem_advise.CU_MEM_ADVISE_SET_READ_MOSTLY), driver.calls);
    }

    /** The engine frees a hinted block (pool SPI 2.4): both advices this class sets are undone. */
    @Test
    void unadviseUndoesReadMostlyAndThePreferredLocationOfManagedMemoryOnly() {
        RecordingDriver driver = new RecordingDriver(Set.of(0));
        ManagedHints hints = new ManagedHints(Device.cuda(0), driver);
        hints.unadvise(DEVICE, 0, 4096);
        hints.unadvise(MANAGED, 8192, 4096);
        assertEquals(List.of("attribute cuda:0", "advise 8192+4096 " + CUmem_advise.CU_MEM_ADVISE_UNSET_READ_MOSTLY,
                "advise 8192+4096 " + CUmem_advise.CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION), driver.calls);

        RecordingDriver without = new RecordingDriver(Set.of());
        new ManagedHints(Device.cuda(0), without).unadvise(MANAGED, 0, 4096);
        assertEquals(List.of("attribute cuda:0"), without.calls, "nothing was set there, nothing to undo");
    }
}
