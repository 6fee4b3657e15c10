package io.ferrum.memory.pool.internal;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * Device-wide accounting of one manager: what its pools reserved from the upstream, what their
 * blocks use, how many blocks are live. Lock-free: every figure is an atomic counter, readable at
 * any time without a pool lock (for the cheap figures and the pressure check).
 *
 * <p><b>Invariants.</b> {@code reserved} = the sum of the pools' chunk sizes plus the chunks being
 * reserved right now (booked by {@link #book} before the upstream call, given back by
 * {@link #unbook} if it fails or when a chunk is released); {@code reserved <= capacity} at all
 * times, so that pools growing at once can never together exceed the device. {@code held} = the
 * sum of the pools' chunk sizes alone (what the figures report as reserved: a chunk being asked for
 * may still be refused). {@code used} and
 * {@code live} are the sums of the pools' own figures (blocks in thread caches included: the
 * caches subtract theirs when figures are reported); each pool changes them under its lock, so
 * with every pool lock held they equal those sums exactly, and otherwise they are a recent value.
 * A compaction's move never changes them: its destination counts in its pool alone while the move
 * runs under that pool's lock ({@link Pool#carveDestination}).
 */
final class DeviceAccount {
    private final long capacity;
    private final long chunkAlignment;
    // Volatile fields updated through VarHandles rather than AtomicLongs: one load less on the
    // allocate and free paths, which change used and live on every pool carve and release.
    private volatile long reserved;
    private volatile long held;
    private volatile long used;
    private volatile long live;
    private static final VarHandle RESERVED;
    private static final VarHandle HELD;
    private static final VarHandle USED;
    private static final VarHandle LIVE;

    static {
        try {
            MethodHandles.Lookup l = MethodHandles.lookup();
            RESERVED = l.findVarHandle(DeviceAccount.class, "reserved", long.class);
            HELD = l.findVarHandle(DeviceAccount.class, "held", long.class);
            USED = l.findVarHandle(DeviceAccount.class, "used", long.class);
            LIVE = l.findVarHandle(DeviceAccount.class, "live", long.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /**
     * @param capacity       the most bytes the pools may reserve together
     * @param chunkAlignment the unit of every reservation (a power of two)
     */
    DeviceAccount(long capacity, long chunkAlignment) {
        this.capacity = capacity;
        this.chunkAlignment = chunkAlignment;
    }

    long capacity() {
        return capacity;
    }

    long chunkAlignment() {
        return chunkAlignment;
    }

    /**
     * Books {@code size} bytes of capacity for a chunk, shrinking towards {@code needed} (rounded up
     * to the chunk alignment) if that is all there is.
     *
     * @return the bytes booked, a multiple of the chunk alignment; 0 (nothing booked) when not even
     * {@code needed} fits
     */
    long book(long size, long needed) {
        long min = Pool.alignUp(needed, chunkAlignment);
        while (true) {
            long cur = reserved;
            long room = (capacity - cur) & -chunkAlignment;
            long take = Math.min(size, room);
            if (take < min) {
                return 0;
            }
            if (RESERVED.compareAndSet(this, cur, cur + take)) {
                return take;
            }
        }
    }

    /** Gives back {@code size} bytes of booked capacity (a failed reservation, a released chunk). */
    void unbook(long size) {
        RESERVED.getAndAdd(this, -size);
    }

    /** A pool added a chunk of {@code size} bytes (booked before), or gave chunks back (negative). */
    void held(long size) {
        HELD.getAndAdd(this, size);
    }

    /** A pool carved a block of {@code size} bytes. */
    void allocated(long size) {
        USED.getAndAdd(this, size);
        LIVE.getAndAdd(this, 1L);
    }

    /** A pool took a block of {@code size} bytes back. */
    void released(long size) {
        USED.getAndAdd(this, -size);
        LIVE.getAndAdd(this, -1L);
    }

    /** A pool dropped all its blocks at once (close). */
    void releasedAll(long bytes, long blocks) {
        USED.getAndAdd(this, -bytes);
        LIVE.getAndAdd(this, -blocks);
    }

    long reserved() {
        return reserved;
    }

    /** @return bytes of the pools' chunks, without those still being asked for */
    long held() {
        return held;
    }

    long used() {
        return used;
    }

    long live() {
        return live;
    }

    /** @return bytes of capacity no block uses */
    long free() {
        return Math.max(0, capacity - used);
    }
}
