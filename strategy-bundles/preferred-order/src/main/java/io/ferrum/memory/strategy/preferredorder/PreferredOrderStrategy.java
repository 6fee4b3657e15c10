package io.ferrum.memory.strategy.preferredorder;

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
 * The first preferred device that is available and can hold the request; if none can, the first
 * device in {@code available} that can.
 */
@Component(service = AllocationStrategy.class)
@StrategyName(PreferredOrderStrategy.NAME)
public final class PreferredOrderStrategy implements AllocationStrategy {
    /** The strategy's name: its {@value AllocationStrategy#NAME_PROPERTY} service property and {@link #name()}. */
    static final String NAME = "preferred-order";

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
        for (Device d : requirements.preferredDevices()) {
            if (available.contains(d) && fits(size, memoryInfo.get(d))) {
                return Optional.of(d);
            }
        }
        for (Device d : available) {
            if (fits(size, memoryInfo.get(d))) {
                return Optional.of(d);
            }
        }
        return Optional.empty();
    }

    private static boolean fits(long size, MemoryInfo info) {
        return info != null && info.freeBytes() >= size;
    }

    @Override
    public String name() {
        return NAME;
    }
}
