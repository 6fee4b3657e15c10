package io.ferrum.memory.strategy.mostfree;

import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.osgi.service.component.annotations.Component;

import io.ferrum.memory.api.AllocationRequirements;
import io.ferrum.memory.api.AllocationStrategy;
import io.ferrum.memory.api.Device;
import io.ferrum.memory.api.MemoryInfo;
import io.ferrum.memory.api.StrategyName;

/**
 * Spreads load: the device with the most free bytes that can hold the request. On a tie the
 * preferred device (earlier in the preference list) wins, then the one earlier in {@code available}.
 */
@Component(service = AllocationStrategy.class)
@StrategyName(MostFreeStrategy.NAME)
public final class MostFreeStrategy implements AllocationStrategy {
    /** The strategy's name: its {@value AllocationStrategy#NAME_PROPERTY} service property and {@link #name()}. */
    static final String NAME = "most-free";

    /**
     * The API classes {@link #selectDevice} names, loaded when the monitor takes this strategy (its
     * service object is made then), before any select. A swap may make a strategy active that was
     * never asked, while Equinox uninstalls the api: its loader then refuses this bundle's first ask
     * for any of them, though it defined them long before. MonitorIT fails on one left out.
     */
    static final List<Class<?>> LOADED_EARLY = List.of(AllocationRequirements.class, Device.class, MemoryInfo.class);

    @Override
    public Optional<Device> selectDevice(long size, AllocationRequirements requirements, List<Device> available,
                                         Map<Device, MemoryInfo> memoryInfo) {
        Device best = null;
        long bestFree = -1;
        int bestPreference = Integer.MAX_VALUE;
        for (Device device : available) {
            MemoryInfo info = memoryInfo.get(device);
            if (info == null || info.freeBytes() < size) {
                continue;
            }
            int p = requirements.preferenceOf(device);
            int preference = p < 0 ? Integer.MAX_VALUE - 1 : p;
            if (info.freeBytes() > bestFree || (info.freeBytes() == bestFree && preference < bestPreference)) {
                best = device;
                bestFree = info.freeBytes();
                bestPreference = preference;
            }
        }
        return Optional.ofNullable(best);
    }

    @Override
    public String name() {
        return NAME;
    }
}
