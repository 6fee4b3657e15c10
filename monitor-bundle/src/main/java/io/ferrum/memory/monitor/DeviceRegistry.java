package io.ferrum.memory.monitor;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Predicate;

import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.DeviceMemoryManager;
import io.ferrum.memory.api.HandleSpace;
import io.ferrum.memory.api.InvalidMemoryRequestException;
import io.ferrum.memory.api.MemoryHandle;

/**
 * The repository of managers: which manager serves which device, and which manager issued a handle.
 *
 * <p>Several managers may claim one device: a manager registered by hand ({@code registerManager})
 * comes first, then the higher service ranking, then the older service (lower service id). Only the
 * first serves new allocations, but every manager present keeps routing the handles it issued.
 *
 * <p>Handles are routed through the {@link HandleSpace} each manager declares, never through any
 * knowledge of a manager's id layout: bounded spaces go into one {@link PrefixTable} per mask (the
 * mask most managers share is the {@code primary} table, the one lookup a free costs); a manager with
 * {@link HandleSpace#ANY} is asked {@link DeviceMemoryManager#owns} last.
 *
 * <p>Invariants: writers are serialised on this object; readers see one immutable {@link Routes}
 * (the device map and the handle tables together), replaced as a whole by each change in one volatile
 * write, so a reader never sees half a change
 * and a snapshot's identity says whether the devices changed. The spaces of managers that went away
 * are remembered (the last {@value #DEPARTED_MEMORY}) so that a late handle of theirs is reported as
 * "its device went away" rather than "never allocated". No two managers present have bounded
 * spaces that share an id: {@link #add} refuses the later one (a {@link PrefixTable} keeps one
 * manager per prefix, and the first owner's handles must keep reaching it).
 */
final class DeviceRegistry {
    private static final int DEPARTED_MEMORY = 1024;
    private static final PrefixTable[] NO_TABLES = new PrefixTable[0];
    private static final PrefixTable NO_SPACES = new PrefixTable(0, Map.of());

    /**
     * One manager present for one device.
     *
     * @param space     the handle space it declared when it came ({@link #spaceOf})
     * @param serviceId its service id; -1 for a manager registered by hand
     * @param byHand    registered through {@code registerManager} rather than the service registry
     */
    record Entry(Device device, DeviceMemoryManager manager, HandleSpace space, int ranking, long serviceId,
                 boolean byHand) {
    }

    /** What an add or remove did to the device's serving manager ({@code before}, {@code after}: null for none). */
    record Change(Device device, DeviceMemoryManager before, DeviceMemoryManager after) {
        boolean added() {
            return before == null && after != null;
        }

        boolean removed() {
            return before != null && after == null;
        }
    }

    private static final Comparator<Entry> PRECEDENCE = Comparator.<Entry>comparingInt(e -> e.byHand() ? 0 : 1)
            .thenComparing(Comparator.comparingInt(Entry::ranking).reversed())
            .thenComparingLong(Entry::serviceId);

