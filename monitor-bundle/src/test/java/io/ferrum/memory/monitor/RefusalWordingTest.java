package io.ferrum.memory.monitor;

import static io.ferrum.memory.monitor.MemoryMonitorTest.CPU1;
import static io.ferrum.memory.monitor.MemoryMonitorTest.MiB;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryType;
import io.ferrum.memory.pool.PooledMemoryManager;
import io.ferrum.memory.strategy.bestfit.BestFitStrategy;

/**
 * A refusal by every device names what was asked for in words, not as the requirements record's
 * {@code toString()}: the shell prints the message as it is ({@code mem:alloc -a 4t 64}).
 */
class RefusalWordingTest {
    private final MemoryMonitorTest setup = new MemoryMonitorTest();

    @AfterEach
    void close() throws Exception {
        setup.closeAll();
    }

    @Test
    void aRefusalByEveryDeviceNamesTheTypeAndAlignmentInWords() {
        MemoryMonitor mon = setup.monitor("");
        PooledMemoryManager a = setup.device(CPU1, 4 * MiB);
        mon.addManager(a, setup.props(CPU1, 0));
        mon.addStrategy(new BestFitStrategy(), setup.strategyProps("best-fit", 0));
        AllocationRequirements req = AllocationRequirements.defaults().withMemoryType(MemoryType.TENSOR)
                .withAlignment(1L << 42);
        InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class, () -> mon.allocate(64, req));
        assertTrue(e.getMessage().startsWith("No device accepts an allocation of 64 bytes (TENSOR, alignment"
                + " 4398046511104 bytes): tried [cpu:1 ("), e.getMessage());
        assertEquals(-1, e.getMessage().indexOf("AllocationRequirements["), e.getMessage());
    }
}
