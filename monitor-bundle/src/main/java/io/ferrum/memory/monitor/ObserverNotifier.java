package io.ferrum.memory.monitor;

import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.Function;
import java.util.function.Supplier;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.MemoryObserver;
import io.ferrum.memory.api.MemoryPressure;

/**
 * The notifier: tells the observers on the whiteboard, and the global pressure callback, what
 * happened to the devices.
 *
 * <p>Every observer has its own {@link ObserverLane} (and the global callback one more), so calls to
 * one observer keep their order while a slow observer delays nobody else; the callers (a binding
 * thread, the sampler, an allocating thread crossing a pressure edge) only queue and return. An
 * observer registered with a {@code memory.device} property hears only about that device. A new
 * observer hears each device added once, and removed only after it heard it added; its samples show
 * only the devices it heard added and not removed. An observer hears
 * each pressure change from the level it heard last (none is told that would not change it), and
 * once its lane caught up after dropping changes, the arrivals and departures it missed (through the
 * monitor's catch-up, under each device's lock) and the level each device whose change it missed is
 * at then: pressure changes are edge-triggered, and the last of a flood, dropped, left it at a level
 * the device had left; a dropped departure left it a device for good.
 *
 * <p>Invariants: every call into an observer, a plugin, is guarded: whatever it throws (an Error too,
 * such as the {@code NoClassDefFoundError} of an observer whose bundle was refreshed) is logged and
 * the observer keeps receiving calls; only a {@link VirtualMachineError} passes. A removed observer
 * is never called again, not even with calls already queued; once {@link #stop() stopped}, nobody is
 * told anything.
 */
final class ObserverNotifier {

    /**
     * A pressure change a lane dropped: the level it told of, and the figures of that change. Made on
     * the allocating thread whose change a full lane drops: loaded early ({@link Router#LOADED_EARLY}).
     */
    record Dropped(MemoryPressure current, MemoryInfo info) {
    }

    /** One observer and its lane. */
    private static final class Entry {
        final MemoryObserver observer;
        /** The only device it hears about, or null for all. */
        final Device only;
        final ObserverLane lane;
        /**
         * The devices it was told of as added and not yet as removed: the arrival of a device and the
         * catch-up of a new observer may both reach it; it hears the device added once, and removed
         * only if it heard it added.
         */
        final Set<Device> told = ConcurrentHashMap.newKeySet();
        /**
         * The devices it has heard added and not removed, as its lane's calls ran (a sample read before
         * a device left may run after it heard so): the devices its samples show.
         */
        final Set<Device> present = ConcurrentHashMap.newKeySet();
        /** Per device, the pressure level it was told last (written by its lane's calls only). */
        final Map<Device, MemoryPressure> heard = new ConcurrentHashMap<>();
        /** Per device, the last pressure change its lane dropped, for the lane's settling. */
        final Map<Device, Dropped> missed = new ConcurrentHashMap<>();
        /** Its lane dropped an arrival or a departure: the lane's settling has the monitor tell it again. */
        volatile boolean devicesMissed;
        volatile boolean removed;

        Entry(MemoryObserver observer, Device only, Function<Entry, ObserverLane> lane) {
            this.observer = observer;
            this.only = only;
            this.lane = lane.apply(this);
        }

        boolean wants(Device d) {
            return only == null || only.equals(d);
        }
    }

    private final CopyOnWriteArrayList<Entry> observers = new CopyOnWriteArrayList<>();
    /** Runs the lanes; a thread per lane that has work, none for an idle one. */
    private final ExecutorService threads = Executors.newCachedThreadPool(MemoryMonitor.daemon("ferrum-monitor-events"));
    private final int laneCapacity;
    private final MonitorLog log;
    private final Supplier<Map<Device, MemoryPressure>> levels;
    private final ObserverLane.Drops drops;
    private final ObserverLane globalLane;
    private volatile Consumer<Map<Device, MemoryPressure>> globalCallback;
    /** Guarded by this: who set {@link #globalCallback} (see {@link #setGlobalCallback}). */
    private Object globalOwner;
    private volatile boolean stopped;
    /**
     * Tells an observer (a token of {@link #add}) what it missed of the devices: the monitor's
     * catch-up, run under each device's lock; null: none (tests of the notifier alone).
     */
    private volatile Consumer<Object> deviceCatchUp;

    /**
     * @param laneCapacity notifications that may wait for one observer before further ones are dropped
     * @param levels       every device's pressure level, as the global callback receives them
     */
    ObserverNotifier(int laneCapacity, Supplier<Map<Device, MemoryPressure>> levels, MonitorLog log) {
        this.laneCapacity = laneCapacity;
        this.levels = levels;
        this.log = log;
        drops = new ObserverLane.Drops() {
            @Override
            public void started(ObserverLane lane) {
                log.warn(lane.name() + " is " + lane.capacity() + " notifications behind: further ones are dropped"
                        + " for it until it catches up; the other observers are not affected", null);
            }

            @Override
            public void ended(ObserverLane lane, int count) {
                log.warn(lane.name() + " caught up; " + count + " notifications for it were dropped", null);
            }
        };
        globalLane = new ObserverLane("The global pressure callback", threads, laneCapacity, drops);
    }

