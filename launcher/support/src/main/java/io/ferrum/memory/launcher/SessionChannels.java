package io.ferrum.memory.launcher;

import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.nio.ByteBuffer;
import java.nio.channels.Channel;
import java.nio.channels.WritableByteChannel;

import org.apache.felix.service.command.CommandSession;

/**
 * Gives a Gogo session output channels that a write from an interrupted thread does not close.
 *
 * <p>Gogo runtime 1.1.6 makes one {@code java.nio} channel per stream when a session is created
 * ({@code Channels.newChannel}, kept in {@code CommandSessionImpl.channels}), and writes everything a
 * statement prints to {@code System.out} or {@code System.err} (a command's progress line, Felix's
 * logger) and its own {@code gogo:} lines through them. Such a channel is an {@code
 * AbstractInterruptibleChannel}: when a thread that was interrupted writes to it, it closes itself
 * for good (and the stream under it, which {@link KeptOpen} keeps open). After one statement was
 * interrupted while it wrote (Ctrl-C during {@code mem:save}'s progress line), every later statement's
 * output was lost without a word, since a {@link PrintStream} only records that its writes failed.
 * Gogo has no API to give a session other channels, so the field is set here; a session that is not
 * Gogo runtime's keeps its channels, and only {@link KeptOpen} guards the console's streams.
 *
 * <p>Gogo still wraps these channels once per statement in an interruptible channel of its own whose
 * close closes nothing: an interrupted statement's first write arrives, and that statement's later
 * writes are dropped; the next statement writes again.
 */
final class SessionChannels {
    private SessionChannels() {
    }

    /**
     * @param session a session of Gogo runtime
     * @param out     the stream its standard output goes to (the process's, or the terminal's)
     * @param err     the stream its standard error goes to; may be {@code out}
     * @return whether the session now writes through channels that stay open; false if it is not a
     *         session whose channels can be reached (another Gogo)
     */
    static boolean keepOpen(CommandSession session, PrintStream out, PrintStream err) {
        Channel[] channels = channels(session);
        if (channels == null || channels.length < 3) {
            return false;
        }
        WritableByteChannel o = new Steady(out);
        channels[2] = err == out ? o : new Steady(err);
        channels[1] = o;
        return true;
    }

    /** @return the session's array of its input, output and error channels, or null if it has none */
    private static Channel[] channels(CommandSession session) {
        for (Class<?> c = session.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField("channels");
                if (f.getType() != Channel[].class) {
                    return null;
                }
                f.setAccessible(true);
                return (Channel[]) f.get(session);
            } catch (NoSuchFieldException e) {
                continue; // declared higher up, if anywhere
            } catch (ReflectiveOperationException | RuntimeException e) {
                return null; // not accessible here (a module that does not open it)
            }
        }
        return null;
    }

    /**
     * A channel over one of the console's streams that is always open: its close only flushes the
     * stream, as {@link KeptOpen}'s. A write that fails is recorded by the {@link PrintStream}, where
     * the console looks for it.
     */
    private static final class Steady implements WritableByteChannel {
        private final OutputStream out;

        Steady(OutputStream out) {
            this.out = out;
        }

        @Override
        public synchronized int write(ByteBuffer src) throws IOException {
            int n = src.remaining();
            if (src.hasArray()) {
                out.write(src.array(), src.arrayOffset() + src.position(), n);
                src.position(src.limit());
            } else {
                byte[] bytes = new byte[n];
                src.get(bytes);
                out.write(bytes);
            }
            return n;
        }

        @Override
        public boolean isOpen() {
            return true;
        }

        @Override
        public void close() throws IOException {
            out.flush();
        }
    }
}
