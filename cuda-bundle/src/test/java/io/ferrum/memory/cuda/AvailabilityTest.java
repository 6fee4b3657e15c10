package io.ferrum.memory.cuda;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

import jcuda.CudaException;
import jcuda.driver.CUresult;

/** The probe's reasons, with the driver calls failing the ways a machine without a GPU makes them fail. */
class AvailabilityTest {

    private static DriverCalls calls(int initResult, int count) {
        return calls(initResult, Availability.MIN_DRIVER_VERSION, count);
    }

    private static DriverCalls calls(int initResult, int driverVersion, int count) {
        return new DriverCalls() {
            @Override
            public int init() {
                return initResult;
            }

            @Override
            public int driverVersion(int[] out) {
                out[0] = driverVersion;
                return CUresult.CUDA_SUCCESS;
            }

            @Override
            public int deviceCount(int[] out) {
                out[0] = count;
                return CUresult.CUDA_SUCCESS;
            }
        };
    }

    @Test
    void missingDriverLibraryIsNoDriverInOneLine() {
        Availability a = Availability.probe(new DriverCalls() {
            @Override
            public int init() {
                throw new UnsatisfiedLinkError("libcuda.so.1: cannot open shared object file\nsecond line");
            }

            @Override
            public int driverVersion(int[] version) {
                throw new AssertionError("not reached");
            }

            @Override
            public int deviceCount(int[] count) {
                throw new AssertionError("not reached");
            }
        });
        assertFalse(a.available());
        assertEquals("inactive: no CUDA driver (UnsatisfiedLinkError: libcuda.so.1: cannot open shared object file)",
                a.reason());
    }

    @Test
    void laterCallsAfterAFailedLoadAreNoDriverToo() {
        Availability a = Availability.probe(new DriverCalls() {
            @Override
            public int init() {
                throw new NoClassDefFoundError("Could not initialize class jcuda.driver.JCudaDriver");
            }

            @Override
            public int driverVersion(int[] version) {
                throw new AssertionError("not reached");
            }

            @Override
            public int deviceCount(int[] count) {
                return 0;
            }
        });
        assertTrue(a.reason().startsWith("inactive: no CUDA driver (NoClassDefFoundError"), a.reason());
    }

    @Test
    void noDeviceResultIsNoDevice() {
        Availability a = Availability.probe(calls(CUresult.CUDA_ERROR_NO_DEVICE, 0));
        assertEquals(0, a.devices());
        assertEquals("inactive: a CUDA driver is installed but there is no CUDA device (CUDA_ERROR_NO_DEVICE)", a.reason());
    }

    @Test
    void noDeviceExceptionIsNoDevice() {
        Availability a = Availability.probe(new DriverCalls() {
            @Override
            public int init() {
                throw new CudaException("CUDA_ERROR_NO_DEVICE");
            }

            @Override
            public int driverVersion(int[] version) {
                throw new AssertionError("not reached");
            }

            @Override
            public int deviceCount(int[] count) {
                return 0;
            }
        });
        assertTrue(a.reason().contains("no CUDA device"), a.reason());
    }

    @Test
    void zeroDevicesIsNoDevice() {
        assertEquals("inactive: a CUDA driver is installed but there is no CUDA device (the CUDA driver reports 0 devices)",
                Availability.probe(calls(CUresult.CUDA_SUCCESS, 0)).reason());
    }

    @Test
    void otherDriverFailureNamesTheResult() {
        assertEquals("inactive: the CUDA driver failed to start (CUDA_ERROR_NOT_INITIALIZED)",
                Availability.probe(calls(CUresult.CUDA_ERROR_NOT_INITIALIZED, 0)).reason());
    }

    /**
     * A driver older than the CUDA 12.0 API JCuda's library is built against: its first call of a
     * function that driver lacks would end the JVM, so nothing is served and the reason says why.
     */
    @Test
    void aDriverOlderThanCuda12IsNotServed() {
        Availability a = Availability.probe(calls(CUresult.CUDA_SUCCESS, 11040, 2));
        assertFalse(a.available());
        assertEquals("inactive: the CUDA driver supports CUDA 11.4; JCuda 12.6.0 needs a driver for CUDA 12.0 or newer",
                a.reason());
        assertTrue(Availability.probe(calls(CUresult.CUDA_SUCCESS, 13000, 1)).available(), "a CUDA 13.0 driver is served");
    }

    @Test
    void devicesPresentAreServed() {
        Availability a = Availability.probe(calls(CUresult.CUDA_SUCCESS, 2));
        assertTrue(a.available());
        assertEquals("serving 2 CUDA devices (cuda:0..cuda:1)", a.reason());
    }

    @Test
    void longMessagesAreCut() {
        String quoted = Availability.quote(new UnsatisfiedLinkError("x".repeat(500)));
        assertEquals("UnsatisfiedLinkError: ".length() + Availability.QUOTE_LIMIT + 3, quoted.length());
    }

    @Test
    void conditionCarriesReasonAndId() {
        var props = CudaProbe.properties(new Availability(0, "inactive: no CUDA driver (x)"));
        assertEquals(CudaBackend.UNAVAILABLE, props.get("osgi.condition.id"));
        assertEquals("inactive: no CUDA driver (x)", props.get(CudaBackend.STATUS_PROPERTY));
        assertEquals(CudaBackend.AVAILABLE, CudaProbe.properties(new Availability(1, "serving")).get("osgi.condition.id"));
    }
}
