package io.ferrum.memory.cuda;

import jcuda.Pointer;
import jcuda.driver.CUdeviceptr;

/**
 * JCuda pointers and raw addresses. JCuda keeps a pointer's address in a protected field; these
 * subclasses read it (to build FFM views and to check ranges) and make pointers to native memory
 * JCuda did not allocate (an FFM segment, a staging slot).
 */
final class NativePointers {
    private NativePointers() {
    }

    /** The out-parameter of {@code cuMemAlloc}/{@code cuMemAllocManaged}, whose address can be read. */
    static final class DevicePointer extends CUdeviceptr {
        long address() {
            return getNativePointer() + getByteOffset();
        }
    }

    /** The out-parameter of {@code cuMemHostAlloc}, whose address can be read. */
    static final class HostPointer extends Pointer {
        long address() {
            return getNativePointer() + getByteOffset();
        }
    }

    /** A pointer to host memory at a known address (an FFM native segment). */
    static final class HostAddress extends Pointer {
        HostAddress(long address) {
            super(address);
        }
    }
}
