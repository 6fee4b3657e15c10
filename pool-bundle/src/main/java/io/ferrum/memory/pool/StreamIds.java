package io.ferrum.memory.pool;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryException;

/**
 * The stream and event ids of one {@link HostStreamManager}.
 *
 * <p><b>Layout.</b> An id is {@code [0][number: 22 bits][kind: 1 bit][sequence: 40 bits]}. The
 * number comes from a JVM-wide counter kept in the system properties (as the handle table's manager
 * numbers are, so that it keeps counting across updates of the pool bundle); the kind bit is 0 for a
 * stream and 1 for an event; streams and events each have their own sequence, from 1.
 *
 * <p><b>Invariants.</b> An id is never 0 (the default stream's) nor negative; no two managers in the
 * JVM issue the same id; a manager tells its own ids from another's, and an id it issued from one it
 * never did. When a sequence runs out, the manager draws a new number and goes on; its earlier
 * numbers stay its own. After 2^22 - 1 numbers in one JVM, issuing an id that needs a new number
 * throws {@link MemoryException}. Thread-safe.
 */
final class StreamIds {
    private static final int SEQUENCE_BITS = 40;
    static final long MAX_SEQUENCE = (1L << SEQUENCE_BITS) - 1;
    private static final long EVENT_KIND = 1L << SEQUENCE_BITS;
    private static final int NUMBER_SHIFT = SEQUENCE_BITS + 1;
    private static final long MAX_NUMBER = (1L << (63 - NUMBER_SHIFT)) - 1;
    private static final String COUNTER_KEY = "io.ferrum.memory.pool.streamManagerCounter";
    private static final String DEVICES_KEY = "io.ferrum.memory.pool.streamManagerDevices";

    /** One manager number and how many ids of each kind were issued under it. */
    private static final class Numbering {
        final long number;
        final AtomicLong streams = new AtomicLong();
        final AtomicLong events = new AtomicLong();

        Numbering(long number) {
            this.number = number;
        }
    }

    private final Device device;
    private final long sequenceLimit;
    /** The number new ids are issued under. */
    private volatile Numbering current;
    /** Every number this manager has issued ids under, by number (almost always one). */
    private final ConcurrentHashMap<Long, Numbering> numberings = new ConcurrentHashMap<>();
    /** Set by {@link #close} (guarded by {@link #numberings}): a number drawn later is not listed as open. */
    private boolean closed;

    /**
     * @param sequenceLimit at most this many ids of each kind per number (tests: a few)
     * @throws MemoryException when the JVM has no number left
     */
    StreamIds(Device device, long sequenceLimit) {
        this.device = device;
        this.sequenceLimit = sequenceLimit;
        Numbering first = new Numbering(nextNumber());
        numberings.put(first.number, first);
        devices().put(first.number, device.toString());
        this.current = first;
    }

    /**
     * The device of each open manager's numbers, JVM-wide (kept in the system properties, as the
     * counter is, so that managers of two bundle revisions see each other): a refusal of another
     * manager's id names that manager's device. Holds only Long and String, so no class loader is kept.
     */
    @SuppressWarnings("unchecked")
    private static ConcurrentHashMap<Long, String> devices() {
        return (ConcurrentHashMap<Long, String>) System.getProperties().computeIfAbsent(DEVICES_KEY,
                k -> new ConcurrentHashMap<Long, String>());
    }

    /** Forgets this manager's numbers: a refusal of its ids then says its manager was closed. */
    void close() {
        synchronized (numberings) {
            closed = true;
            numberings.keySet().forEach(devices()::remove);
        }
    }

    private static AtomicLong numberCounter() {
        return (AtomicLong) System.getProperties().computeIfAbsent(COUNTER_KEY, k -> new AtomicLong());
    }

    private static long nextNumber() {
        long n = numberCounter().incrementAndGet();
        if (n > MAX_NUMBER) {
            throw new MemoryException("No stream manager number is left in this JVM: all " + MAX_NUMBER
                    + " were issued (each stream manager takes one, and one more per 2^40 streams or events)."
                    + " Restart the JVM");
        }
        return n;
    }

    private static long numberOf(long id) {
        return id >>> NUMBER_SHIFT;
    }

    static boolean isEvent(long id) {
        return (id & EVENT_KIND) != 0;
    }

    private static long sequenceOf(long id) {
        return id & MAX_SEQUENCE;
    }

    /** @return a new stream id, or event id when {@code event} */
    long issue(boolean event) {
        while (true) {
            Numbering n = current;
            long seq = (event ? n.events : n.streams).incrementAndGet();
            if (seq <= sequenceLimit) {
                return (n.number << NUMBER_SHIFT) | (event ? EVENT_KIND : 0) | seq;
            }
            synchronized (numberings) {
                if (current == n) {
                    Numbering next = new Numbering(nextNumber());
                    numberings.put(next.number, next);
                    if (!closed) {
                        // An id issued by a call that raced close (refused by its manager) lists nothing.
                        devices().put(next.number, device.toString());
                    }
                    current = next;
                }
            }
        }
    }

    /** @return the numbering of {@code id} if this manager issued ids under its number, else null */
    private Numbering own(long id) {
        if (id <= 0) {
            return null;
        }
        long number = numberOf(id);
        Numbering n = current;
        return n.number == number ? n : numberings.get(number);
    }

    /** @return true if {@code id} lies under one of this manager's numbers */
    boolean isOwn(long id) {
        return own(id) != null;
    }

    /** @return true if {@code id} is a stream id this manager issued */
    boolean issuedStream(long id) {
        Numbering n = own(id);
        long seq = sequenceOf(id);
        return n != null && !isEvent(id) && seq > 0 && seq <= Math.min(n.streams.get(), sequenceLimit);
    }

    /** @return true if {@code id} is an event id this manager issued (and so recorded) */
    boolean recordedEvent(long id) {
        Numbering n = own(id);
        long seq = sequenceOf(id);
        return n != null && isEvent(id) && seq > 0 && seq <= Math.min(n.events.get(), sequenceLimit);
    }

    /** Why {@code id} names nothing here, when it is not an id of this manager's. */
    String foreign(String what, long id) {
        long number = numberOf(id);
        if (id > 0 && number > 0 && number <= numberCounter().get()) {
            String owner = devices().get(number);
            if (owner != null && owner.equals(device.toString())) {
                // Two stream managers of one device (the registered one, one a MemoryManagerFactory
                // made): "use it with that device's memory" would send the caller back to this call.
                return what + " " + id + " belongs to another stream manager of " + device + ", not to this one: a"
                        + " manager runs work only on the streams of the stream manager it was made with; create the"
                        + " stream there, or use the default stream";
            }
            if (owner != null) {
                return what + " " + id + " belongs to the stream manager of " + owner + ", not to this one of " + device
                        + "; use it with " + owner + "'s memory";
            }
            return what + " " + id + " belongs to a stream manager that was closed (its backend was stopped), not to"
                    + " the stream manager of " + device + "; create a new one on " + device;
        }
        return what + " " + id + " was never issued by any stream manager (asked the one of " + device + ")";
    }
}
