package io.ferrum.memory.shell;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import org.junit.jupiter.api.Test;

import io.ferrum.memory.api.GlobalMemoryMonitor;
import io.ferrum.memory.api.MemoryRouter;

/**
 * The line of an internal error names its command. It was read off the stack (the method that
 * called {@code Reply.attempt}), and a JVM keeps no frames in a {@code Throwable} when started with
 * {@code -XX:-StackTraceInThrowable} (a HotSpot flag that makes exceptions cheap): every command's
 * internal error then read {@code internal error in mem:?}.
 */
class InternalErrorNameTest {

    /**
     * The child JVM's work: three commands over a router and a monitor that throw the Error a class
     * gone with an uninstalled bundle throws, each reply on its own line.
     */
    public static void main(String[] args) {
        Object gone = Proxy.newProxyInstance(InternalErrorNameTest.class.getClassLoader(),
                new Class<?>[] {MemoryRouter.class, GlobalMemoryMonitor.class}, (proxy, m, a) -> {
                    throw new NoClassDefFoundError("io/ferrum/memory/pool/internal/Gone");
                });
        BytesCommands bytes = new BytesCommands();
        bytes.router = (MemoryRouter) gone;
        bytes.monitor = (GlobalMemoryMonitor) gone;
        DeviceCommands devices = new DeviceCommands(null);
        devices.monitor = (GlobalMemoryMonitor) gone;
        String h = "0x0000100000000001";
        System.out.println(bytes.copy(h, h, "4", "0", "8"));
        System.out.println(bytes.dump(h));
        System.out.println(devices.devices());
    }

    @Test
    void anInternalErrorNamesItsCommandInAJvmThatKeepsNoStackTraces() throws IOException, InterruptedException {
        Process p = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-XX:-StackTraceInThrowable", "-cp", System.getProperty("java.class.path"),
                InternalErrorNameTest.class.getName()).redirectErrorStream(true).start();
        p.getOutputStream().close();
        // Three short lines: the pipe holds them until the child has ended.
        assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the child JVM ended");
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.exitValue(), out);
        String error = ": NoClassDefFoundError: io/ferrum/memory/pool/internal/Gone; see the log";
        assertEquals(List.of("error: internal error in mem:copy" + error, "error: internal error in mem:dump" + error,
                "error: internal error in mem:devices" + error), out.lines().toList());
    }
}
