package io.ferrum.memory.strategy.roundrobin;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;

import org.osgi.service.component.annotations.Component;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.AllocationStrategy;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.StrategyName;

/**
 * Rotates among the devices that can hold the request, in their natural order ({@code cpu:0 <
 * cpu:1 < cuda:0}): the n-th call picks the (n mod k)-th of the k devices that fit. Preferences are
 * ignored; thread-safe.
 */
@Component(service = AllocationStrategy.class)
@StrategyName(RoundRobinStrategy.NAME)
public final class RoundRobinStrategy implements AllocationStrategy {
    /** The strategy's name: its {@value AllocationStrategy#NAME_PROPERTY} service property and {@link #name()}. */
    static final String NAME = "round-robin";

    /**
     * The API classes {@link #selectDevice} names, loaded when the monitor takes this strategy (its
     * service object is made then), before any select. A swap may make a strategy active that was
     * never asked, while Equinox uninstalls the api: its loader then refuses this bundle's first ask
     * for any of them, though it defined them long before. MonitorIT fails on one left out.
     */
    static final List<Class<?>> LOADED_EARLY = List.of(AllocationRequirements.class, Device.class, MemoryInfo.class);

    private final AtomicLong turn = new AtomicLong();

    @Override
    public Optional<Device> selectDevice(long size, AllocationRequirements requirements, List<Device> available,
                                         Map<Device, MemoryInfo> memoryInfo) {
        List<Device> fitting = new ArrayList<>(available.size());
        for (Device d : available) {
            MemoryInfo info = memoryInfo.get(d);
            if (info != null && info.freeBytes() >= size) {
                fitting.add(d);
            }
        }
        if (fitting.isEmpty()) {
            return Optional.empty();
        }
        fitting.sort(null);
        return Optional.of(fitting.get((int) Math.floorMod(turn.getAndIncrement(), (long) fitting.size())));
    }

    @Override
    public String name() {
        return NAME;
    }
}
