package io.ferrum.memory.monitor;

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryObserver;
import io.ferrum.memory.api.MemoryPressure;

/**
 * The pressure level of every device, from one of two sources, chosen per manager when it starts
 * serving a device:
 * <ul>
 * <li>reported: the manager accepted a pressure observer ({@link DeviceMemoryManager#addPressureObserver}
 * returned true) and tells of each change itself, edge-triggered, from the allocating thread;</li>
 * <li>derived: the manager declined (the API's default), and the level is derived here from the figures
 * the monitor reads anyway ({@link #derive}: each sample, and each routing snapshot's figures), a
 * change being told once when the derived level differs from the last one.</li>
 * </ul>
 *
 * <p>Invariants: a device's level is in {@code levels} while it is served; at most one source feeds
 * it (a derived device's figures from another manager are ignored); each change is told to the
 * notifier once, even when two threads derive the same change at once (compare-and-set on the level),
 * and from the level held here (a reporting manager's own previous level may be one it never told);
 * a derived level comes from the newest figures derived from: each reading is numbered before it
 * begins ({@link #reading}), and figures of a reading older than the last one derived from derive
 * nothing (a sampler's full figures that arrive after a routing refresh's newer cheap ones).
 * Calls into managers, plugins, are guarded: one that fails to accept an observer is derived. A
 * manager no longer followed is not heard, even with a tell it began before (see {@link Follower}),
 * and a device no longer served has no level: a tell or a derivation under way when its manager
 * stops being followed ends before the unsubscription does, and none after it records a level.
 */
final class PressureLevels {
    private final ConcurrentHashMap<Device, MemoryPressure> levels = new ConcurrentHashMap<>();
    /** The devices whose level is derived, with the manager whose figures count. */
    private final ConcurrentHashMap<Device, Source> derived = new ConcurrentHashMap<>();
    /** Numbers the readings of figures in the order they begin. */
    private final AtomicLong readings = new AtomicLong();
    /** The observer registered on each reporting manager, to remove it when the manager goes. */
    private final ConcurrentHashMap<DeviceMemoryManager, Follower> reporting = new ConcurrentHashMap<>();
    private final ObserverNotifier notifier;
    /** Tests only: run by a follower's tell once it found itself on, before it records the level; null otherwise. */
    static volatile Runnable tellingForTests;

    PressureLevels(ObserverNotifier notifier) {
        this.notifier = notifier;
    }

    /**
     * A derived device's source: the manager whose figures count, and the newest reading derived from.
     * Loaded with the router ({@link Router#LOADED_EARLY}): a routed call derives levels.
     */
    static final class Source {
        final DeviceMemoryManager manager;
        /** Guarded by this source. */
        long reading;
        /**
         * Guarded by this source: the device is no longer derived from it (its manager went, or the
         * device): a derivation that read this source before derives nothing more.
         */
        boolean gone;

        Source(DeviceMemoryManager manager) {
            this.manager = manager;
        }
    }

    /** @return the number of a reading of a manager's figures about to begin, for {@link #derive} */
    long reading() {
        return readings.incrementAndGet();
    }

    /**
     * @return {@link #reading()} when {@code device}'s level is derived from {@code manager}'s figures,
     *         else -1 (its figures derive nothing): a routing refresh of reporting managers, every pooled
     *         one, writes nothing shared
     */
    long readingFor(Device device, DeviceMemoryManager manager) {
        Source source = derived.get(device);
        return source != null && source.manager == manager ? reading() : -1;
    }

    /**
     * The observer registered on a reporting manager. It is switched off before it is removed: a
     * manager tells its observers over a copy of their list (as the pool does), so a tell that began
     * before the removal can still arrive after it, and must not put back the level of a device the
     * monitor forgot, nor reach the observers.
     */
    private final class Follower implements MemoryObserver {
        private final Device device;
        volatile boolean on = true;
        /** Guarded by this: the manager told a change (the subscription's catch-up then has nothing to add). */
        private boolean heard;

        Follower(Device device) {
            this.device = device;
        }

        @Override
        public void pressureChanged(Device d, MemoryPressure previous, MemoryPressure current, MemoryInfo now) {
            // Runs in the allocating thread, under the manager's notification lock: record and hand off
            // (the lock of this follower is taken by nothing else but the subscription's catch-up).
            synchronized (this) {
                if (!on) {
                    return; // a tell that was under way when the manager stopped being followed
                }
                Runnable seam = tellingForTests;
                if (seam != null) {
                    seam.run();
                }
                heard = true;
                // From the level the monitor held, not the manager's previous one: a change the manager
                // made before it had this follower was told to no one, and observers must hear each
                // change from the level the one before left (nothing when they have this one already).
                MemoryPressure held = levels.put(device, current);
                MemoryPressure from = held != null ? held : previous;
                if (from != current) {
                    notifier.pressureChanged(device, from, current, now);
                }
            }
        }

