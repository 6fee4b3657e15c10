package io.ferrum.memory.pool.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.junit.jupiter.api.Test;

/**
 * Device-wide accounting: booking capacity for a chunk (shrinking towards what is needed, in
 * units of the chunk alignment, never past the capacity), giving it back, and the used/live
 * figures of carves and releases; under threads that book and give back at once, the bookings
 * never pass the capacity and every figure adds up.
 */
class DeviceAccountTest {
    static final long KiB = 1024;

    @Test
    void aBookingGetsWhatItAsksWhileItFits() {
        DeviceAccount a = new DeviceAccount(64 * KiB, 4 * KiB);
        assertEquals(16 * KiB, a.book(16 * KiB, 4 * KiB));
        assertEquals(16 * KiB, a.reserved());
        assertEquals(48 * KiB, a.book(48 * KiB, 48 * KiB), "exactly the rest");
        assertEquals(64 * KiB, a.reserved());
        assertEquals(0, a.book(4 * KiB, 1), "full");
        assertEquals(64 * KiB, a.reserved(), "a refused booking books nothing");
    }

    @Test
    void aBookingShrinksTowardsWhatIsNeededButNotBelowIt() {
        DeviceAccount a = new DeviceAccount(64 * KiB, 4 * KiB);
        a.book(56 * KiB, 56 * KiB);
        assertEquals(0, a.book(16 * KiB, 12 * KiB), "12 KiB needed, 8 KiB left");
        assertEquals(0, a.book(16 * KiB, 8 * KiB + 1), "needed rounds up to 12 KiB");
        assertEquals(56 * KiB, a.reserved());
        assertEquals(8 * KiB, a.book(16 * KiB, 8 * KiB), "the 8 KiB left");
        assertEquals(64 * KiB, a.reserved());
    }

    @Test
    void aCapacityThatIsNotAMultipleOfTheAlignmentIsUsedInWholeUnits() {
        DeviceAccount a = new DeviceAccount(10 * KiB, 4 * KiB);
        assertEquals(8 * KiB, a.book(16 * KiB, 4 * KiB));
        assertEquals(0, a.book(4 * KiB, 1), "2 KiB is left: less than one unit");
        assertEquals(8 * KiB, a.reserved());
        assertEquals(10 * KiB, a.capacity());
        assertEquals(4 * KiB, a.chunkAlignment());
    }

    @Test
    void givingBackMakesRoomAgain() {
        DeviceAccount a = new DeviceAccount(64 * KiB, 4 * KiB);
        a.book(64 * KiB, 64 * KiB);
        a.unbook(16 * KiB);
        assertEquals(48 * KiB, a.reserved());
        assertEquals(16 * KiB, a.book(32 * KiB, 4 * KiB));
    }

    @Test
    void carvesAndReleasesAddUpInUsedAndLive() {
        DeviceAccount a = new DeviceAccount(64 * KiB, 4 * KiB);
        assertEquals(64 * KiB, a.free());
        a.allocated(1000);
        a.allocated(24);
        a.allocated(3 * KiB);
        assertEquals(4 * KiB, a.used());
        assertEquals(3, a.live());
        assertEquals(60 * KiB, a.free());
        a.released(24);
        assertEquals(4 * KiB - 24, a.used());
        assertEquals(2, a.live());
        a.releasedAll(4 * KiB - 24, 2);
        assertEquals(0, a.used());
        assertEquals(0, a.live());
        assertEquals(0, a.reserved(), "blocks are not bookings");
    }

    @Test
    void threadsBookingAndGivingBackAtOnceNeverPassTheCapacity() throws Exception {
        long capacity = 1024 * KiB;
        DeviceAccount a = new DeviceAccount(capacity, 4 * KiB);
        int threads = 4;
        CountDownLatch start = new CountDownLatch(1);
        AtomicLong held = new AtomicLong(); // what the threads hold, booked minus given back
        List<Throwable> failures = new CopyOnWriteArrayList<>();
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int seed = t;
            Thread th = new Thread(() -> {
                Random rnd = new Random(seed);
                List<Long> mine = new ArrayList<>();
                try {
                    start.await();
                    for (int i = 0; i < 100_000; i++) {
                        if (mine.isEmpty() || rnd.nextInt(3) > 0) {
                            long size = (1 + rnd.nextInt(16)) * 4 * KiB;
                            long got = a.book(size, 4 * KiB);
                            assertTrue(got == 0 || got >= 4 * KiB && got <= size && got % (4 * KiB) == 0, "booked " + got);
                            if (got > 0) {
                                held.addAndGet(got);
                                mine.add(got);
                                a.allocated(got); // as if one block filled the chunk
                            }
                        } else {
                            long back = mine.remove(mine.size() - 1);
                            held.addAndGet(-back);
                            a.unbook(back);
                            a.released(back);
                        }
                        assertTrue(a.reserved() <= capacity, "reserved " + a.reserved());
                    }
                    for (long back : mine) {
                        a.unbook(back);
                        a.released(back);
                    }
                    held.addAndGet(-mine.stream().mapToLong(Long::longValue).sum());
                } catch (Throwable e) {
                    failures.add(e);
                }
            });
            ts.add(th);
            th.start();
        }
        start.countDown();
        for (Thread th : ts) {
            th.join(TimeUnit.SECONDS.toMillis(60));
        }
        assertEquals(List.of(), failures);
        assertEquals(0, held.get());
        assertEquals(0, a.reserved(), "every booking was given back exactly once");
        assertEquals(0, a.used());
        assertEquals(0, a.live());
    }

    @Test
    void threadsBookingTheLastRoomAtOnceGetExactlyTheCapacity() throws Exception {
        long capacity = 4096 * KiB;
        DeviceAccount a = new DeviceAccount(capacity, 4 * KiB);
        int threads = 4;
        CountDownLatch start = new CountDownLatch(1);
        AtomicLong booked = new AtomicLong();
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Thread th = new Thread(() -> {
                try {
                    start.await();
                } catch (InterruptedException e) {
                    return;
                }
                long got;
                while ((got = a.book(12 * KiB, 4 * KiB)) > 0) {
                    booked.addAndGet(got);
                }
            });
            ts.add(th);
            th.start();
        }
        start.countDown();
        for (Thread th : ts) {
            th.join(TimeUnit.SECONDS.toMillis(60));
        }
        assertEquals(capacity, booked.get(), "the bookings fill the capacity, no more and no less");
        assertEquals(capacity, a.reserved());
    }
}
