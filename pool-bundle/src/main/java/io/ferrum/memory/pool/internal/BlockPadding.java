package io.ferrum.memory.pool.internal;

/**
 * 64 bytes laid out before every {@link Block}'s own fields (superclass fields come first), so that
 * two blocks used by two threads never share a cache line: a live block's fields are written on
 * every allocate and free, and blocks split from one another are allocated next to each other.
 * {@link ThreadCacheCounters} pads its counters with it too.
 */
abstract class BlockPadding {
    /**
     * Fills the 4-byte gap after a 12-byte object header, where the JVM would otherwise put one of
     * the subclass's int fields, outside the padding.
     */
    int p00;
    long p01;
    long p02;
    long p03;
    long p04;
    long p05;
    long p06;
    long p07;
    long p08;
}