        /**
         * Just after this follower was added: a change the manager made after the figures the device
         * came with were read, but before it had this follower, was told to no one, and the manager
         * tells nothing more until its next change. Figures read now (any change after them is told)
         * set the level, unless a tell came meanwhile, which is as new.
         */
        void catchUp(DeviceMemoryManager manager) {
            MemoryInfo now = DeviceSampler.safeInfo(manager);
            if (now == null) {
                return;
            }
            synchronized (this) {
                if (heard || !on) {
                    return;
                }
                MemoryPressure level = now.pressureLevel();
                MemoryPressure before = levels.put(device, level);
                if (before != null && before != level) {
                    notifier.pressureChanged(device, before, level, now);
                }
            }
        }
    }

    /**
     * Starts following {@code manager}, now serving {@code device}.
     *
     * @param info its figures when it came, the starting level; null if it could not say
     */
    void subscribe(Device device, DeviceMemoryManager manager, MemoryInfo info) {
        if (info != null) {
            // Before the observer is added: a reporting manager may tell a change as soon as it has it,
            // and that change is newer than these figures, which must not overwrite it.
            MemoryPressure level = info.pressureLevel();
            MemoryPressure was = levels.put(device, level);
            if (was != null && was != level) {
                // Another manager took over the device at another level: a change like any other, or
                // the newcomer's next one would reach the observers from a level they were never told.
                notifier.pressureChanged(device, was, level, info);
            }
        }
        Follower listener = new Follower(device);
        boolean reports;
        try {
            reports = manager.addPressureObserver(listener);
        } catch (VirtualMachineError fatal) {
            throw fatal;
        } catch (Throwable e) {
            reports = false;
        }
        if (reports) {
            reporting.put(manager, listener);
            derived.remove(device);
            listener.catchUp(manager);
        } else {
            derived.put(device, new Source(manager));
        }
    }

    /** Stops following {@code manager}, which no longer serves {@code device}. */
    void unsubscribe(Device device, DeviceMemoryManager manager) {
        Source source = derived.get(device);
        if (source != null && source.manager == manager) {
            end(source);
            derived.remove(device, source);
        }
        Follower listener = reporting.remove(manager);
        if (listener != null) {
            // Under its lock: a tell that found it on ends first (it may record the level), and no
            // later one records anything; the caller may forget the device next.
            synchronized (listener) {
                listener.on = false;
            }
            try {
                manager.removePressureObserver(listener);
            } catch (VirtualMachineError fatal) {
                throw fatal;
            } catch (Throwable ignored) {
                // A manager that is going away may fail to remove it; nothing more can be done here.
            }
        }
    }

    /** Forgets a device that no manager serves any more. */
    void forget(Device device) {
        Source source = derived.remove(device);
        if (source != null) {
            end(source);
        }
        levels.remove(device);
    }

    /** Waits for a derivation from {@code source} under way and ends its use: later ones derive nothing. */
    private static void end(Source source) {
        synchronized (source) {
            source.gone = true;
        }
    }

    /** {@link #derive(Device, DeviceMemoryManager, MemoryInfo, long)} from figures read just now. */
    void derive(Device device, DeviceMemoryManager manager, MemoryInfo info) {
        derive(device, manager, info, reading());
    }

    /**
     * Derives the level of {@code device} from figures of {@code manager}, if its level is derived
     * from that manager and no newer reading was derived from, and tells a change.
     *
     * @param reading the number {@link #reading} (or {@link #readingFor}) gave before the figures were
     *                read; -1: none, nothing is derived
     */
    void derive(Device device, DeviceMemoryManager manager, MemoryInfo info, long reading) {
        Source source = derived.get(device);
        if (reading < 0 || source == null || source.manager != manager) {
            return;
        }
        MemoryPressure now = info.pressureLevel();
        // Not a hot path (a sample, a routing refresh every 64 calls of a thread); the tell only queues.
        synchronized (source) {
            if (source.gone) {
                return; // the device went, or its manager, since the source was read: no level comes back
            }
            if (reading < source.reading) {
                return; // figures older than those the level came from
            }
            source.reading = reading;
            MemoryPressure before = levels.get(device);
            if (before == null) {
                if (levels.putIfAbsent(device, now) == null) {
                    return; // the first level known: nothing changed
                }
                before = levels.get(device);
                if (before == null) {
                    return; // forgotten meanwhile
                }
            }
            if (before != now && levels.replace(device, before, now)) {
                notifier.pressureChanged(device, before, now, info);
            }
        }
    }

    /** @return every device's level, as of now */
    Map<Device, MemoryPressure> snapshot() {
        return Map.copyOf(levels);
    }

    /** Removes every observer this registered; on deactivation. */
    void clear() {
        reporting.forEach((m, l) -> {
            synchronized (l) {
                l.on = false;
            }
            try {
                m.removePressureObserver(l);
            } catch (RuntimeException ignored) {
                // The monitor is stopping: a manager that fails here is left as it is.
            }
        });
        reporting.clear();
        derived.clear();
    }
}