    /**
     * @param only the only device the observer hears about, or null for all
     * @return a token for {@link #deviceAdded(Object, Device, MemoryInfo)}: tells this observer alone
     */
    Object add(MemoryObserver observer, Device only) {
        Entry e = new Entry(observer, only, entry -> new ObserverLane("Memory observer " + observer, threads, laneCapacity,
                new ObserverLane.Drops() {
                    @Override
                    public void started(ObserverLane lane) {
                        drops.started(lane);
                    }

                    @Override
                    public void ended(ObserverLane lane, int count) {
                        drops.ended(lane, count);
                    }

                    @Override
                    public void settle(ObserverLane lane) {
                        settleMissed(entry);
                    }
                }));
        observers.add(e);
        return e;
    }

    /**
     * In {@code e}'s lane, caught up after drops: has the monitor tell it the arrivals and departures
     * its lane dropped, then queues, for each device whose pressure change it dropped and that still
     * has a level, a change from the level it heard last to the level now (nothing when they are the
     * same), with the dropped change's figures when it told of that level.
     */
    private void settleMissed(Entry e) {
        try {
            if (e.removed || stopped) {
                return;
            }
            Consumer<Object> catchUp = deviceCatchUp;
            if (e.devicesMissed && catchUp != null) {
                e.devicesMissed = false;
                catchUp.accept(e); // arrivals and departures first: the levels below are of devices it has
            }
            Map<Device, MemoryPressure> now = levels.get();
            for (Map.Entry<Device, Dropped> m : e.missed.entrySet()) {
                Device d = m.getKey();
                Dropped last = m.getValue();
                e.missed.remove(d, last);
                MemoryPressure level = now.get(d);
                if (level != null) {
                    // An observer that heard no level of d yet starts from LOW.
                    tellPressure(e, d, MemoryPressure.LOW, level, last.current() == level ? last.info() : null);
                }
            }
        } catch (VirtualMachineError fatal) {
            throw fatal;
        } catch (Throwable ex) {
            log.warn("Telling memory observer " + e.observer + " what its full lane dropped failed", ex);
        }
    }

    void remove(MemoryObserver observer) {
        for (Entry e : observers) {
            if (e.observer == observer) {
                e.removed = true;
                e.lane.close();
                observers.remove(e);
            }
        }
    }

    /**
     * Tells one observer (a token of {@link #add}) that a device exists, unless it was told already: a
     * late observer learns the devices. Called under the device's lock, as are the two below, so that
     * each observer hears a device added, then removed, once each.
     */
    void deviceAdded(Object observer, Device device, MemoryInfo info) {
        Entry e = (Entry) observer;
        if (e.wants(device) && e.told.add(device)) {
            postArrival(e, device, info);
        }
    }

    /**
     * Tells one observer (a token of {@link #add}) that a device it was told of is gone, unless it was
     * told so already; called under the device's lock, by the catch-up after its lane dropped calls.
     */
    void deviceRemoved(Object observer, Device device) {
        Entry e = (Entry) observer;
        if (e.told.remove(device)) {
            postDeparture(e, device);
        }
    }

    /** @return the devices {@code observer} (a token of {@link #add}) was told of, added and not removed */
    Set<Device> toldOf(Object observer) {
        return Set.copyOf(((Entry) observer).told);
    }

    /** @param catchUp the monitor's catch-up of an observer whose lane dropped an arrival or a departure */
    void onDevicesMissed(Consumer<Object> catchUp) {
        deviceCatchUp = catchUp;
    }

    /** Queues an arrival the caller noted in {@code e.told}; a dropped one is taken back from it, for the catch-up. */
    private void postArrival(Entry e, Device device, MemoryInfo info) {
        post(e, o -> added(e, o, device, info), () -> {
            e.told.remove(device);
            e.devicesMissed = true;
        });
    }

    /** Queues a departure the caller took from {@code e.told}; a dropped one is put back, for the catch-up. */
    private void postDeparture(Entry e, Device device) {
        post(e, o -> {
            e.present.remove(device);
            e.heard.remove(device);
            o.deviceRemoved(device);
        }, () -> {
            e.told.add(device);
            e.devicesMissed = true;
        });
    }

    /** In {@code e}'s lane: tells it a device was added. */
    private static void added(Entry e, MemoryObserver o, Device device, MemoryInfo info) {
        e.present.add(device);
        o.deviceAdded(device, info);
    }

    /** A device arrived: every observer that wants it hears so (and the catch-up of a new one will not again). */
    void deviceAdded(Device device, MemoryInfo info) {
        for (Entry e : observers) {
            if (e.wants(device)) {
                e.told.add(device);
                postArrival(e, device, info);
            }
        }
    }

