package io.ferrum.memory.api;

/**
 * The handle ids a manager may issue: every id whose bits under {@link #mask()} equal {@link
 * #prefix()}. A router keeps one table of spaces and sends a handle to the manager whose space
 * contains it, without knowing how any manager lays out its ids. Two live managers never have
 * overlapping bounded spaces.
 *
 * <p>{@link #ANY} (a mask of zero) is the space of a manager that does not say: a router must then
 * ask that manager {@link DeviceMemoryManager#owns(MemoryHandle)}.
 *
 * @param prefix the bits every id of the space has under {@code mask}
 * @param mask   the bits that identify the manager; zero for {@link #ANY}
 */
public record HandleSpace(long prefix, long mask) {

    /** The space of a manager that does not describe its ids. */
    public static final HandleSpace ANY = new HandleSpace(0, 0);

    /**
     * @throws InvalidMemoryRequestException if {@code prefix} has bits outside {@code mask}
     */
    public HandleSpace {
        if ((prefix & ~mask) != 0) {
            throw new InvalidMemoryRequestException("Handle space prefix 0x" + Long.toHexString(prefix)
                    + " has bits outside its mask 0x" + Long.toHexString(mask));
        }
    }

    /**
     * @param id a handle id
     * @return true if a manager with this space may have issued it (always, for {@link #ANY})
     */
    public boolean contains(long id) {
        return (id & mask) == prefix;
    }

    /** @return true unless this is {@link #ANY}: a handle outside a bounded space is certainly foreign */
    public boolean isBounded() {
        return mask != 0;
    }

    /** @return the position of the lowest bit of the mask: ids differ only below it within the space */
    public int shift() {
        return mask == 0 ? 64 : Long.numberOfTrailingZeros(mask);
    }
}
