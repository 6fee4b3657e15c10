package io.ferrum.memory.pool.internal;

import io.ferrum.memory.api.Device;

/**
 * A manager that can name another manager's block in its own handle table: the second handle of a
 * mapping across two devices, of one backend or of two (a GPU's block under a host handle). Each
 * engine implements it, so that a mapping needs no knowledge of its peer's class.
 */
interface AliasIssuer {

    /**
     * Issues an alias for {@code b}, a block of another manager whose name count already counts it,
     * and records it ({@link IssuedAliases}) until it is freed or this manager closes.
     *
     * @return the alias's handle id (already dead if this manager closed meanwhile: the caller then
     *         checks {@link #isClosed()} and refuses the mapping)
     */
    long issueAlias(Block b);

    /** @return true once the manager is closed: it issues no more aliases that live */
    boolean isClosed();

    /**
     * The manager of {@code b}, a block this manager names by an alias, closed: the alias dies now,
     * unless it was freed meanwhile, and this manager keeps nothing of the block (its owner, the
     * owner's upstream and the owner's bundle may go); calls with the alias say that {@code owner}'s
     * manager is closed, and a free of it is taken.
     */
    void ownerClosed(Block b, Device owner);

    /**
     * Takes back {@code alias}, just issued for {@code b} by {@link #issueAlias}, before anyone got
     * it: the block's manager closed during the mapping, perhaps before it could see the alias
     * ({@link #ownerClosed}). Leaves no record of it, whichever of the two ends it.
     */
    void withdrawAlias(Block b, long alias);
}
