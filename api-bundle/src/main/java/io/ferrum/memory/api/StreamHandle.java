package io.ferrum.memory.api;

/**
 * An ordered queue of asynchronous operations on one device. Operations submitted to one stream run
 * in submission order; operations on different streams may overlap.
 *
 * @param id the opaque id; {@code 0} is the device's default stream
 */
public record StreamHandle(long id) {

    /** The default stream of every device: synchronous with respect to the caller. */
    public static final StreamHandle DEFAULT = new StreamHandle(0);

    /** @return true for {@link #DEFAULT} */
    public boolean isDefault() {
        return id == 0;
    }
}
