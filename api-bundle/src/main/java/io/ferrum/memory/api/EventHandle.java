package io.ferrum.memory.api;

/**
 * A point recorded in a stream: it completes when everything submitted to that stream before it
 * has completed. Other streams may wait for it ({@link StreamManager#waitEvent}).
 *
 * @param id the opaque id, issued by {@link StreamManager#recordEvent}
 */
public record EventHandle(long id) {
}