    private final Map<Device, List<Entry>> entries = new HashMap<>();
    private final Map<HandleSpace, Device> departed = new LinkedHashMap<>(16, 0.75f, false) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<HandleSpace, Device> eldest) {
            return size() > DEPARTED_MEMORY;
        }
    };
    /** The current publication: replaced as a whole, in one write, by each change. */
    private volatile Routes routes = new Routes(Map.of(), NO_SPACES, NO_TABLES, List.of());

    /**
     * Asks a manager, a plugin, for its handle space once, when it comes: a manager that fails or
     * answers null is treated as one that does not say ({@link HandleSpace#ANY}).
     */
    static HandleSpace spaceOf(DeviceMemoryManager manager) {
        try {
            HandleSpace s = manager.handleSpace();
            return s == null ? HandleSpace.ANY : s;
        } catch (VirtualMachineError fatal) {
            throw fatal;
        } catch (Throwable e) {
            return HandleSpace.ANY;
        }
    }

    /**
     * @throws InvalidMemoryRequestException when {@code e}'s bounded handle space shares ids with the
     *                                       space of another manager present: handles of one id would
     *                                       have two owners, and one table keeps only one of them. The
     *                                       manager present first keeps its handles; {@code e} is not added.
     */
    synchronized Change add(Entry e) {
        Entry clash = overlapping(e);
        if (clash != null) {
            throw new InvalidMemoryRequestException("Refused the manager " + e.manager() + " for " + e.device()
                    + ": its handle space " + describe(e.space()) + " overlaps the space " + describe(clash.space())
                    + " of the manager " + clash.manager() + " of " + clash.device() + ", so handles with equal ids"
                    + " would have two owners. " + clash.device() + "'s manager keeps its handles; fix the refused"
                    + " plugin's handleSpace()");
        }
        DeviceMemoryManager before = routes.active().get(e.device());
        List<Entry> list = entries.computeIfAbsent(e.device(), d -> new ArrayList<>());
        list.add(e);
        list.sort(PRECEDENCE);
        if (e.space().isBounded()) {
            departed.remove(e.space());
        }
        publish();
        return new Change(e.device(), before, routes.active().get(e.device()));
    }

    /** @return an entry of another manager whose bounded space shares an id with {@code e}'s, or null */
    private Entry overlapping(Entry e) {
        HandleSpace a = e.space();
        if (!a.isBounded()) {
            return null; // asked owns() last: it can take no bounded space's handle
        }
        for (List<Entry> l : entries.values()) {
            for (Entry x : l) {
                HandleSpace b = x.space();
                // Two spaces share an id unless their prefixes differ under the bits both masks fix.
                if (x.manager() != e.manager() && b.isBounded() && ((a.prefix() ^ b.prefix()) & a.mask() & b.mask()) == 0) {
                    return x;
                }
            }
        }
        return null;
    }

    private static String describe(HandleSpace s) {
        return "0x" + Long.toHexString(s.prefix()) + "/0x" + Long.toHexString(s.mask());
    }

    /**
     * Removes the entries of {@code manager} for {@code device} (every by-hand entry of the device
     * when {@code manager} is null). Its space is remembered as departed unless the same manager is
     * still present for another device.
     */
    synchronized Change remove(Device device, DeviceMemoryManager manager, boolean byHand) {
        return remove(device, x -> x.byHand() == byHand && (manager == null || x.manager() == manager));
    }

    /**
     * Removes {@code entry} itself (compared by identity) if it is still present: an equal entry
     * added again by another registration stays.
     */
    synchronized Change remove(Entry entry) {
        return remove(entry.device(), x -> x == entry);
    }

    /** @return whether {@code entry} itself (compared by identity) is present */
    synchronized boolean contains(Entry entry) {
        List<Entry> list = entries.get(entry.device());
        return list != null && list.stream().anyMatch(x -> x == entry);
    }

    private Change remove(Device device, Predicate<Entry> which) {
        DeviceMemoryManager before = routes.active().get(device);
        List<Entry> list = entries.get(device);
        if (list != null) {
            for (Iterator<Entry> it = list.iterator(); it.hasNext(); ) {
                Entry x = it.next();
                if (which.test(x)) {
                    it.remove();
                    if (x.space().isBounded() && !presentElsewhere(x.manager())) {
                        departed.put(x.space(), device);
                    }
                }
            }
            if (list.isEmpty()) {
                entries.remove(device);
            }
        }
        publish();
        return new Change(device, before, routes.active().get(device));
    }

    private boolean presentElsewhere(DeviceMemoryManager manager) {
        for (List<Entry> l : entries.values()) {
            for (Entry x : l) {
                if (x.manager() == manager) {
                    return true;
                }
            }
        }
        return false;
    }

    /** Replaces every snapshot readers see; called with the lock held. */
    private void publish() {
        Map<Device, DeviceMemoryManager> a = new TreeMap<>();
        Map<Long, Map<Long, DeviceMemoryManager>> byMask = new LinkedHashMap<>();
        List<DeviceMemoryManager> rest = new ArrayList<>();
        for (Map.Entry<Device, List<Entry>> e : entries.entrySet()) {
            a.put(e.getKey(), e.getValue().get(0).manager());
            for (Entry x : e.getValue()) {
                if (x.space().isBounded()) {
                    byMask.computeIfAbsent(x.space().mask(), m -> new HashMap<>()).put(x.space().prefix(), x.manager());
                } else if (!rest.contains(x.manager())) {
                    rest.add(x.manager());
                }
            }
        }
        List<PrefixTable> tables = new ArrayList<>();
        byMask.forEach((mask, prefixes) -> tables.add(new PrefixTable(mask, prefixes)));
        tables.sort(Comparator.comparingInt(PrefixTable::size).reversed());
        // One write: a reader that sees a manager serve a device also routes that manager's handles.
        routes = new Routes(Collections.unmodifiableMap(a), tables.isEmpty() ? NO_SPACES : tables.get(0),
                tables.size() > 1 ? tables.subList(1, tables.size()).toArray(NO_TABLES) : NO_TABLES,
                List.copyOf(rest));
    }

    /**
     * @return the serving manager of every device, in device order; the same instance until the
     *         devices change
     */
    Map<Device, DeviceMemoryManager> active() {
        return routes().active();
    }

    /** @return the manager that issued {@code handle} (not null), or null */
    DeviceMemoryManager ownerOf(MemoryHandle handle) {
        return routes().ownerOf(handle);
    }

    /** @return one publication of the registry: its device map and handle routes agree */
    Routes routes() {
        return routes;
    }

    /**
     * One publication of the registry, immutable: the serving manager of each device and the tables
     * that route handles. Every manager in {@code active} routes its handles through the tables of
     * the same publication.
     */
    record Routes(Map<Device, DeviceMemoryManager> active, PrefixTable primary, PrefixTable[] others,
                  List<DeviceMemoryManager> unbounded) {

        /** @return the manager that issued {@code handle} (not null), or null */
        DeviceMemoryManager ownerOf(MemoryHandle handle) {
            DeviceMemoryManager m = primary.get(handle.id());
            return m != null ? m : ownerElsewhere(handle);
        }

        /** The tables of the other masks, then the managers without a space (kept out of the hot lookup). */
        private DeviceMemoryManager ownerElsewhere(MemoryHandle handle) {
            for (PrefixTable t : others) {
                DeviceMemoryManager m = t.get(handle.id());
                if (m != null) {
                    return m;
                }
            }
            for (DeviceMemoryManager o : unbounded) {
                try {
                    if (o.owns(handle)) {
                        return o;
                    }
                } catch (VirtualMachineError fatal) {
                    throw fatal;
                } catch (Throwable failedManager) {
                    // A manager that cannot answer does not own the handle; the others are still asked.
                }
            }
            return null;
        }
    }

    /** @return the device whose manager issued {@code handleId} and went away, or null */
    synchronized Device departedDevice(long handleId) {
        for (Map.Entry<HandleSpace, Device> e : departed.entrySet()) {
            if (e.getKey().contains(handleId)) {
                return e.getValue();
            }
        }
        return null;
    }
}
