package io.ferrum.memory.launcher;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;

import org.apache.felix.gogo.runtime.CommandProcessorImpl;
import org.apache.felix.gogo.runtime.threadio.ThreadIOImpl;
import org.apache.felix.service.command.CommandSession;
import org.junit.jupiter.api.Test;

/**
 * A Gogo session writes what its statements print through one {@code java.nio} channel per stream,
 * made when the session is, and such a channel closes itself for good when an interrupted thread
 * writes to it: after one statement was interrupted while it wrote (Ctrl-C during {@code mem:save}'s
 * progress line, Felix logging from a statement its session's close interrupted), every later
 * statement's output was lost without a word. Here a real Gogo session runs such a statement, then
 * one that prints.
 */
class SessionChannelsTest {

    /** Commands that write to the statement's {@code System.out} and {@code System.err}, as Felix's logger does. */
    public static final class Writing {
        public void interrupted() {
            Thread.currentThread().interrupt();
            System.out.println("interrupted, to the output");
            System.err.println("interrupted, to the error");
        }

        public void print(String word) {
            System.out.println(word + " to the output");
            System.err.println(word + " to the error");
        }
    }

    @Test
    void aStatementAfterAnInterruptedWriteStillPrints() throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        ThreadIOImpl io = new ThreadIOImpl();
        io.start();
        try {
            CommandProcessorImpl processor = new CommandProcessorImpl(io);
            processor.addCommand("test", new Writing(), "interrupted");
            processor.addCommand("test", new Writing(), "print");
            try (CommandSession session = Console.quietSession(processor, new PrintStream(out, true, StandardCharsets.UTF_8),
                    new PrintStream(err, true, StandardCharsets.UTF_8))) {
                session.execute("test:print before");
                session.execute("test:interrupted");
                session.execute("test:print after");
            }
        } finally {
            io.stop();
        }
        assertEquals(List.of("before to the output", "after to the output"),
                out.toString(StandardCharsets.UTF_8).lines().filter(l -> !l.startsWith("interrupted")).toList());
        assertEquals(List.of("before to the error", "after to the error"),
                err.toString(StandardCharsets.UTF_8).lines().filter(l -> !l.startsWith("interrupted")).toList());
    }
}
