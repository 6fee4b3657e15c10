package io.ferrum.memory.cpu;

/**
 * A refused device configuration, registered as a service while it stands so that the shell's
 * {@code mem:backends} (which imports no class of this bundle) can show it: it reads the service
 * property {@value #REASON_PROPERTY} of the services a backend bundle registered.
 */
final class Rejection {
    /** Service property: the refusal and what it left running, one line. */
    static final String REASON_PROPERTY = "ferrum.configuration.rejected";
}
