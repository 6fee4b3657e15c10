package io.ferrum.memory.monitor;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.util.HashMap;
import java.util.Map;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.HandleSpace;
import io.ferrum.memory.api.MemoryHandle;

/**
 * Handle routing by space: one {@link PrefixTable} per mask, and the {@link DeviceRegistry} that keeps
 * one table per mask in use, adds and removes managers, and remembers the spaces that went away.
 */
class PrefixTableTest {
    static final long TOP20 = ~((1L << 44) - 1);
    static final long TOP8 = ~((1L << 56) - 1);

    static StubManager stub(int device, HandleSpace space) {
        return new StubManager(Device.cpu(device), space, false, 1000, 0);
    }

    @Test
    void aTableFindsEachManagerByTheBitsUnderItsMaskAndNothingElse() {
        Map<Long, DeviceMemoryManager> byPrefix = new HashMap<>();
        StubManager[] managers = new StubManager[40];
        for (int i = 0; i < managers.length; i++) {
            managers[i] = stub(i, StubManager.poolSpace(i + 1));
            byPrefix.put((long) (i + 1) << 44, managers[i]);
        }
        PrefixTable table = new PrefixTable(TOP20, byPrefix);

        assertEquals(40, table.size());
        for (int i = 0; i < managers.length; i++) {
            long prefix = (long) (i + 1) << 44;
            assertSame(managers[i], table.get(prefix), "the first id of space " + (i + 1));
            assertSame(managers[i], table.get(prefix | 0xABCDEL), "an id inside space " + (i + 1));
            assertSame(managers[i], table.get(prefix | ((1L << 44) - 1)), "the last id of space " + (i + 1));
        }
        assertNull(table.get(41L << 44), "a prefix no manager has");
        assertNull(table.get(0x1234), "an id under prefix zero, which no manager has here");
    }

    @Test
    void prefixZeroIsAPrefixLikeAnyOther() {
        StubManager zero = stub(0, new HandleSpace(0, TOP20));
        PrefixTable table = new PrefixTable(TOP20, Map.of(0L, zero));

        assertSame(zero, table.get(42));
        assertNull(table.get(1L << 44));
    }

    @Test
    void anEmptyTableFindsNothing() {
        assertNull(new PrefixTable(TOP20, Map.of()).get(5L << 44));
        assertNull(new PrefixTable(0, Map.of()).get(0));
    }

    @Test
    void theRegistryRoutesEachMaskThroughItsOwnTable() {
        DeviceRegistry registry = new DeviceRegistry();
        StubManager a = stub(1, StubManager.poolSpace(1));
        StubManager b = stub(2, StubManager.poolSpace(2));
        // A manager of another layout: the top 8 bits are its number; 0x03 << 56 lies inside no
        // 20-bit space in use here (those have 0x00 as their top byte).
        StubManager wide = stub(3, new HandleSpace(0x03L << 56, TOP8));
        StubManager any = stub(4, HandleSpace.ANY);
        for (StubManager m : new StubManager[] {a, b, wide, any}) {
            registry.add(new DeviceRegistry.Entry(m.device(), m, DeviceRegistry.spaceOf(m), 0, 1, false));
        }

        assertSame(a, registry.ownerOf(new MemoryHandle((1L << 44) | 7)));
        assertSame(b, registry.ownerOf(new MemoryHandle((2L << 44) | 7)));
        assertSame(wide, registry.ownerOf(new MemoryHandle((0x03L << 56) | (5L << 44) | 7)),
                "an id of the other layout is found in that layout's own table");
        assertNull(registry.ownerOf(new MemoryHandle(9L << 44)),
                "a manager without a space is asked, and the stub owns nothing outside its (unbounded) space");
    }

    @Test
    void aRemovedManagersHandlesAreNoLongerRoutedAndAreReportedAsDeparted() {
        DeviceRegistry registry = new DeviceRegistry();
        StubManager a = stub(1, StubManager.poolSpace(1));
        StubManager b = stub(2, StubManager.poolSpace(2));
        registry.add(new DeviceRegistry.Entry(a.device(), a, a.space, 0, 1, false));
        registry.add(new DeviceRegistry.Entry(b.device(), b, b.space, 0, 2, false));
        MemoryHandle ofA = new MemoryHandle((1L << 44) | 3);

        DeviceRegistry.Change change = registry.remove(a.device(), a, false);

        assertEquals(true, change.removed());
        assertNull(registry.ownerOf(ofA));
        assertEquals(Device.cpu(1), registry.departedDevice(ofA.id()));
        assertSame(b, registry.ownerOf(new MemoryHandle((2L << 44) | 3)), "the other manager still routes");
        assertNull(registry.departedDevice((2L << 44) | 3));

        registry.add(new DeviceRegistry.Entry(a.device(), a, a.space, 0, 3, false));
        assertSame(a, registry.ownerOf(ofA), "back again");
        assertNull(registry.departedDevice(ofA.id()), "a space that came back is no longer departed");
    }

    @Test
    void overlappingClaimsOfOneDeviceAllRouteTheirHandlesAndTheFirstInPrecedenceServes() {
        DeviceRegistry registry = new DeviceRegistry();
        Device cpu1 = Device.cpu(1);
        StubManager low = new StubManager(cpu1, StubManager.poolSpace(1), false, 1000, 0);
        StubManager high = new StubManager(cpu1, StubManager.poolSpace(2), false, 1000, 0);
        StubManager byHand = new StubManager(cpu1, StubManager.poolSpace(3), false, 1000, 0);

        registry.add(new DeviceRegistry.Entry(cpu1, low, low.space, 0, 1, false));
        DeviceRegistry.Change replaced = registry.add(new DeviceRegistry.Entry(cpu1, high, high.space, 5, 2, false));
        assertSame(low, replaced.before());
        assertSame(high, replaced.after(), "the higher ranking serves");
        registry.add(new DeviceRegistry.Entry(cpu1, byHand, byHand.space, Integer.MAX_VALUE, -1, true));
        assertSame(byHand, registry.active().get(cpu1), "a manager registered by hand comes first");

        assertSame(low, registry.ownerOf(new MemoryHandle(1L << 44 | 1)), "a manager that does not serve still routes its handles");
        assertSame(high, registry.ownerOf(new MemoryHandle(2L << 44 | 1)));

        registry.remove(cpu1, null, true);
        assertSame(high, registry.active().get(cpu1));
        assertNull(registry.ownerOf(new MemoryHandle(3L << 44 | 1)));
        assertEquals(cpu1, registry.departedDevice(3L << 44 | 1));
    }

    @Test
    void aManagerThatFailsToNameItsSpaceIsAskedWhetherItOwnsAHandle() {
        StubManager failing = new StubManager(Device.cpu(7), StubManager.poolSpace(7), false, 1000, 0) {
            @Override
            public HandleSpace handleSpace() {
                throw new IllegalStateException("broken plugin");
            }
        };

        assertEquals(HandleSpace.ANY, DeviceRegistry.spaceOf(failing));
        DeviceRegistry registry = new DeviceRegistry();
        registry.add(new DeviceRegistry.Entry(failing.device(), failing, DeviceRegistry.spaceOf(failing), 0, 1, false));
        assertSame(failing, registry.ownerOf(new MemoryHandle(7L << 44 | 1)), "found through owns()");
    }
}
