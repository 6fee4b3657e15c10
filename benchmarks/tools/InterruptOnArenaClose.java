// Counts how often a thread reading a shared arena's memory finds its interrupt flag set after
// another thread closes the arena (docs/ARCHITECTURE.md, Mapping). Run: java benchmarks/tools/InterruptOnArenaClose.java
import java.lang.foreign.*;
import java.util.concurrent.*;
public class InterruptOnArenaClose {
    public static void main(String[] a) throws Exception {
        int rounds = 300, flagged = 0, ise = 0;
        for (int r = 0; r < rounds; r++) {
            Arena arena = Arena.ofShared();
            MemorySegment s = arena.allocate(1 << 20);
            CountDownLatch started = new CountDownLatch(1);
            boolean[] out = new boolean[2];
            Thread t = new Thread(() -> {
                started.countDown();
                try {
                    long sum = 0;
                    while (true) { for (long i = 0; i < s.byteSize(); i += 8) sum += s.get(ValueLayout.JAVA_LONG, i); }
                } catch (IllegalStateException e) { out[0] = true; }
                out[1] = Thread.currentThread().isInterrupted();
            });
            t.start(); started.await(); Thread.sleep(1);
            arena.close();
            t.join();
            if (out[0]) ise++;
            if (out[1]) flagged++;
        }
        System.out.println("rounds=" + rounds + " ISE=" + ise + " interruptFlagSet=" + flagged + " java=" + System.getProperty("java.version"));
    }
}
