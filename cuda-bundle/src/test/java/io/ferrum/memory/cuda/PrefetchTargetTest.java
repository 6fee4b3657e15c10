package io.ferrum.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;

/** Where a prefetch of managed memory goes, by its target; no driver. */
class PrefetchTargetTest {

    /** Review defect: a prefetch of a cuda:0 block to cuda:1 moved it to cuda:0, and one to rocm:0 too. */
    @Test
    void aPrefetchGoesToItsTargetOrNowhere() {
        Device self = Device.cuda(0);
        assertEquals(ManagedHints.CPU_ORDINAL, ManagedHints.prefetchOrdinal(Device.cpu(0), self));
        assertEquals(ManagedHints.CPU_ORDINAL, ManagedHints.prefetchOrdinal(Device.cpu(3), self));
        assertEquals(0, ManagedHints.prefetchOrdinal(Device.cuda(0), self));
        assertEquals(1, ManagedHints.prefetchOrdinal(Device.cuda(1), self), "cuda:1 is where the block will be used");
        assertEquals(ManagedHints.NO_PREFETCH, ManagedHints.prefetchOrdinal(Device.rocm(0), self),
                "no CUDA device: nothing to move the block close to");
    }
}
