package io.ferrum.memory.monitor;

/** Byte counts in the monitor's messages. */
final class Bytes {
    private Bytes() {
    }

    /** @return e.g. {@code 100 bytes}, {@code 1 byte}: a count as a sentence says it */
    static String count(long bytes) {
        return bytes + (bytes == 1 ? " byte" : " bytes");
    }
}
