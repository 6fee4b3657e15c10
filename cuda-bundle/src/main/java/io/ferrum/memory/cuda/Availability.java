package io.ferrum.memory.cuda;

import jcuda.CudaException;
import jcuda.driver.CUresult;

/**
 * What the probe found: how many CUDA devices the driver reports, and a one-line reason that says
 * what is served or why nothing is.
 *
 * @param devices CUDA devices present, zero when the backend stays inactive
 * @param reason  one line, no stack trace: for the log and for {@code mem:backends}
 */
record Availability(int devices, String reason) {
    /** Longest piece of a native error message quoted in the reason. */
    static final int QUOTE_LIMIT = 160;
    /**
     * The oldest driver served: JCuda 12.6.0's JNI library is built against the CUDA 12.0 driver API
     * and binds the driver's functions lazily, on their first call, so a function an older driver
     * lacks ends the process at that call ("symbol lookup error"), not with a {@link LinkageError}.
     */
    static final int MIN_DRIVER_VERSION = 12000;

    /** @return true when at least one device can be served */
    boolean available() {
        return devices > 0;
    }

    /**
     * Asks the driver once. Never throws for a machine without a driver or a device: every way the
     * first calls fail becomes a reason.
     *
     * @param calls the driver (or a test's stand-in that fails as a machine without one does)
     * @return the devices found, or none and why
     */
    static Availability probe(DriverCalls calls) {
        try {
            int rc = calls.init();
            if (rc != CUresult.CUDA_SUCCESS) {
                return fromResult(rc);
            }
            int[] version = new int[1];
            rc = calls.driverVersion(version);
            if (rc != CUresult.CUDA_SUCCESS) {
                return fromResult(rc);
            }
            if (version[0] < MIN_DRIVER_VERSION) {
                return new Availability(0, "inactive: the CUDA driver supports CUDA " + cuda(version[0])
                        + "; JCuda 12.6.0 needs a driver for CUDA " + cuda(MIN_DRIVER_VERSION) + " or newer");
            }
            int[] count = new int[1];
            rc = calls.deviceCount(count);
            if (rc != CUresult.CUDA_SUCCESS) {
                return fromResult(rc);
            }
            if (count[0] <= 0) {
                return noDevice("the CUDA driver reports 0 devices");
            }
            return new Availability(count[0], "serving " + count[0] + " CUDA device" + (count[0] == 1 ? "" : "s")
                    + " (cuda:0" + (count[0] > 1 ? "..cuda:" + (count[0] - 1) : "") + ")");
        } catch (LinkageError e) {
            // UnsatisfiedLinkError on the first call (libcuda.so.1 or JCuda's own library missing),
            // NoClassDefFoundError on any later one: the driver cannot be used in this JVM.
            return new Availability(0, "inactive: no CUDA driver (" + quote(e) + ")");
        } catch (CudaException e) {
            // Only when another bundle turned JCuda's exceptions on: the message is the result's name.
            String message = String.valueOf(e.getMessage());
            return message.contains("CUDA_ERROR_NO_DEVICE") ? noDevice("CUDA_ERROR_NO_DEVICE")
                    : new Availability(0, "inactive: the CUDA driver failed (" + quote(e) + ")");
        }
    }

    private static Availability fromResult(int rc) {
        if (rc == CUresult.CUDA_ERROR_NO_DEVICE) {
            return noDevice("CUDA_ERROR_NO_DEVICE");
        }
        return new Availability(0, "inactive: the CUDA driver failed to start (" + CUresult.stringFor(rc) + ")");
    }

    /** @return a driver version as CUDA writes it: 11040 is 11.4 */
    private static String cuda(int version) {
        return version / 1000 + "." + version % 1000 / 10;
    }

    private static Availability noDevice(String detail) {
        return new Availability(0, "inactive: a CUDA driver is installed but there is no CUDA device (" + detail + ")");
    }

    /** @return the throwable's class and the first line of its message, shortened */
    static String quote(Throwable t) {
        String message = t.getMessage() == null ? "" : t.getMessage().strip();
        int newline = message.indexOf('\n');
        if (newline >= 0) {
            message = message.substring(0, newline).strip();
        }
        if (message.length() > QUOTE_LIMIT) {
            message = message.substring(0, QUOTE_LIMIT) + "...";
        }
        return t.getClass().getSimpleName() + (message.isEmpty() ? "" : ": " + message);
    }
}
