package io.ferrum.memory.cuda;

import jcuda.driver.JCudaDriver;

/**
 * The driver calls the probe makes, behind an interface so that tests can make them fail the ways a
 * machine without a GPU does ({@link LinkageError}, {@code CUDA_ERROR_NO_DEVICE}), or answer as an
 * old driver does.
 */
interface DriverCalls {

    /** @return the result code of {@code cuInit(0)} */
    int init();

    /**
     * @param version receives the CUDA version the driver supports, 1000 * major + 10 * minor
     * @return the result code of {@code cuDriverGetVersion}
     */
    int driverVersion(int[] version);

    /**
     * @param count receives the number of devices
     * @return the result code of {@code cuDeviceGetCount}
     */
    int deviceCount(int[] count);

    /**
     * JCuda's driver. Its first call loads JCuda's JNI library and {@code libcuda.so.1}: without a
     * driver it throws {@link UnsatisfiedLinkError}, and every later call {@link
     * NoClassDefFoundError}. JCuda's exceptions stay as the JVM has them (off unless someone turned
     * them on): this backend checks every result code itself.
     */
    DriverCalls JCUDA = new DriverCalls() {
        @Override
        public int init() {
            return JCudaDriver.cuInit(0);
        }

        @Override
        public int driverVersion(int[] version) {
            return JCudaDriver.cuDriverGetVersion(version);
        }

        @Override
        public int deviceCount(int[] count) {
            return JCudaDriver.cuDeviceGetCount(count);
        }
    };
}
