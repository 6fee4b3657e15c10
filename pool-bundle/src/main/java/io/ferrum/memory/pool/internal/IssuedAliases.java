package io.ferrum.memory.pool.internal;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import io.ferrum.memory.api.Device;

/**
 * The aliases one manager issued, in its own handle table, for blocks of other managers (the
 * second handle of a mapping across devices), with their ids.
 *
 * <p>Invariant: an alias is recorded here from its issue until it is freed, this manager closes or
 * the block's own manager closes; at close every recorded alias is dropped, so the peer's memory is
 * not named forever by a handle no one can free any more. The memory itself is always the peer's:
 * the last name gone gives it back through the peer's {@link Reclaimer}. An alias whose block's
 * manager closed is an orphan: only its id and that manager's device stay, for the error its next
 * call gets, until it is freed or this manager closes.
 */
final class IssuedAliases {
    private final ConcurrentHashMap<Block, Long> issued = new ConcurrentHashMap<>();
    /**
     * Aliases whose block's manager closed, with that manager's device: dead, named by nothing here
     * (so this manager keeps nothing of the closed one), and kept only to say why until the alias
     * is freed or this manager closes.
     */
    private final ConcurrentHashMap<Long, Device> orphans = new ConcurrentHashMap<>();

    void add(Block b, long alias) {
        issued.put(b, alias);
    }

    /** @return the ids of the aliases issued here and not yet freed or dropped; a snapshot */
    long[] ids() {
        return issued.values().stream().mapToLong(Long::longValue).toArray();
    }

    /** @return true if no alias issued here is live */
    boolean isEmpty() {
        return issued.isEmpty();
    }

    /** The alias was freed through this manager. */
    void remove(Block b, long alias) {
        issued.remove(b, alias);
    }

    /** The block of {@code alias} goes with its manager, {@code owner}'s, which closed. */
    void orphan(long alias, Device owner) {
        orphans.put(alias, owner);
    }

    /** Takes back {@link #orphan}: the alias was freed before its owner's close reached it. */
    void unorphan(long alias, Device owner) {
        orphans.remove(alias, owner);
    }

    /** @return the device whose manager closed under {@code alias}, or null */
    Device ownerClosedOf(long alias) {
        return orphans.get(alias);
    }

    /** A free of {@code alias}: @return true if it was an alias whose owner closed, now forgotten */
    boolean forgetOrphan(long alias) {
        return orphans.remove(alias) != null;
    }

    /** Ends an alias this manager issued for a peer's block, if it is still live. */
    void drop(Block b, long alias) {
        issued.remove(b, alias);
        int left = b.claim(alias);
        if (left >= 0) {
            b.issuer = null; // the peer's block, which may live on, keeps nothing of this manager
        }
        if (left == 0) {
            b.pool.reclaimer.lastNameGone(b, null);
        }
    }

    /** Close: every alias still recorded dies. */
    void dropAll() {
        for (Map.Entry<Block, Long> e : issued.entrySet()) {
            drop(e.getKey(), e.getValue());
        }
        orphans.clear();
    }
}
