package io.ferrum.memory.pool.internal;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * The aliases one manager issued, in its own handle table, for blocks of other managers (the
 * second handle of a mapping across devices), with their ids.
 *
 * <p>Invariant: an alias is recorded here from its issue until it is freed or this manager closes;
 * at close every recorded alias is dropped, so the peer's memory is not named forever by a handle
 * no one can free any more. The memory itself is always the peer's: the last name gone gives it
 * back through the peer's {@link Reclaimer}.
 */
final class IssuedAliases {
    private final ConcurrentHashMap<Block, Long> issued = new ConcurrentHashMap<>();

    void add(Block b, long alias) {
        issued.put(b, alias);
    }

    /** @return true if no alias issued here is live */
    boolean isEmpty() {
        return issued.isEmpty();
    }

    /** The alias was freed through this manager. */
    void remove(Block b, long alias) {
        issued.remove(b, alias);
    }

    /** Ends an alias this manager issued for a peer's block, if it is still live. */
    void drop(Block b, long alias) {
        issued.remove(b, alias);
        int left = b.claim(alias);
        if (left == 0) {
            b.pool.reclaimer.lastNameGone(b, null);
        }
    }

    /** Close: every alias still recorded dies. */
    void dropAll() {
        for (Map.Entry<Block, Long> e : issued.entrySet()) {
            drop(e.getKey(), e.getValue());
        }
    }
}
