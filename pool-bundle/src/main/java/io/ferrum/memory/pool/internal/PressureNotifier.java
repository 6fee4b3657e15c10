package io.ferrum.memory.pool.internal;

import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryObserver;
import io.ferrum.memory.api.MemoryPressure;
import io.ferrum.memory.pool.PoolLog;

/**
 * Pressure levels of one manager and who hears of them: a callback and observers, told on every
 * change of level (edge-triggered), in order.
 *
 * <p><b>Level.</b> The level of the used bytes the figures report: blocks in thread caches do not
 * count. The account's used bytes (cached ones included) bound it from above, so below
 * {@link #lowBelow} (capacity x MEDIUM's threshold, less a byte) the level is LOW without reading
 * the caches: the check after a cached allocate or free costs two reads while the level was LOW.
 * That look ({@link #current}) reads the account and the caches apart, so it may mix two moments (a
 * cache drained between the reads counts its blocks as used): it only decides whether to look
 * closer. The level told is read at one moment, as the figures are ({@link Figures#usedAtOneMoment},
 * under every pool's lock): only on a change of level, never on an allocate or free that changes none.
 *
 * <p><b>Invariants.</b> One thread at a time tells a change ({@link #pressureLock}, never an
 * allocation lock, never waited for): a thread that finds another telling goes on at once, and the
 * teller looks again after each round, so no change is lost (changes made meanwhile are told as
 * one). A change made by a callback or observer itself (it frees on HIGH) is told after the change
 * it was told, by the same loop, so observers hear every change in order, each from the level the
 * one before left. A callback or observer that blocks holds up only the call whose change it tells;
 * one that throws is logged.
 */
final class PressureNotifier {
    private final Device device;
    private final long capacity;
    private final DeviceAccount account;
    private final ThreadCaches caches;
    private final Figures figures;
    private final Lifecycle lifecycle;
    private final PoolLog log;
    /** Below this many used bytes the pressure is LOW whatever the caches hold. */
    private final long lowBelow;
    private final CopyOnWriteArrayList<MemoryObserver> observers = new CopyOnWriteArrayList<>();
    private final ReentrantLock pressureLock = new ReentrantLock();
    private volatile MemoryPressure lastPressure = MemoryPressure.LOW;
    private volatile Consumer<MemoryPressure> callback;
    /**
     * Bumped by a check that found another thread telling: a teller whose closer look found no change
     * looks again only if it moved meanwhile.
     */
    private final AtomicInteger asked = new AtomicInteger();
    /** Tests: run by a teller before it reads the level to tell (a change forced there). */
    static volatile Runnable tellingForTests;

    PressureNotifier(Device device, DeviceAccount account, ThreadCaches caches, Figures figures, Lifecycle lifecycle,
                     PoolLog log) {
        this.device = device;
        this.capacity = account.capacity();
        this.account = account;
        this.caches = caches;
        this.figures = figures;
        this.lifecycle = lifecycle;
        this.log = log;
        // One byte under the threshold so that rounding can only make the fast check ask for the exact one.
        this.lowBelow = capacity == 0 ? Long.MAX_VALUE
                : (long) Math.floor(capacity * (MemoryPressure.MEDIUM.thresholdPercent() / 100.0)) - 1;
    }

    void setCallback(Consumer<MemoryPressure> callback) {
        this.callback = callback;
    }

    boolean addObserver(MemoryObserver observer) {
        Objects.requireNonNull(observer, "observer");
        observers.addIfAbsent(observer);
        return true;
    }

    void removeObserver(MemoryObserver observer) {
        observers.remove(observer);
    }

    /** Close: the level starts from LOW, without telling anyone. */
    void reset() {
        lastPressure = MemoryPressure.LOW;
    }

    private MemoryPressure current() {
        long used = account.used();
        if (used < lowBelow) {
            return MemoryPressure.LOW;
        }
        return level(Math.max(0, used - caches.cachedBytes()));
    }

    /** After an allocation or free served by a thread cache: blocks entering or leaving a cache change the level too. */
    void checkOnCachePath() {
        if (lastPressure == MemoryPressure.LOW && account.used() < lowBelow) {
            return;
        }
        check();
    }

    /** After any change of the used bytes: tells a change of level. */
    void check() {
        while (current() != lastPressure) {
            // A callback or observer that allocates or frees is the teller itself: telling its change
            // now, inside the tell of the one before, would reach observers ahead of that one.
            if (pressureLock.isHeldByCurrentThread() || !pressureLock.tryLock()) {
                // The teller looks again once it lets go: this change is not lost.
                asked.incrementAndGet();
                return;
            }
            int askedBefore = asked.get();
            MemoryPressure now;
            MemoryPressure before;
            try {
                Runnable hook = tellingForTests;
                if (hook != null) {
                    hook.run();
                }
                // The figures of this change, read before anyone hears of it (a callback that frees
                // on HIGH, say, must not have the observers hear this change with the next one's), and
                // the level told from them: one moment's, whatever the look above mixed.
                MemoryInfo info = observers.isEmpty() || lifecycle.closed ? null : figures.memoryInfo();
                now = level(info != null ? info.usedBytes() : figures.usedAtOneMoment());
                before = lastPressure;
                if (now != before) {
                    lastPressure = now;
                    tell(before, now, info);
                }
            } finally {
                pressureLock.unlock();
            }
            if (now == before && asked.get() == askedBefore) {
                // The look mixed two moments; no one else changed the level meanwhile: nothing to tell.
                return;
            }
        }
    }

    /** @return the level of {@code used} bytes reported as used */
    private MemoryPressure level(long used) {
        return MemoryPressure.forUtilization((double) used / (double) capacity * 100.0);
    }

    /** @param info the figures of the change, for the observers; null when there were none (or it closed) */
    private void tell(MemoryPressure before, MemoryPressure now, MemoryInfo info) {
        Consumer<MemoryPressure> cb = callback;
        if (cb != null) {
            try {
                cb.accept(now);
            } catch (VirtualMachineError e) {
                throw e;
            } catch (Throwable e) {
                // An Error too: a callback of a stopped bundle fails with NoClassDefFoundError.
                log.warn("Pressure callback of " + device + " failed on " + before + " -> " + now
                        + "; allocation goes on", e);
            }
        }
        if (!observers.isEmpty()) {
            if (info == null && !lifecycle.closed) {
                info = figures.memoryInfo(); // the first observer came while the callback ran
            }
            for (MemoryObserver o : observers) {
                try {
                    o.pressureChanged(device, before, now, info);
                } catch (VirtualMachineError e) {
                    throw e;
                } catch (Throwable e) {
                    log.warn("Pressure observer " + o + " of " + device + " failed", e);
                }
            }
        }
    }
}
