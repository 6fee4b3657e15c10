package io.ferrum.memory.api;

import java.util.List;
import java.util.concurrent.CompletionStage;

import org.osgi.annotation.versioning.ProviderType;

/**
 * Streams (ordered queues of asynchronous work) and events (points recorded in a stream) of one
 * device kind. Work submitted to one stream runs in order; different streams may overlap. The
 * default stream ({@link StreamHandle#DEFAULT}) is synchronous: work on it has completed when the
 * submitting call returns.
 *
 * <p>Registered as an OSGi service with the {@link DeviceMemoryManager#DEVICE_PROPERTY} of its device.
 * <b>Thread safety:</b> every method may be called from any thread.
 */
@ProviderType
public interface StreamManager extends AutoCloseable {

    /** @return the device whose streams this manager runs */
    Device device();

    /**
     * @param device must be {@link #device()}
     * @return a new stream
     */
    StreamHandle createStream(Device device);

    /**
     * Destroys a stream after the work already submitted to it has completed.
     *
     * @param stream a stream of this manager, not the default stream
     * @throws InvalidMemoryRequestException for an unknown or already destroyed stream, or the default stream
     */
    void destroyStream(StreamHandle stream);

    /**
     * @param stream a live stream
     * @return a stage that completes when everything submitted to the stream so far has completed
     */
    CompletionStage<Void> synchronizeStream(StreamHandle stream);

    /**
     * @param stream a live stream
     * @return true if nothing submitted to it is still pending
     */
    boolean isStreamReady(StreamHandle stream);

    /**
     * @param device must be {@link #device()}
     * @return {@link StreamHandle#DEFAULT}
     */
    StreamHandle defaultStream(Device device);

    /**
     * @param stream a live stream
     * @return an event that completes when everything submitted to the stream before it has completed
     */
    EventHandle recordEvent(StreamHandle stream);

    /**
     * Makes later work on {@code stream} wait until {@code event} has completed.
     *
     * @param stream a live stream
     * @param event  an event recorded by this manager
     * @throws InvalidMemoryRequestException for an unknown stream or event
     */
    void waitEvent(StreamHandle stream, EventHandle event);

    /** @return the live streams, the default stream first; a snapshot */
    List<StreamHandle> streams();

    /**
     * Refuses every later call with {@link DeviceUnavailableException} and destroys every stream
     * once the work already submitted to it has run; that work is never dropped. The wait for it is
     * bounded (a stream whose work blocks is destroyed when that work ends), and a call from inside
     * this manager's own stream work does not wait. Idempotent. Stream managers registered as
     * services are closed by their backend; callers close only stream managers they created through
     * a {@link MemoryManagerFactory}.
     *
     * @since 1.3
     */
    @Override
    void close();
}
