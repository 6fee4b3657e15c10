package io.ferrum.memory.monitor;

import static io.ferrum.memory.monitor.MemoryMonitorTest.CPU1;
import static io.ferrum.memory.monitor.MemoryMonitorTest.CPU2;
import static io.ferrum.memory.monitor.MemoryMonitorTest.MiB;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryHandle;
import io.ferrum.memory.api.MemoryTransfer;
import io.ferrum.memory.pool.PooledMemoryManager;
import io.ferrum.memory.strategy.bestfit.BestFitStrategy;

/** The router's messages say "1 byte", not "1 bytes": a person reads them at the shell. */
class ByteCountWordingTest {
    private final MemoryMonitorTest setup = new MemoryMonitorTest();

    @AfterEach
    void close() throws Exception {
        setup.closeAll();
    }

    @Test
    void aCopyOfOneByteBetweenDevicesOutsideABlockOfOneByteSaysByte() {
        MemoryMonitor mon = setup.monitor("");
        PooledMemoryManager a = setup.device(CPU1, 4 * MiB);
        PooledMemoryManager b = setup.device(CPU2, 4 * MiB);
        mon.addManager(a, setup.props(CPU1, 0));
        mon.addManager(b, setup.props(CPU2, 0));
        MemoryHandle src = a.allocate(1, CPU1);
        MemoryHandle dst = b.allocate(1, CPU2);
        InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class,
                () -> mon.copy(new MemoryTransfer(src, dst, 1, 1, 0)));
        assertEquals("Copy of 1 byte at source offset 1 falls outside source block " + src + " of 1 byte on cpu:1",
                e.getMessage());
    }

    @Test
    void anAllocationOfOneByteThatNoDeviceAnswersSaysByte() {
        MemoryMonitor mon = setup.monitor("");
        PooledMemoryManager a = setup.device(CPU1, 4 * MiB);
        mon.addManager(a, setup.props(CPU1, 0));
        mon.addStrategy(new BestFitStrategy(), setup.strategyProps("best-fit", 0));
        a.close();
        DeviceUnavailableException e = assertThrows(DeviceUnavailableException.class,
                () -> mon.allocate(1, AllocationRequirements.defaults()));
        assertEquals("No device is available to allocate 1 byte: none of [cpu:1] answers", e.getMessage());
    }
}
