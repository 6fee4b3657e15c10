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

    /**
     * @param sequenceLimit at most this many ids of each kind per number (tests: a few)
     * @throws MemoryException when the JVM has no number left
     */
    StreamIds(Device device, long sequenceLimit) {
        this.device = device;
        this.sequenceLimit = sequenceLimit;
        Numbering first = new Numbering(nextNumber());
        numberings.put(first.number, first);
        this.current = first;
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
            return what + " " + id + " belongs to another device's stream manager (or to an earlier one of " + device
                    + "), not to the stream manager of " + device + "; use the stream manager that issued it";
        }
        return what + " " + id + " was never issued by any stream manager (asked the one of " + device + ")";
    }
}
