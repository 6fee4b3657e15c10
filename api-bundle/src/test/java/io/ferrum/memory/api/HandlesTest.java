package io.ferrum.memory.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class HandlesTest {

    @Test
    void zeroHandleIsInvalidEveryOtherIdIsValid() {
        assertFalse(new MemoryHandle(0).isValid());
        assertFalse(MemoryHandle.INVALID.isValid());
        assertTrue(new MemoryHandle(1).isValid());
        assertTrue(new MemoryHandle(-1).isValid());
    }

    @Test
    void handleTextRoundTrips() {
        for (long id : new long[] {1, 0x1_0000_0003L, Long.MAX_VALUE, -1L, Long.MIN_VALUE}) {
            MemoryHandle h = new MemoryHandle(id);
            assertEquals(h, MemoryHandle.parse(h.toString()));
        }
        assertEquals("0x0000000100000003", new MemoryHandle(0x1_0000_0003L).toString());
        assertEquals(new MemoryHandle(42), MemoryHandle.parse("42"));
        assertEquals(new MemoryHandle(0xab), MemoryHandle.parse(" 0XAB "));
    }

    @Test
    void handleParseRejectsGarbage() {
        for (String bad : new String[] {null, "", "0x", "0xzz", "handle", "0x11112222333344445", "+42", "0x+ab", "-1",
            "0x000000000000100001f00001", "0x١٠٠٠٠١f٠٠٠٠١", "١٢", "18446744073709551616"}) {
            assertThrows(InvalidMemoryRequestException.class, () -> MemoryHandle.parse(bad), String.valueOf(bad));
        }
    }

    @Test
    void defaultStreamIsZero() {
        assertEquals(0, StreamHandle.DEFAULT.id());
        assertTrue(StreamHandle.DEFAULT.isDefault());
        assertFalse(new StreamHandle(3).isDefault());
        assertEquals(new EventHandle(7), new EventHandle(7));
        assertNotEquals(new EventHandle(7), new EventHandle(8));
    }

    @Test
    void transferOffsetsDefaultToZeroAndWithersChangeOneField() {
        MemoryHandle a = new MemoryHandle(1);
        MemoryHandle b = new MemoryHandle(2);
        MemoryTransfer t = MemoryTransfer.of(a, b, 100);
        assertEquals(new MemoryTransfer(a, b, 100, 0, 0), t);
        MemoryTransfer shifted = t.withSrcOffset(8).withDstOffset(16);
        assertEquals(new MemoryTransfer(a, b, 100, 8, 16), shifted);
        assertEquals(new MemoryTransfer(a, b, 100, 0, 0), t, "withers must not change the original");
        assertFalse(t.isWithinOneBlock());
        assertTrue(MemoryTransfer.of(a, a, 4).isWithinOneBlock());
        assertEquals(0, MemoryTransfer.of(a, b, 0).size(), "a zero-byte transfer is a valid no-op");
    }

    @Test
    void transferRejectsNegativeValuesAndNullHandles() {
        MemoryHandle a = new MemoryHandle(1);
        assertTrue(assertThrows(InvalidMemoryRequestException.class, () -> MemoryTransfer.of(a, a, -1))
                .getMessage().contains("-1"));
        assertTrue(assertThrows(InvalidMemoryRequestException.class, () -> MemoryTransfer.of(a, a, 1).withSrcOffset(-5))
                .getMessage().contains("-5"));
        assertThrows(InvalidMemoryRequestException.class, () -> MemoryTransfer.of(a, a, 1).withDstOffset(-1));
        assertThrows(InvalidMemoryRequestException.class, () -> MemoryTransfer.of(null, a, 1));
        assertThrows(InvalidMemoryRequestException.class, () -> MemoryTransfer.of(a, null, 1));
    }

    @Test
    void mappingValidates() {
        MemoryHandle a = new MemoryHandle(1);
        MemoryHandle b = new MemoryHandle(2);
        MemoryMapping m = new MemoryMapping(a, b, Device.cpu(), Device.cpu(1), 64);
        assertEquals(64, m.size());
        assertThrows(InvalidMemoryRequestException.class, () -> new MemoryMapping(a, b, Device.cpu(), Device.cpu(1), 0));
        assertThrows(InvalidMemoryRequestException.class, () -> new MemoryMapping(a, null, Device.cpu(), Device.cpu(1), 1));
    }

    @Test
    void exceptionsCarryWhatWentWrongAndShareOneRoot() {
        OutOfDeviceMemoryException oom = new OutOfDeviceMemoryException(Device.cuda(0), 100, 40, "no room");
        assertEquals(100, oom.requestedBytes());
        assertEquals(40, oom.freeBytes());
        assertEquals(Device.cuda(0), oom.device());
        InvalidHandleException bad = new InvalidHandleException(new MemoryHandle(9), "freed");
        assertEquals(new MemoryHandle(9), bad.handle());
        DeviceUnavailableException gone = new DeviceUnavailableException(Device.cpu(2), "stopped");
        assertEquals(Device.cpu(2), gone.device());
        for (RuntimeException e : new RuntimeException[] {oom, bad, gone, new InvalidMemoryRequestException("x")}) {
            assertTrue(e instanceof MemoryException, e.getClass().getName());
        }
    }
}
