package io.ferrum.memory.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.TreeSet;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

class DeviceTest {

    @ParameterizedTest
    @CsvSource({
        "cpu, cpu, 0",
        "cpu:1, cpu, 1",
        "cuda:0, cuda, 0",
        "rocm:2, rocm, 2",
        "metal, metal, 0",
        "'  CUDA:3 ', cuda, 3",
        "npu:7, npu, 7",
        "my-accel_2:12, my-accel_2, 12",
    })
    void parseAcceptsKindAndKindIndex(String text, String kind, int index) {
        Device device = Device.parse(text);
        assertEquals(kind, device.kind());
        assertEquals(index, device.index());
    }

    @Test
    void factoriesMatchParse() {
        assertEquals(Device.parse("cpu"), Device.cpu());
        assertEquals(Device.parse("cpu:4"), Device.cpu(4));
        assertEquals(Device.parse("cuda:1"), Device.cuda(1));
        assertEquals(Device.parse("rocm:2"), Device.rocm(2));
        assertEquals(Device.parse("metal"), Device.metal());
    }

    @Test
    void toStringRoundTripsThroughParse() {
        for (Device d : List.of(Device.cpu(), Device.cpu(9), Device.cuda(0), Device.rocm(3), Device.metal(),
                new Device("npu", 5))) {
            assertEquals(d, Device.parse(d.toString()), d.toString());
        }
        assertEquals("cpu:0", Device.cpu().toString());
        assertEquals("cuda:1", Device.cuda(1).toString());
        assertEquals("metal:0", Device.metal().toString());
    }

    @Test
    void gpuKindsAreCudaRocmAndMetalOnly() {
        assertTrue(Device.cuda(0).isGpu());
        assertTrue(Device.rocm(1).isGpu());
        assertTrue(Device.metal().isGpu());
        assertFalse(Device.cpu().isGpu());
        assertFalse(new Device("npu", 0).isGpu());
        assertTrue(Device.cpu(2).isCpu());
        assertFalse(Device.cuda(0).isCpu());
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "  ", ":0", "cpu:", "cpu:-1", "cpu:x", "cpu:1:2", "1cpu", "c pu", "cpu:99999999999", "gpu!:0"})
    void parseRejectsMalformedTextNamingIt(String text) {
        InvalidMemoryRequestException e = assertThrows(InvalidMemoryRequestException.class, () -> Device.parse(text));
        assertTrue(e.getMessage().contains("'"), e.getMessage());
    }

    @Test
    void parseRejectsNull() {
        assertThrows(InvalidMemoryRequestException.class, () -> Device.parse(null));
    }

    @Test
    void constructorRejectsNegativeIndexAndUpperCaseKind() {
        InvalidMemoryRequestException negative = assertThrows(InvalidMemoryRequestException.class, () -> Device.cuda(-1));
        assertTrue(negative.getMessage().contains("-1"));
        assertThrows(InvalidMemoryRequestException.class, () -> new Device("CPU", 0));
        assertThrows(InvalidMemoryRequestException.class, () -> new Device(null, 0));
    }

    @Test
    void ordersByKindThenIndex() {
        TreeSet<Device> sorted = new TreeSet<>(List.of(Device.cuda(1), Device.cpu(1), Device.cuda(0), Device.cpu()));
        assertEquals(List.of(Device.cpu(), Device.cpu(1), Device.cuda(0), Device.cuda(1)), List.copyOf(sorted));
    }
}