    /** A device left: every observer told of it hears so; one that joined since and never was, does not. */
    void deviceRemoved(Device device) {
        for (Entry e : observers) {
            if (e.told.remove(device)) {
                postDeparture(e, device);
            }
        }
    }

    /**
     * Queues a pressure change for {@code e}: told, when it runs, from the level {@code e} heard last
     * ({@code previous} if none), and not at all if that is {@code current}. A dropped one is kept
     * for the lane's settling.
     */
    private void tellPressure(Entry e, Device device, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
        if (stopped) {
            return;
        }
        e.lane.offer(() -> call(e, o -> {
            MemoryPressure from = e.heard.getOrDefault(device, previous);
            if (from != current) {
                e.heard.put(device, current);
                o.pressureChanged(device, from, current, info);
            }
        }), () -> e.missed.put(device, new Dropped(current, info)));
    }

    /**
     * Tells the observers and the global callback; may be called from an allocating thread under a
     * manager's notification lock, so it only queues.
     */
    void pressureChanged(Device device, MemoryPressure previous, MemoryPressure current, MemoryInfo info) {
        for (Entry e : observers) {
            if (e.wants(device)) {
                tellPressure(e, device, previous, current, info);
            }
        }
        if (globalCallback != null && !stopped) {
            globalLane.offer(this::callGlobal);
        }
    }

    /** @param all every device's figures; an observer of one device gets that device's alone */
    void sample(Map<Device, MemoryInfo> all) {
        for (Entry e : observers) {
            Map<Device, MemoryInfo> mine = e.only == null ? all
                    : all.containsKey(e.only) ? Map.of(e.only, all.get(e.only)) : Map.of();
            post(e, o -> o.sample(present(e, mine)));
        }
    }

    /**
     * In {@code e}'s lane: the devices of a sample it has heard added and not removed (the sample was
     * read before a device left, or before its arrival was told).
     */
    private static Map<Device, MemoryInfo> present(Entry e, Map<Device, MemoryInfo> sample) {
        if (e.present.containsAll(sample.keySet())) {
            return sample;
        }
        Map<Device, MemoryInfo> out = new java.util.TreeMap<>();
        sample.forEach((d, i) -> {
            if (e.present.contains(d)) {
                out.put(d, i);
            }
        });
        return java.util.Collections.unmodifiableMap(out);
    }

    /**
     * @param owner    who sets it (a bundle's view of the monitor), or null for a caller without one;
     *                 only this owner's {@link #releaseGlobalCallback} removes it
     * @param callback the callback, or null for none
     */
    synchronized void setGlobalCallback(Object owner, Consumer<Map<Device, MemoryPressure>> callback) {
        globalOwner = owner;
        globalCallback = callback;
    }

    /** @return the global callback that stands, or null (tests) */
    Consumer<Map<Device, MemoryPressure>> globalCallback() {
        return globalCallback;
    }

    /** Removes the callback if {@code owner} (not null) set the one that stands; a later one of another stays. */
    synchronized void releaseGlobalCallback(Object owner) {
        if (owner != null && globalOwner == owner) {
            globalOwner = null;
            globalCallback = null;
        }
    }

    /** Closes every lane and waits (a few seconds at most) for the calls running to finish. */
    void stop() {
        stopped = true;
        globalLane.close();
        for (Entry e : observers) {
            e.lane.close();
        }
        threads.shutdown();
        try {
            threads.awaitTermination(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void post(Entry e, Consumer<MemoryObserver> call) {
        post(e, call, null);
    }

    /** @param ifDropped run under the lane's lock if the lane drops the call, or null */
    private void post(Entry e, Consumer<MemoryObserver> call, Runnable ifDropped) {
        if (!stopped) {
            e.lane.offer(() -> call(e, call), ifDropped);
        }
    }

    private void call(Entry e, Consumer<MemoryObserver> call) {
        if (e.removed || stopped) {
            return; // unregistered or stopped while the call waited
        }
        try {
            call.accept(e.observer);
        } catch (VirtualMachineError fatal) {
            throw fatal;
        } catch (Throwable ex) {
            // Errors too: one escaping here would end the lane's run with the lane still marked
            // running, and this observer would never be called again.
            // A call begun before the observer was removed (its bundle stopping, its classes going)
            // is its last: it receives no more.
            log.warn("Memory observer " + e.observer + (e.removed ? " failed in a call begun before it was removed;"
                    + " it receives no more calls" : " failed; it keeps receiving calls"), ex);
        }
    }

    /** Reads the levels when it runs, not when queued: a callback behind on its lane gets the latest. */
    private void callGlobal() {
        Consumer<Map<Device, MemoryPressure>> cb = globalCallback;
        if (cb == null || stopped) {
            return;
        }
        try {
            cb.accept(levels.get());
        } catch (VirtualMachineError fatal) {
            throw fatal;
        } catch (Throwable ex) {
            log.warn("Global pressure callback " + cb + " failed; it keeps receiving calls", ex);
        }
    }
}
