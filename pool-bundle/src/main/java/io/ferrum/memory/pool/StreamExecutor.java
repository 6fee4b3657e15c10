package io.ferrum.memory.pool;

import java.util.concurrent.CompletionStage;

import org.osgi.annotation.versioning.ConsumerType;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceUnavailableException;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.StreamHandle;

/**
 * What the pool engine needs from a backend's streams: run a piece of work on a stream, in that
 * stream's order, and tell its own streams from others. A backend whose copies the host drives uses
 * {@link HostStreamManager}; a device with streams of its own (CUDA) implements this over them.
 *
 * <p>The engine pins the blocks of an asynchronous copy before it calls {@link #submit} and unpins
 * them in the work itself, so the contract of {@link #submit} is exact: either it throws and the
 * work never runs, or it returns and the work runs exactly once. The engine releases each
 * operation's pins once whatever an executor does: one that runs the work and then throws (lets the
 * work's exception out of {@code submit}, say) costs no other operation its pin, but its caller
 * hears an exception for work that ran; work that runs after {@code submit} threw, or a second
 * time, does nothing (its blocks are no longer pinned, so it must not touch them).
 */
@ConsumerType
public interface StreamExecutor extends AutoCloseable {

    /** @return the device whose streams these are */
    Device device();

    /**
     * Whether this executor runs work on {@code stream}: the default stream or one of its live
     * streams. Cheap and lock-free: the engine asks it before it pins an async copy's blocks.
     *
     * @param stream a stream handle; {@code null} stands for the default stream
     * @return true for the default stream or a live stream of this executor
     */
    boolean knows(StreamHandle stream);

    /**
     * Runs {@code work} on {@code stream}, after everything submitted to that stream before.
     *
     * @param stream the stream, or {@code null} for the default stream
     * @param work   what to run, not null
     * @return completes when the work has run, exceptionally if it threw
     * @throws DeviceUnavailableException    once the executor is closed: the work will never run
     * @throws InvalidMemoryRequestException for a stream that is not one of its live streams; its
     *                                       message names the stream and why (destroyed, another
     *                                       device's, never created): the engine, for a stream that
     *                                       {@link #knows} refuses, calls this with work that does
     *                                       nothing to give the caller that reason
     */
    CompletionStage<Void> submit(StreamHandle stream, Runnable work);

    /** Refuses later work; work already accepted still runs. Idempotent. */
    @Override
    void close();
}
